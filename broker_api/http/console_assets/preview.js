// A message body as the console shows it: text when the API sent text, else hex of the bytes.

const TEXT_MAX = 400;
const HEX_MAX = 64;

function hexOf(b64) {
  const raw = atob(b64);
  const shown = Math.min(raw.length, HEX_MAX);
  const parts = [];
  for (let i = 0; i < shown; i += 1) parts.push(raw.charCodeAt(i).toString(16).padStart(2, "0"));
  return { text: parts.join(" ") + (raw.length > shown ? " ..." : ""), size: raw.length };
}

// {kind: "text" | "hex", text, size} of a message answered by the JSON API.
export function preview(message) {
  if (message.body_base64 !== undefined) return { kind: "hex", ...hexOf(message.body_base64) };
  const body = message.body ?? "";
  const size = new TextEncoder().encode(body).length;
  return { kind: "text", text: body.length > TEXT_MAX ? `${body.slice(0, TEXT_MAX)} ...` : body, size };
}

// Topics: every topic with its queues, their min/max offsets and its table mode.

import { api, errorBox, seg } from "./api.js";
import { fmtBytes, fmtNum, h, section, table } from "./dom.js";

function queueTable(t) {
  return table(["Queue", "Min offset", "Max offset", "Messages"], t.queue_offsets.map((q) => [
    q.queue_id, fmtNum(q.min_offset), fmtNum(q.max_offset), fmtNum(q.max_offset - q.min_offset)]));
}

// "off", or the mode and write mode of the topic's own Delta table ("typed, upsert").
export function tableMode(t) {
  const mode = (t.table && t.table.mode) || "off";
  return mode === "off" ? "off" : `${mode}, ${t.table.write_mode || "append"}`;
}

function tableLine(s) {
  if (!s) return null;
  return h("p", { class: "pop" }, `Table: ${fmtNum(s.rows)} rows, ${fmtNum(s.dlq_rows)} dead-letter rows, `,
    `lag ${fmtBytes(s.lag_bytes)}${s.last_error ? `, last error: ${s.last_error}` : ""} (see Tables)`);
}

function topicCard(t) {
  return h("details", { class: "topic", "data-topic": t.name, open: true },
    h("summary", {}, h("strong", {}, t.name), ` ${t.queues} queues, perm ${t.perm || "none"}, `,
      `${fmtNum(t.messages)} messages, table ${tableMode(t)}`),
    tableLine(t.table_status), queueTable(t));
}

// A topic the user may list but not read (ACL) shows its error instead of its queues.
async function describe(t) {
  try {
    return await api(`/v1/topics/${seg(t.name)}`);
  } catch (err) {
    return { ...t, error: err };
  }
}

function errorCard(t) {
  return h("details", { class: "topic", "data-topic": t.name, open: true },
    h("summary", {}, h("strong", {}, t.name), ` ${t.queues} queues, perm ${t.perm || "none"}`), errorBox(t.error));
}

export async function render(root) {
  const list = await api("/v1/topics");
  const described = await Promise.all(list.map(describe));
  const summary = table(["Topic", "Queues", "Perm", "Messages", "Table"],
    described.map((t) => [t.name, t.queues, t.perm, t.error ? "-" : fmtNum(t.messages), tableMode(t)]),
    "no topic yet");
  root.append(section(`Topics (${list.length})`, summary),
    ...described.map((t) => (t.error ? errorCard(t) : topicCard(t))));
}

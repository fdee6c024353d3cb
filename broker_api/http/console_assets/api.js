// The one way the console calls the broker or NameServer: fetch with the token, errors as ApiError.

const TOKEN_KEY = "sparkmq.console.token";

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }

  toString() {
    const hint = this.status === 401 ? " (type a token user:secret in the token box above)" : "";
    return `${this.status} ${this.code}: ${this.message}${hint}`;
  }
}

export function getToken() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

// A path segment: topic names such as %RETRY%group must be percent-encoded.
export const seg = encodeURIComponent;

async function failure(resp) {
  const text = await resp.text();
  try {
    const doc = JSON.parse(text);
    if (doc && doc.error) return new ApiError(resp.status, doc.error, doc.message || "");
  } catch (_) { /* not JSON: fall through */ }
  return new ApiError(resp.status, `http_${resp.status}`, text.slice(0, 300) || resp.statusText);
}

// GET (or method) `path`; a JSON body when `body` is given; text when `asText`.
export async function api(path, { method = "GET", body, asText = false } = {}) {
  const headers = { Accept: asText ? "text/plain" : "application/json" };
  const token = getToken();
  if (token) headers.Authorization = `Bearer ${token}`;
  const init = { method, headers };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(path, init);
  } catch (exc) {
    throw new ApiError(0, "unreachable", `${path}: ${exc.message}; is the server up?`);
  }
  if (!resp.ok) throw await failure(resp);
  return asText ? resp.text() : resp.json();
}

// A clear error box for any thrown value.
export function errorBox(err) {
  const el = document.createElement("div");
  el.className = "error";
  el.setAttribute("role", "alert");
  el.textContent = err instanceof ApiError ? err.toString() : `error: ${err && err.message ? err.message : err}`;
  return el;
}

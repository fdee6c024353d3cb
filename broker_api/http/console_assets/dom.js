// Small DOM helpers: build elements, tables and formatted values without a framework.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function table(headers, rows, empty = "none") {
  if (rows.length === 0) return h("p", { class: "empty" }, empty);
  return h("table", {},
    h("thead", {}, h("tr", {}, headers.map((name) => h("th", {}, name)))),
    h("tbody", {}, rows.map((row) => h("tr", {}, row.map((cell) => h("td", {}, cell))))));
}

// A two-column table of label -> value pairs.
export function facts(pairs) {
  return h("table", { class: "facts" },
    h("tbody", {}, pairs.map(([label, value]) => h("tr", {}, h("th", {}, label), h("td", {}, value)))));
}

export function section(title, ...children) {
  return h("section", {}, h("h2", {}, title), ...children);
}

export function fmtTime(ms) {
  if (!ms) return "-";
  return new Date(ms).toISOString().replace("T", " ").replace("Z", " UTC");
}

export function fmtBytes(n) {
  if (n === null || n === undefined) return "-";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = Number(n);
  let i = 0;
  while (Math.abs(value) >= 1024 && i < units.length - 1) { value /= 1024; i += 1; }
  return `${i === 0 && Number.isInteger(value) ? value : value.toFixed(1)} ${units[i]}`;
}

export function fmtNum(n, digits = 0) {
  if (n === null || n === undefined || Number.isNaN(n)) return "-";
  return Number(n).toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

// The values of a form as an object of strings, trimmed but for a field named "body".
export function formValues(form) {
  const out = {};
  for (const [name, value] of new FormData(form).entries()) {
    out[name] = name === "body" ? String(value) : String(value).trim();
  }
  return out;
}

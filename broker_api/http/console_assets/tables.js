// Table topics: each topic's own Delta table with rows, dead letters and lag, and a DLQ replay button.

import { api, errorBox, seg } from "./api.js";
import { fmtBytes, fmtNum, h, section, table } from "./dom.js";

const HEADERS = ["Topic", "Mode", "Write mode", "Rows", "DLQ rows", "Committed offset", "Lag", "Lag time",
  "Version", "Last error", ""];

function lagSeconds(s) {
  return s.lag_seconds === null || s.lag_seconds === undefined ? "-" : `${fmtNum(s.lag_seconds, 1)} s`;
}

// Calls POST /v1/topics/{t}/table/replay-dlq and writes its answer (or error) into `out`.
function replayButton(topic, out) {
  const run = async (e) => {
    const button = e.currentTarget;
    button.disabled = true;
    out.replaceChildren(h("p", { class: "hint" }, `replaying the dead letters of ${topic} ...`));
    try {
      const r = await api(`/v1/topics/${seg(topic)}/table/replay-dlq`, { method: "POST" });
      out.replaceChildren(h("div", { class: "ok", "data-replay": topic },
        `${topic}: ${fmtNum(r.replayed)} row(s) replayed into the table, ${fmtNum(r.remaining)} remain in `,
        h("code", {}, `${topic}__dlq`), " (Refresh to see the new counts)"));
    } catch (err) {
      out.replaceChildren(errorBox(err));
    } finally {
      button.disabled = false;
    }
  };
  return h("button", { type: "button", class: "replay", "data-topic": topic, onclick: run }, "Replay DLQ");
}

function row(topic, s, out) {
  return [topic, s.mode, s.write_mode, fmtNum(s.rows), fmtNum(s.dlq_rows), fmtNum(s.committed_offset),
    fmtBytes(s.lag_bytes), lagSeconds(s), s.version ?? "-", s.last_error || "-",
    s.mode === "typed" ? replayButton(topic, out) : ""];
}

export async function render(root) {
  const { tables } = await api("/v1/tables");
  const names = Object.keys(tables).sort();
  const out = h("div", { id: "replay-result" });
  const hint = h("p", { class: "hint" }, "Topics with a Delta table of their own (",
    h("code", {}, "table.mode"), " raw or typed); bodies that do not fit a typed schema are in ",
    h("code", {}, "<topic>__dlq"), ". Query both with POST /v1/sql.");
  const list = table(HEADERS, names.map((n) => row(n, tables[n], out)),
    "no table topic: create one with POST /v1/topics {\"name\": ..., \"table\": {\"mode\": \"typed\", ...}}");
  list.id = "tables-list";
  root.append(section(`Table topics (${names.length})`, hint, list, out));
}

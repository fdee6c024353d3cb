// Message search: by key, by message id, or by store time range (offset at a time, then pulls).

import { api, errorBox, seg } from "./api.js";
import { formValues, fmtTime, h, section, table } from "./dom.js";
import { preview } from "./preview.js";

const LIMIT = 100;

function resultTable(messages) {
  return table(["Message id", "Topic", "Queue", "Offset", "Keys", "Tags", "Stored", "Body"], messages.map((m) => {
    const p = preview(m);
    return [h("code", {}, m.msg_id), m.topic, m.queue_id, m.offset ?? "-", (m.keys || []).join(", "),
      m.tags || "", fmtTime(m.store_timestamp),
      h("span", { class: `body ${p.kind}` }, h("em", {}, `${p.kind}, ${p.size} B: `), p.text)];
  }), "no message found");
}

function millis(local) {
  return local ? new Date(local).getTime() : null;
}

async function byKey(v) {
  const q = new URLSearchParams({ key: v.key, max: String(LIMIT) });
  if (v.begin) q.set("begin_ms", String(millis(v.begin)));
  if (v.end) q.set("end_ms", String(millis(v.end)));
  return (await api(`/v1/topics/${seg(v.topic)}/messages?${q}`)).messages;
}

async function byId(v) {
  return [await api(`/v1/messages/${seg(v.msg_id)}`)];
}

async function queueRange(topic, queueId, begin, end, out) {
  const base = `/v1/topics/${seg(topic)}/queues/${queueId}`;
  let offset = (await api(`${base}/offset?timestamp_ms=${begin}`)).offset;
  while (out.length < LIMIT) {
    const page = await api(`${base}/messages?offset=${offset}&max_messages=32`);
    for (const m of page.messages) {
      if (m.store_timestamp > end || out.length >= LIMIT) return;
      if (m.store_timestamp >= begin) out.push(m);
    }
    if (page.next_offset <= offset || page.next_offset >= page.max_offset) return;
    offset = page.next_offset;
  }
}

async function byTime(v) {
  const begin = millis(v.begin) ?? 0;
  const end = millis(v.end) ?? Date.now() + 60_000;
  const topic = await api(`/v1/topics/${seg(v.topic)}`);
  const out = [];
  for (const q of topic.queue_offsets) await queueRange(v.topic, q.queue_id, begin, end, out);
  return out.sort((a, b) => a.store_timestamp - b.store_timestamp);
}

const MODES = { key: byKey, id: byId, time: byTime };
const NEEDS = { key: ["topic", "key"], id: ["msg_id"], time: ["topic"] };

function check(v) {
  const missing = NEEDS[v.mode].filter((name) => !v[name]);
  const names = missing.map((name) => (name === "msg_id" ? "message id" : name));
  if (missing.length) throw new Error(`a search by ${v.mode} needs: ${names.join(", ")}`);
}

function field(label, input) {
  return h("label", {}, label, input);
}

function searchForm(onSearch) {
  return h("form", { id: "search-form", onsubmit: (e) => { e.preventDefault(); onSearch(formValues(e.target)); } },
    field("Search by", h("select", { name: "mode" }, h("option", { value: "key" }, "key"),
      h("option", { value: "id" }, "message id"), h("option", { value: "time" }, "time range"))),
    field("Topic", h("input", { name: "topic", list: "topic-names", placeholder: "orders" })),
    field("Key", h("input", { name: "key", placeholder: "order-1" })),
    field("Message id", h("input", { name: "msg_id", placeholder: "32 hex characters", size: 34 })),
    field("From", h("input", { name: "begin", type: "datetime-local", step: 1 })),
    field("To", h("input", { name: "end", type: "datetime-local", step: 1 })),
    h("button", { type: "submit" }, "Search"));
}

export async function render(root) {
  const results = h("div", { id: "search-results" });
  const topics = await api("/v1/topics");
  const names = h("datalist", { id: "topic-names" }, topics.map((t) => h("option", { value: t.name })));
  const run = async (v) => {
    results.replaceChildren(h("p", { class: "empty" }, "searching ..."));
    try {
      check(v);
      const found = await MODES[v.mode](v);
      results.replaceChildren(h("p", {}, `${found.length} message(s)`), resultTable(found));
    } catch (err) {
      results.replaceChildren(errorBox(err));
    }
  };
  root.append(section("Message search", names, searchForm(run),
    h("p", { class: "hint" }, "Key: the topic's key index (with an optional time range). Message id: any topic. " +
      `Time range: the topic's queues from the first message stored at "From", up to ${LIMIT} messages.`),
    results));
}

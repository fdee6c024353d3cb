// The produce form: topic, key, tags, body -> POST /v1/topics/{topic}/messages, the SendResult shown.

import { api, errorBox, seg } from "./api.js";
import { facts, formValues, h, section } from "./dom.js";

function message(v) {
  const m = { body: v.body };
  if (v.key) m.keys = [v.key];
  if (v.tags) m.tags = v.tags;
  if (v.queue_id !== "") m.queue_id = Number(v.queue_id);
  return m;
}

function sendResult(topic, answer) {
  const r = answer.results[0];
  return h("div", { class: "ok", role: "status" }, h("h3", {}, `SendResult: ${answer.status || "SEND_OK"}`), facts([
    ["Topic", topic], ["Message id", h("code", {}, r.msg_id)], ["Queue", r.queue_id], ["Queue offset", r.queue_offset],
  ]));
}

function produceForm(onSend) {
  const field = (label, input) => h("label", {}, label, input);
  return h("form", { id: "produce-form", onsubmit: (e) => { e.preventDefault(); onSend(formValues(e.target)); } },
    field("Topic", h("input", { name: "topic", list: "produce-topics", required: true, placeholder: "orders" })),
    field("Key", h("input", { name: "key", placeholder: "order-1 (optional)" })),
    field("Tags", h("input", { name: "tags", placeholder: "TagA (optional)" })),
    field("Queue", h("input", { name: "queue_id", type: "number", min: 0, placeholder: "by key / round robin" })),
    field("Body", h("textarea", { name: "body", rows: 4, placeholder: "message body (text)" })),
    h("button", { type: "submit" }, "Send"));
}

export async function render(root) {
  const out = h("div", { id: "produce-result" });
  const topics = await api("/v1/topics");
  const send = async (v) => {
    out.replaceChildren(h("p", { class: "empty" }, "sending ..."));
    try {
      const answer = await api(`/v1/topics/${seg(v.topic)}/messages`, {
        method: "POST", body: { messages: [message(v)] } });
      out.replaceChildren(sendResult(v.topic, answer));
    } catch (err) {
      out.replaceChildren(errorBox(err));
    }
  };
  root.append(section("Produce a message",
    h("datalist", { id: "produce-topics" }, topics.map((t) => h("option", { value: t.name }))),
    produceForm(send), out));
}

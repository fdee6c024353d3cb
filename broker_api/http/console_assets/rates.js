// Live rates: /metrics and /v1/broker polled every few seconds; rates are differences over time.

import { api, errorBox } from "./api.js";
import { fmtBytes, fmtNum, h, section, table } from "./dom.js";
import { byLabel, fetchMetrics, total } from "./metrics.js";
import { mirrorView } from "./broker.js";

const HISTORY = 40;
const COUNTERS = {
  produced: "sparkmq_produce_messages_total",
  producedBytes: "sparkmq_produce_bytes_total",
  consumed: "sparkmq_pull_messages_total",
};

export function pollMs() {
  const asked = Number(new URLSearchParams(location.search).get("poll_ms"));
  return asked >= 200 ? asked : 3000;
}

async function sample() {
  const [samples, broker] = await Promise.all([fetchMetrics(), api("/v1/broker")]);
  const out = { at: performance.now(), broker, topics: {} };
  for (const [key, metric] of Object.entries(COUNTERS)) {
    out[key] = total(samples, metric);
    out.topics[key] = byLabel(samples, metric, "topic");
  }
  return out;
}

function rate(now, before, pick) {
  if (!before) return null;
  const seconds = (now.at - before.at) / 1000;
  return seconds > 0 ? Math.max(0, (pick(now) - pick(before)) / seconds) : null;
}

function sparkline(values) {
  const max = Math.max(1, ...values);
  const points = values.map((v, i) => `${(i * 200) / (HISTORY - 1)},${30 - (28 * v) / max}`).join(" ");
  return `<svg class="spark" viewBox="0 0 200 30" width="200" height="30"><polyline points="${points}"/></svg>`;
}

function topicRows(now, before) {
  const names = Object.keys(now.topics.produced).concat(Object.keys(now.topics.consumed));
  return [...new Set(names)].sort().map((t) => [t,
    fmtNum(rate(now, before, (s) => s.topics.produced[t] || 0), 1),
    fmtNum(rate(now, before, (s) => s.topics.consumed[t] || 0), 1)]);
}

function view(now, before, history) {
  const produce = rate(now, before, (s) => s.produced);
  const consume = rate(now, before, (s) => s.consumed);
  const bytes = rate(now, before, (s) => s.producedBytes);
  const fmt = (v, unit) => (v === null ? "measuring ..." : `${fmtNum(v, 1)} ${unit}`);
  const lines = h("div", { class: "sparks" });
  lines.innerHTML = `<div>produce ${sparkline(history.map((x) => x.produce))}</div>` +
    `<div>consume ${sparkline(history.map((x) => x.consume))}</div>`;
  return [
    section("Rates", table(["", "Now"], [
      ["Produce", h("span", { id: "produce-rate" }, fmt(produce, "msg/s"))],
      ["Produce bytes", bytes === null ? "measuring ..." : `${fmtBytes(bytes)}/s`],
      ["Consume (pulls)", h("span", { id: "consume-rate" }, fmt(consume, "msg/s"))],
      ["Messages produced (total)", fmtNum(now.produced)],
      ["Messages pulled (total)", fmtNum(now.consumed)],
      ["Dispatch behind", fmtBytes(now.broker.dispatch_behind_bytes)],
    ]), lines),
    section("Per topic (msg/s)", table(["Topic", "Produce", "Consume"], topicRows(now, before), "no traffic yet")),
    section("Delta mirror lag", mirrorView(now.broker.mirror)),
    h("p", { class: "hint" }, `polled every ${pollMs() / 1000} s from /metrics and /v1/broker`),
  ];
}

export async function render(root) {
  const history = Array.from({ length: HISTORY }, () => ({ produce: 0, consume: 0 }));
  const body = h("div", { id: "rates" });
  root.append(body);
  let before = null;
  const tick = async () => {
    try {
      const now = await sample();
      history.push({ produce: rate(now, before, (s) => s.produced) || 0,
        consume: rate(now, before, (s) => s.consumed) || 0 });
      history.splice(0, history.length - HISTORY);
      body.replaceChildren(...view(now, before, history));
      before = now;
    } catch (err) {
      body.replaceChildren(errorBox(err));
    }
  };
  await tick();
  const timer = setInterval(tick, pollMs());
  return () => clearInterval(timer);
}

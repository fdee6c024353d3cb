// Consumer groups: lag per queue, and POP in flight / retry / DLQ where the broker has them.

import { api, seg } from "./api.js";
import { fmtNum, h, section, table } from "./dom.js";
import { byLabel, fetchMetrics } from "./metrics.js";

const POP_COUNTERS = [
  ["POP in flight", "sparkmq_pop_inflight_messages"],
  ["Popped", "sparkmq_pop_messages_total"],
  ["Acked", "sparkmq_pop_acks_total"],
  ["Retried", "sparkmq_retry_messages_total"],
  ["Dead-lettered", "sparkmq_dlq_messages_total"],
];

async function topicCount(name, topicNames) {
  if (!topicNames.has(name)) return null;
  return (await api(`/v1/topics/${seg(name)}`)).messages;
}

function lagTable(detail) {
  return table(["Topic", "Queue", "Committed offset", "Max offset", "Lag"], detail.queues.map((q) => [
    q.topic, q.queue_id, fmtNum(q.committed_offset), fmtNum(q.max_offset), fmtNum(q.lag)]), "no committed offset");
}

async function groupCard(name, detail, pop, topicNames) {
  const retry = await topicCount(`%RETRY%${name}`, topicNames);
  const dlq = await topicCount(`%DLQ%${name}`, topicNames);
  const extras = POP_COUNTERS.map(([label, metric]) => `${label}: ${fmtNum(pop[metric][name] || 0)}`);
  extras.push(`%RETRY%${name}: ${retry === null ? "none" : `${fmtNum(retry)} messages`}`);
  extras.push(`%DLQ%${name}: ${dlq === null ? "none" : `${fmtNum(dlq)} messages`}`);
  let state = "POP only";
  if (detail) state = detail.consume_enabled ? "enabled" : `disabled (${detail.disabled_reason || "-"})`;
  return h("details", { class: "group", "data-group": name, open: true },
    h("summary", {}, h("strong", {}, name), ` ${state}, total lag ${detail ? fmtNum(detail.total_lag) : "-"}`),
    h("p", { class: "pop" }, extras.join(" · ")),
    detail ? lagTable(detail) : null);
}

export async function render(root) {
  const [groups, topics, samples] = await Promise.all([api("/v1/groups"), api("/v1/topics"), fetchMetrics()]);
  const pop = Object.fromEntries(POP_COUNTERS.map(([, metric]) => [metric, byLabel(samples, metric, "group")]));
  const names = new Set(groups.map((g) => g.group));
  for (const metric of Object.values(pop)) Object.keys(metric).forEach((g) => names.add(g));
  const details = Object.fromEntries(await Promise.all(groups.map(async (g) =>
    [g.group, await api(`/v1/groups/${seg(g.group)}`)])));
  const topicNames = new Set(topics.map((t) => t.name));
  const sorted = [...names].sort();
  // "Enabled", as `sparkmq groups` calls it: whether the group may consume, not whether anyone is.
  const summary = table(["Group", "Topics", "Total lag", "Enabled"], groups.map((g) => [
    g.group, g.topics.join(", "), fmtNum(g.total_lag), g.consume_enabled ? "yes" : "no"]), "no consumer group yet");
  const cards = await Promise.all(sorted.map((n) => groupCard(n, details[n], pop, topicNames)));
  root.append(section(`Consumer groups (${sorted.length})`, summary), ...cards);
}

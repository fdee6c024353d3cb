// Topics: every topic with its queues and their min/max offsets.

import { api, errorBox, seg } from "./api.js";
import { fmtNum, h, section, table } from "./dom.js";

function queueTable(t) {
  return table(["Queue", "Min offset", "Max offset", "Messages"], t.queue_offsets.map((q) => [
    q.queue_id, fmtNum(q.min_offset), fmtNum(q.max_offset), fmtNum(q.max_offset - q.min_offset)]));
}

function topicCard(t) {
  return h("details", { class: "topic", "data-topic": t.name, open: true },
    h("summary", {}, h("strong", {}, t.name), ` ${t.queues} queues, perm ${t.perm || "none"}, `,
      `${fmtNum(t.messages)} messages`),
    queueTable(t));
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
  const summary = table(["Topic", "Queues", "Perm", "Messages"],
    described.map((t) => [t.name, t.queues, t.perm, t.error ? "-" : fmtNum(t.messages)]), "no topic yet");
  root.append(section(`Topics (${list.length})`, summary),
    ...described.map((t) => (t.error ? errorCard(t) : topicCard(t))));
}

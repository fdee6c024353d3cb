// The NameServer's console (/console on a NameServer): clusters, live brokers, topic routes.

import { api, seg } from "./api.js";
import { fmtNum, fmtTime, h, section, table } from "./dom.js";
import { startConsole } from "./shell.js";

function consoleLink(address) {
  const base = /^https?:\/\//.test(address) ? address : `http://${address}`;
  return h("a", { href: `${base}/console`, target: "_blank", rel: "noopener" }, address);
}

function brokerRows(brokers) {
  return brokers.map((b) => [b.cluster, b.broker_name, b.broker_id, h("span", { class: `role ${b.role}` }, b.role),
    consoleLink(b.address), b.ha_address || "-", fmtTime(b.last_heartbeat_ms), `${fmtNum(b.silent_s, 1)} s`,
    b.registrations]);
}

async function identify() {
  const c = await api("/v1/cluster");
  return `NameServer · ${Object.keys(c.clusters).length} cluster(s) · ${c.brokers.length} live broker(s)`;
}

async function clusterView(root) {
  const c = await api("/v1/cluster");
  const clusters = table(["Cluster", "Broker names"],
    Object.entries(c.clusters).map(([name, brokers]) => [name, brokers.join(", ")]), "no broker registered yet");
  const brokers = table(["Cluster", "Broker", "Id", "Role", "Address (its console)", "HA address", "Last heartbeat",
    "Silent for", "Registrations"], brokerRows(c.brokers), "no live broker");
  root.append(section("Clusters", clusters), section("Live brokers", brokers));
}

function routeRows(route) {
  const addresses = Object.fromEntries(route.brokers.map((b) => [b.broker_name, b.addresses]));
  return route.queues.map((q) => [route.topic, q.broker_name, q.read_queues, q.write_queues, q.perm,
    Object.entries(addresses[q.broker_name] || {}).map(([id, a]) => `${id === "0" ? "master" : `slave ${id}`} ${a}`)
      .join(", ")]);
}

async function topicsView(root) {
  const names = Object.keys((await api("/v1/topics")).topics);
  const routes = await Promise.all(names.map((t) => api(`/v1/routes/${seg(t)}`)));
  root.append(section(`Topic routes (${names.length})`, table(["Topic", "Broker", "Read queues", "Write queues",
    "Perm", "Addresses"], routes.flatMap(routeRows), "no topic served by a live broker")));
}

startConsole("sparkmq NameServer", {
  cluster: { title: "Cluster", render: clusterView },
  routes: { title: "Topics", render: topicsView },
}, identify);

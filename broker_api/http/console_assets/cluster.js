// The NameServer's console (/console on a NameServer): clusters, live brokers, the controller's broker groups
// (with --controller: master, epoch, in-sync set, last election), topic routes.

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

async function controllerGroups() {
  if (!(await api("/v1/namesrv")).controller) return null; // a NameServer without --controller
  return (await api("/v1/controller/groups")).groups;
}

function electionText(e, address) {
  if (!e) return "none yet";
  const took = e.took_ms == null ? "" : `, took ${fmtNum(e.took_ms / 1000, 1)} s`;
  const from = e.old_master ? address(e.old_master) : "-";
  return `${fmtTime(e.at_ms)}: ${e.reason}, ${from} → ${e.new_master ? address(e.new_master) : "no candidate"}${took}`;
}

function groupRows(groups) {
  return groups.map((g) => {
    const address = (id) => (g.replicas.find((r) => r.replica_id === id) || {}).address || id;
    return [g.cluster, g.broker_name, g.master ? address(g.master) : "none", g.master_epoch,
      g.sync_state_set.map(address).join(", "), electionText(g.last_election, address)];
  });
}

async function clusterView(root) {
  const c = await api("/v1/cluster");
  const clusters = table(["Cluster", "Broker names"],
    Object.entries(c.clusters).map(([name, brokers]) => [name, brokers.join(", ")]), "no broker registered yet");
  const brokers = table(["Cluster", "Broker", "Id", "Role", "Address (its console)", "HA address", "Last heartbeat",
    "Silent for", "Registrations"], brokerRows(c.brokers), "no live broker");
  root.append(section("Clusters", clusters), section("Live brokers", brokers));
  const groups = await controllerGroups();
  if (groups) {
    root.append(section("Controller: broker groups", table(["Cluster", "Broker name", "Master", "Epoch",
      "In-sync set", "Last election"], groupRows(groups), "no broker group has a heartbeat yet")));
  }
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

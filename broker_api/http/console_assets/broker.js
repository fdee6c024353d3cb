// Overview: this broker's identity, store, tiered storage, HA state and lag, NameServer registration, mirror and
// table lag.

import { api } from "./api.js";
import { facts, fmtBytes, fmtNum, fmtTime, h, section, table } from "./dom.js";

function identity(b) {
  return facts([
    ["Broker", `${b.name} (id ${b.broker_id})`],
    ["Cluster", b.cluster],
    ["Role", b.role],
    ["Address", b.address],
    ["Topics / groups", `${b.topics} / ${b.groups}`],
    ["Flush mode", b.flush_mode],
    ["Open transactions", b.open_transactions],
    ["Event loop lag", `${fmtNum(b.event_loop_lag_ms, 1)} ms`],
  ]);
}

function store(s) {
  return facts([
    ["CommitLog offsets", `${fmtNum(s.commitlog_min_offset)} .. ${fmtNum(s.commitlog_max_offset)}`],
    ["Dispatch behind", fmtBytes(s.dispatch_behind_bytes)],
    ["Segments / queues", `${s.segments} / ${s.queues}`],
    ["Disk used", `${fmtNum(100 * (s.disk_used_ratio || 0), 1)} %${s.disk_full ? " (FULL)" : ""}`],
    ["Damaged records read", s.damaged_records_read],
  ]);
}

export function tieredView(t) {
  if (!t) return h("p", { class: "empty" }, "tiered storage is off ([tiered] uri is empty)");
  const reads = t.cache_hits + t.cache_misses;
  return facts([
    ["Object store", t.uri],
    ["Local / remote", `${fmtBytes(t.local_bytes)} (${t.local_segments} segments) / ${fmtBytes(t.remote_bytes)} `
      + `(${t.remote_segments} segments)`],
    ["Upload lag", `${fmtBytes(t.upload_lag_bytes)}, ${fmtNum(t.upload_lag_s, 1)} s`],
    ["Cache hits", `${fmtNum(t.cache_hits)} of ${fmtNum(reads)} block reads (${fmtBytes(t.cache_bytes)} held)`],
    ["Failed upload rounds", `${t.failed_uploads}${t.last_error ? `: ${t.last_error}` : ""}`],
  ]);
}

export function haView(ha) {
  if (!ha) return h("p", { class: "empty" }, "no HA information");
  const rows = [["HA role", ha.role]];
  if (ha.listen_address) rows.push(["HA listens on", ha.listen_address], ["Connected slaves", ha.connected_slaves]);
  if (ha.master_ha_address !== undefined) {
    rows.push(["Master", `${ha.master_url || "-"} (HA ${ha.master_ha_address || "-"})`],
      ["Connected to master", ha.connected ? "yes" : `no${ha.error ? `: ${ha.error}` : ""}`],
      ["Replicated up to", fmtNum(ha.max_offset)]);
  }
  const slaves = (ha.slaves || []).map((s) => [s.address, fmtNum(s.ack_offset), fmtBytes(s.lag_bytes),
    `${fmtNum(s.lag_seconds, 1)} s`]);
  return h("div", {}, facts(rows),
    ha.slaves ? table(["Slave", "Ack offset", "Lag", "Lag time"], slaves, "no slave connected") : null);
}

function registration(list, configured) {
  if (!list) return h("p", { class: "empty" }, configured ? "registration not started" : "no NameServer configured");
  return table(["NameServer", "Up", "Last success", "Registrations", "Last error"], list.map((n) => [
    n.address, n.up ? "up" : "DOWN", fmtTime(n.last_ok_ms), n.full_registrations, n.last_error || "-"]));
}

export function mirrorView(m) {
  if (!m) return h("p", { class: "empty" }, "the Delta mirror is off ([mirror] enabled = false)");
  return facts([
    ["Mirrored up to", fmtNum(m.mirrored_offset)],
    ["CommitLog end", fmtNum(m.commitlog_offset)],
    ["Mirror lag", `${fmtBytes(m.lag_bytes)}, ${fmtNum(m.lag_seconds, 1)} s`],
  ]);
}

// The worst lag and the dead letters over every table topic (details in the Tables view).
function tablesView(tables) {
  const all = Object.values(tables || {});
  if (all.length === 0) return h("p", { class: "empty" }, "no table topic (no topic has table.mode raw or typed)");
  const max = (key) => Math.max(...all.map((s) => s[key] || 0));
  const sum = (key) => all.reduce((acc, s) => acc + (s[key] || 0), 0);
  const failing = all.filter((s) => s.last_error).length;
  return h("div", {}, facts([
    ["Table topics", all.length],
    ["Largest lag", `${fmtBytes(max("lag_bytes"))}, ${fmtNum(max("lag_seconds"), 1)} s`],
    ["Rows / dead-letter rows", `${fmtNum(sum("rows"))} / ${fmtNum(sum("dlq_rows"))}`],
    ["Tables with an error", failing],
  ]), h("p", { class: "hint" }, h("a", { href: "#tables" }, "Each table in the Tables view")));
}

export async function render(root) {
  const b = await api("/v1/broker");
  root.append(
    section("Broker", identity(b)),
    section("Store", store(b.store)),
    section("Tiered storage", tieredView(b.tiered)),
    section("HA replication", haView(b.ha)),
    section("NameServer registration", registration(b.namesrv, b.namesrv_addr)),
    section("Delta mirror", mirrorView(b.mirror)),
    section("Table topics", tablesView(b.tables)),
  );
}

"""``sparkmq cluster``: every broker with its HA role, its slaves and how far behind they are; with a
controller (``sparkmq namesrv --controller``) each broker name's master, epoch, in-sync set and last election."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from .common import DEFAULT_URL, AsJson, Namesrv, Url, client_options, fail, print_json, print_table

if TYPE_CHECKING:  # httpx loads when the command runs: each function that uses it imports it
    import httpx

__all__ = ["cluster_command"]


def _http() -> httpx.Client:
    """A client carrying the root options' credentials (--token) and CA (--ca-file)."""
    import httpx

    from ..client.auth import http_options

    o = client_options()
    try:
        return httpx.Client(timeout=5, **http_options(o.token, ca_file=o.ca_file))
    except (ValueError, OSError) as exc:
        fail(f"bad --token or --ca-file: {exc}")


def _broker_ha(http: httpx.Client, url: str) -> dict[str, Any]:
    import httpx

    try:
        return dict(http.get(f"{url}/v1/broker").json().get("ha") or {})
    except (httpx.HTTPError, ValueError) as exc:
        return {"role": "unreachable", "error": f"{type(exc).__name__}: {exc}"}


def _brokers(http: httpx.Client, url: str, namesrv: str | None) -> list[dict[str, Any]]:
    import httpx

    from ..settings.addresses import parse_namesrv_addrs

    if not namesrv:
        info = http.get(f"{url}/v1/broker").json()
        return [{"cluster": info["cluster"], "broker_name": info["name"], "broker_id": info["broker_id"],
                 "address": url}]
    last: Exception | None = None
    for base in parse_namesrv_addrs(namesrv):
        try:
            return list(http.get(f"{base}/v1/cluster").json()["brokers"])
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            last = exc
    fail(f"no NameServer answered ({last})")


def _detail(ha: dict[str, Any]) -> str:
    if ha.get("role") == "slave":
        state = "connected" if ha.get("connected") else "not connected"
        return f"{state} to {ha.get('master_ha_address')}" + (f"; {ha['error']}" if ha.get("error") else "")
    if "slaves" in ha:
        return "; ".join(f"{s['address']} ack {s['ack_offset']}, {s['lag_bytes']} B / {s['lag_seconds']} s behind"
                         for s in ha["slaves"]) or "no slave connected"
    return str(ha.get("error", ""))


def _controller_groups(http: httpx.Client, namesrv: str | None) -> list[dict[str, Any]]:
    """GET /v1/controller/groups from the first NameServer running a controller ([] when none does)."""
    import httpx

    from ..settings.addresses import parse_namesrv_addrs

    for base in parse_namesrv_addrs(namesrv) if namesrv else []:
        try:
            r = http.get(f"{base}/v1/controller/groups")
        except httpx.HTTPError:
            continue
        if r.status_code == 200:
            return list(r.json()["groups"])
    return []


def _election(e: dict[str, Any] | None) -> str:
    if not e:
        return ""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(e["at_ms"] / 1000))
    took = f", took {e['took_ms'] / 1000:.1f} s" if e.get("took_ms") is not None else ""
    who = f"{e['old_master']} -> {e['new_master']}" if e.get("new_master") else "no new master"
    return f"{when}: {who} ({e['reason']}; master silent {e['master_silent_ms'] / 1000:.1f} s{took})"


def _controller_rows(groups: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    rows = []
    for g in groups:
        addr = {r["replica_id"]: r["address"] for r in g["replicas"]}
        rows.append((g["broker_name"], addr.get(g["master"] or "", "none"), g["master_epoch"],
                     ", ".join(addr.get(r, r) for r in g["sync_state_set"]), _election(g.get("last_election"))))
    return rows


def cluster_command(as_json: AsJson = False, url: Url = DEFAULT_URL, namesrv: Namesrv = None) -> None:
    """Show masters and slaves, their HA roles and replication lag.

    Examples:

      sparkmq cluster --namesrv 127.0.0.1:9876

      sparkmq cluster --url http://127.0.0.1:8081 --json
    """
    import httpx

    with _http() as http:
        try:
            brokers = _brokers(http, url.rstrip("/"), namesrv)
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            fail(f"cannot reach the broker at {url} ({type(exc).__name__}: {exc})")
        has = {b["address"]: _broker_ha(http, b["address"]) for b in brokers}
        groups = _controller_groups(http, namesrv)
    rows = []
    for b in sorted(brokers, key=lambda b: (b["cluster"], b["broker_name"], b["broker_id"])):
        ha = has[b["address"]]
        b["ha"] = ha
        rows.append((b["cluster"], b["broker_name"], b["broker_id"], ha.get("role", "?"), b["address"],
                     ha.get("max_offset", ""), _detail(ha)))
    if as_json:
        print_json({"brokers": brokers, "controller": groups} if groups else brokers)
        return
    print_table(["cluster", "broker", "id", "role", "address", "commitlog max", "replication"], rows,
                title="brokers")
    if groups:
        print_table(["broker", "master", "epoch", "in-sync set", "last election"], _controller_rows(groups),
                    title="controller")

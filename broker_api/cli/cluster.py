"""``sparkmq cluster``: every broker with its HA role, its slaves and how far behind they are."""

from __future__ import annotations

from typing import Any

import httpx

from ..namesrv.wire import parse_namesrv_addrs
from .common import DEFAULT_URL, AsJson, Namesrv, Url, fail, print_json, print_table

__all__ = ["cluster_command"]


def _broker_ha(url: str) -> dict[str, Any]:
    try:
        return dict(httpx.get(f"{url}/v1/broker", timeout=5).json().get("ha") or {})
    except (httpx.HTTPError, ValueError) as exc:
        return {"role": "unreachable", "error": f"{type(exc).__name__}: {exc}"}


def _brokers(url: str, namesrv: str | None) -> list[dict[str, Any]]:
    if not namesrv:
        info = httpx.get(f"{url}/v1/broker", timeout=5).json()
        return [{"cluster": info["cluster"], "broker_name": info["name"], "broker_id": info["broker_id"],
                 "address": url}]
    last: Exception | None = None
    for base in parse_namesrv_addrs(namesrv):
        try:
            return list(httpx.get(f"{base}/v1/cluster", timeout=5).json()["brokers"])
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


def cluster_command(as_json: AsJson = False, url: Url = DEFAULT_URL, namesrv: Namesrv = None) -> None:
    """Show masters and slaves, their HA roles and replication lag.

    Examples:

      sparkmq cluster --namesrv 127.0.0.1:9876

      sparkmq cluster --url http://127.0.0.1:8081 --json
    """
    try:
        brokers = _brokers(url.rstrip("/"), namesrv)
    except (httpx.HTTPError, ValueError, KeyError) as exc:
        fail(f"cannot reach the broker at {url} ({type(exc).__name__}: {exc})")
    rows = []
    for b in sorted(brokers, key=lambda b: (b["cluster"], b["broker_name"], b["broker_id"])):
        ha = _broker_ha(b["address"])
        b["ha"] = ha
        rows.append((b["cluster"], b["broker_name"], b["broker_id"], ha.get("role", "?"), b["address"],
                     ha.get("max_offset", ""), _detail(ha)))
    if as_json:
        print_json(brokers)
        return
    print_table(["cluster", "broker", "id", "role", "address", "commitlog max", "replication"], rows,
                title="brokers")

"""Failover time in controller mode: SIGKILL of a master -> first accepted / first SEND_OK write.

Starts, on 127.0.0.1, one NameServer with the controller and ``--replicas``
brokers of one broker name (sync_master flavour, ``--controller``).  A writer
sends batches to whatever broker the controller names master.  Each round
kills the master with SIGKILL and measures, from the kill:

* ``elected``:  the controller names another master;
* ``accepted``: the first write the new master stores (SLAVE_NOT_AVAILABLE while
  it is alone in its in-sync set, or SEND_OK);
* ``send_ok``:  the first SEND_OK (every member of the in-sync set holds it: a
  surviving slave must rejoin the set first).

Then it checks every message answered SEND_OK before the kill is on the new
master, restarts the killed broker (it rejoins as a slave) and waits for a
full in-sync set before the next round.  Bounded: ``--kills`` rounds, each at
most ``--round-timeout`` seconds.

Then ``--ns-restarts`` times, a Python client (through the NameServer, keyed
messages) keeps producing while the NameServer (and its embedded controller)
is SIGKILLed and restarted: every failed send and every message that landed
on another broker name is counted (goal: 0 and 0).

    python benchmarks/bench_failover.py --kills 20 --replicas 3 --master-timeout 3 --ns-restarts 3
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.results import Measure, Recorder, Target
from broker_api.client import SendError, SparkMQClient

REPO = Path(__file__).resolve().parents[1]
FAST = {"SPARKMQ_MIRROR__ENABLED": "false", "SPARKMQ_STORE__COMMITLOG_SEGMENT_BYTES": str(8 << 20),
        "SPARKMQ_BROKER__LOG_LEVEL": "warning", "SPARKMQ_HA__HEARTBEAT_INTERVAL_S": "1",
        "SPARKMQ_HA__RECONNECT_MAX_S": "0.5", "SPARKMQ_HA__SLAVE_TIMEOUT_MS": "3000",
        "SPARKMQ_HA__METADATA_SYNC_INTERVAL_S": "1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait(check: Any, timeout_s: float, step_s: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            value = check()
        except (httpx.HTTPError, KeyError, ValueError):
            value = None
        if value:
            return value
        time.sleep(step_s)
    raise TimeoutError(f"not within {timeout_s} s: {check}")


class Proc:
    def __init__(self, args: list[str], env: dict[str, str], log: Path) -> None:
        self.args, self.env, self.log = args, env, log
        self.p: subprocess.Popen[bytes] | None = None

    def start(self) -> Proc:
        with open(self.log, "ab") as fh:
            self.p = subprocess.Popen([sys.executable, "-m", "broker_api", *self.args], cwd=REPO, env=self.env,
                                      stdout=fh, stderr=subprocess.STDOUT)
        return self

    def kill(self) -> None:
        if self.p is not None and self.p.poll() is None:
            self.p.kill()
            self.p.wait(10)

    def stop(self) -> None:
        if self.p is not None and self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()


def send(url: str, n: int, tag: str) -> tuple[str | None, list[str]]:
    bodies = [f"{tag}-{i}" for i in range(n)]
    try:
        r = httpx.post(f"{url}/v1/topics/bench/messages", timeout=5,
                       json={"messages": [{"body": b, "queue_id": i % 4} for i, b in enumerate(bodies)]})
    except httpx.HTTPError:
        return None, bodies
    return (str(r.json()["status"]) if r.status_code == 200 else None), bodies


def bodies_on(url: str) -> set[str]:
    out: set[str] = set()
    for q in httpx.get(f"{url}/v1/topics/bench/queues", timeout=10).json():
        offset = q["min_offset"]
        for _ in range(10_000):
            if offset >= q["max_offset"]:
                break
            page = httpx.get(f"{url}/v1/topics/bench/queues/{q['queue_id']}/messages", timeout=30,
                             params={"offset": offset, "max_messages": 1000}).json()
            out.update(m.get("body") for m in page["messages"])
            offset = page["next_offset"]
    return out


class Bench:
    def __init__(self, args: argparse.Namespace, root: Path) -> None:
        self.args, self.root = args, root
        self.ns_port = free_port()
        ns_env = {**os.environ, "SPARKMQ_NAMESRV_CONTROLLER_MASTER_TIMEOUT_S": str(args.master_timeout),
                  "SPARKMQ_NAMESRV_CONTROLLER_SCAN_INTERVAL_S": "0.2",
                  "SPARKMQ_NAMESRV_CONTROLLER_STATE_FILE": str(root / "controller.json")}
        self.ns = Proc(["namesrv", "--controller", "--port", str(self.ns_port)], ns_env, root / "namesrv.log")
        self.brokers: dict[str, Proc] = {}
        for i in range(args.replicas):
            port = free_port()
            env = {**os.environ, **FAST, "SPARKMQ_BROKER__NAME": "bk", "SPARKMQ_HA__ROLE": "sync_master"}
            addr = f"127.0.0.1:{self.ns_port}"
            self.brokers[f"http://127.0.0.1:{port}"] = Proc(
                ["serve", "--port", str(port), "--data-dir", str(root / f"b{i}"), "--controller", addr,
                 "--namesrv", addr], env, root / f"b{i}.log")

    def group(self) -> dict[str, Any]:
        return dict(httpx.get(f"http://127.0.0.1:{self.ns_port}/v1/controller/groups/bk", timeout=5).json())

    def master(self) -> str | None:
        return next((r["address"] for r in self.group()["replicas"] if r["master"]), None)

    def full_set(self) -> bool:
        return len(self.group()["sync_state_set"]) == self.args.replicas

    def start(self) -> None:
        self.ns.start()
        wait(lambda: httpx.get(f"http://127.0.0.1:{self.ns_port}/healthz", timeout=1).status_code == 200, 60)
        for proc in self.brokers.values():
            proc.start()
        wait(self.full_set, 120)
        master = self.master()
        httpx.post(f"{master}/v1/topics", json={"name": "bench", "queues": 4}, timeout=10)
        wait(lambda: all(httpx.get(f"{u}/v1/topics/bench/queues", timeout=5).status_code == 200
                         for u in self.brokers), 30)

    def stop(self) -> None:
        for proc in self.brokers.values():
            proc.stop()
        self.ns.stop()

    def round(self, k: int) -> dict[str, Any]:
        old = self.master()
        assert old is not None
        acked: list[str] = []
        n = 0
        deadline = time.monotonic() + self.args.round_timeout
        while len(acked) < self.args.before:
            if time.monotonic() > deadline:
                raise TimeoutError(f"round {k}: {len(acked)} SEND_OK before the kill in {self.args.round_timeout} s")
            status, bodies = send(old, 50, f"r{k}-{n}")
            n += 1
            if status == "SEND_OK":
                acked.extend(bodies)
        killed = time.monotonic()
        self.brokers[old].kill()
        out: dict[str, Any] = {"round": k}
        new = wait(lambda: (m := self.master()) != old and m, self.args.round_timeout, 0.02)
        out["elected_s"] = time.monotonic() - killed
        first_ok = None
        i = 0
        while time.monotonic() - killed < self.args.round_timeout:
            status, _ = send(new, 10, f"r{k}-after-{i}")
            i += 1
            now = time.monotonic() - killed
            if status and "accepted_s" not in out:
                out["accepted_s"] = now
            if status == "SEND_OK":
                first_ok = now
                break
            time.sleep(0.02)
        out["send_ok_s"] = first_ok
        on_new = bodies_on(new)
        out["acked_before_kill"] = len(acked)
        out["lost"] = sum(1 for b in acked if b not in on_new)
        self.brokers[old].start()
        wait(self.full_set, self.args.round_timeout * 4)
        return out


def ns_restarts(bench: Bench, n: int, rec: Recorder) -> dict[str, Any]:
    """Keyed sends through the NameServer while it is SIGKILLed and restarted ``n`` times."""
    out = {"sent": 0, "failed": 0, "moved": 0, "errors": []}
    stop = threading.Event()

    def writer() -> None:
        with SparkMQClient(namesrv=f"127.0.0.1:{bench.ns_port}", timeout_s=10) as client:
            i = 0
            while not stop.is_set() and i < 1_000_000:
                batch = [{"body": f"ns-{i + j}", "keys": [f"k{(i + j) % 64}"]} for j in range(10)]
                i += 10
                try:
                    results = client.produce("bench", batch)
                except SendError as exc:
                    results = exc.sent
                    out["failed"] += len(exc.failed)
                    out["errors"] = (out["errors"] + [str(exc)[:200]])[-3:]
                out["sent"] += len(results)
                out["moved"] += sum(1 for r in results if r.broker != "bk")

    t = threading.Thread(target=writer, name="bench-ns-writer")
    t.start()
    try:
        for k in range(n):
            rec.phase(f"NameServer restart {k + 1}/{n} under keyed load")
            wait(lambda: out["sent"] > 200 * (k + 1), 60)
            bench.ns.kill()
            time.sleep(1.0)
            bench.ns.start()
            wait(lambda: httpx.get(f"http://127.0.0.1:{bench.ns_port}/healthz", timeout=1).status_code == 200, 60)
            before = out["sent"]
            wait(lambda: out["sent"] > before + 500, 60)
    finally:
        stop.set()
        t.join(30)
    return out


def record(rec: Recorder, rounds: list[dict[str, Any]], ns: dict[str, Any] | None, args: argparse.Namespace) -> None:
    load = os.getloadavg()
    base = {"kills": len(rounds), "replicas": args.replicas, "master_timeout_s": args.master_timeout,
            "loadavg": [round(x, 2) for x in load]}
    for key, what in (("elected_s", "SIGKILL of the master -> the controller names another"),
                      ("send_ok_s", "SIGKILL of the master -> first SEND_OK on the same broker name")):
        values = [r[key] for r in rounds if r.get(key) is not None]
        if values:
            targets = (Target("<=", 10.0),) if key == "send_ok_s" else ()
            rec.add(Measure(f"failover.{key}.median", f"{what}, median of {len(values)}",
                            round(statistics.median(values), 2), "s", targets=targets,
                            details={**base, "max": round(max(values), 2), "values": [round(v, 2) for v in values]}))
    rec.add(Measure("failover.lost", f"SEND_OK messages missing on the new master over {len(rounds)} kills",
                    sum(r["lost"] for r in rounds), "msgs", targets=(Target("<=", 0),), details=base))
    if ns is not None:
        rec.add(Measure("failover.ns_restart.failed", f"keyed sends failed over {args.ns_restarts} NameServer "
                        f"restart(s) under load ({ns['sent']} sent)", ns["failed"], "msgs",
                        targets=(Target("<=", 0),), details={**base, "errors": ns["errors"]}))
        rec.add(Measure("failover.ns_restart.moved", "keyed messages stored on another broker name",
                        ns["moved"], "msgs", targets=(Target("<=", 0),)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kills", type=int, default=5)
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--master-timeout", type=float, default=3.0)
    ap.add_argument("--before", type=int, default=500, help="SEND_OK messages before each kill")
    ap.add_argument("--round-timeout", type=float, default=60.0)
    ap.add_argument("--ns-restarts", type=int, default=1, help="NameServer restarts under keyed load (0: none)")
    ap.add_argument("--json-out", default=None, help="also write the results as JSON (for sparkmq bench)")
    args = ap.parse_args()
    rec = Recorder("failover", args.json_out, vars(args))
    ns: dict[str, Any] | None = None
    with tempfile.TemporaryDirectory(prefix="bench-failover-") as tmp:
        bench = Bench(args, Path(tmp))
        try:
            rec.phase(f"{args.replicas} replicas of one broker name, controller in the NameServer")
            bench.start()
            rounds = []
            for k in range(args.kills):
                rec.phase(f"kill {k + 1}/{args.kills}")
                r = bench.round(k)
                rounds.append(r)
                print(json.dumps({key: round(v, 3) if isinstance(v, float) else v for key, v in r.items()}),
                      flush=True)
            if args.ns_restarts:
                ns = ns_restarts(bench, args.ns_restarts, rec)
                print(json.dumps(ns), flush=True)
        finally:
            bench.stop()
    record(rec, rounds, ns, args)
    rec.write()
    summary: dict[str, Any] = {"kills": len(rounds), "replicas": args.replicas, "master_timeout_s": args.master_timeout,
                               "lost": sum(r["lost"] for r in rounds), "loadavg": os.getloadavg()}
    for key in ("elected_s", "accepted_s", "send_ok_s"):
        values = [r[key] for r in rounds if r.get(key) is not None]
        if values:
            summary[key] = {"median": round(statistics.median(values), 2), "max": round(max(values), 2),
                            "n": len(values)}
    print(json.dumps(summary), flush=True)
    return 0 if summary["lost"] == 0 and (ns is None or ns["failed"] == 0) else 1


if __name__ == "__main__":
    sys.exit(main())

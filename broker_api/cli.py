"""``sparkmq``: run a broker and talk to one from the shell.

    sparkmq serve [--host H] [--port P] [--data-dir D] [--config F] [--flush-mode sync|async]
                  [--namesrv A;B] [--cluster C] [--broker-name N] [--broker-id I]
    sparkmq namesrv [--host H] [--port P] [--config F]
    sparkmq topic create|list|describe|delete ...
    sparkmq produce TOPIC [BODY ...]      (bodies from stdin, one per line, when none given)
    sparkmq consume TOPIC [--group G] [--follow]
    sparkmq groups [GROUP]
    sparkmq offsets GROUP --topic T [--set QUEUE=OFFSET ...]
    sparkmq sql "SELECT ..."              (over the Delta mirror)

Client commands reach the broker at ``--url`` (env ``SPARKMQ_URL``,
default http://127.0.0.1:8080), or with ``--namesrv`` (env ``SPARKMQ_NAMESRV``)
the brokers the NameServers route the topic to (see ``broker_api.client``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from pydantic import ValidationError

from .cli_client import (
    DEFAULT_URL,
    Namesrv,
    Url,
    console,
    fail,
    open_client,
    print_table,
)
from .cli_consume import consume
from .cli_sql import sql_command
from .namesrv.cli import namesrv_command
from .settings import load_settings

__all__ = ["app", "main"]

app = typer.Typer(help="sparkmq: a RocketMQ-style broker for Spark Structured Streaming.",
                  no_args_is_help=True, add_completion=False)
topic_app = typer.Typer(help="Create, list, describe and delete topics.", no_args_is_help=True)
app.add_typer(topic_app, name="topic")
app.command("consume")(consume)



@app.command()
def serve(
    host: Annotated[Optional[str], typer.Option(help="Listen address [default: 127.0.0.1].")] = None,
    port: Annotated[Optional[int], typer.Option(help="Listen port [default: 8080].")] = None,
    data_dir: Annotated[Optional[Path], typer.Option("--data-dir", help="Data directory [default: ./data].")] = None,
    config: Annotated[Optional[Path], typer.Option(help="TOML settings file [default: ./conf/broker.toml].")] = None,
    flush_mode: Annotated[Optional[str], typer.Option("--flush-mode", help="sync | async [default: async].")] = None,
    log_level: Annotated[Optional[str], typer.Option("--log-level", help="debug|info|warning|error.")] = None,
    namesrv: Annotated[Optional[str], typer.Option(
        "--namesrv", help="NameServers to register with, \"host:port;host:port\" [default: none].")] = None,
    cluster: Annotated[Optional[str], typer.Option("--cluster", help="Cluster name [default: DefaultCluster].")] = None,
    broker_name: Annotated[Optional[str], typer.Option(
        "--broker-name", help="Broker name; a master and its slaves share it [default: broker-a].")] = None,
    broker_id: Annotated[Optional[int], typer.Option(
        "--broker-id", min=0, help="0 = master, > 0 = slave [default: 0].")] = None,
) -> None:
    """Run a broker (settings: flags > SPARKMQ_* env > TOML file > defaults)."""
    from .server import serve as run_server

    flags = {"host": host, "port": port, "data_dir": str(data_dir) if data_dir else None, "log_level": log_level,
             "namesrv_addr": namesrv, "cluster": cluster, "name": broker_name, "broker_id": broker_id}
    broker = {k: v for k, v in flags.items() if v is not None}
    store = {"flush_mode": flush_mode} if flush_mode else {}
    try:
        settings = load_settings(config, broker=broker, store=store)
    except FileNotFoundError as exc:
        fail(str(exc))
    except ValidationError as exc:
        fail(f"invalid settings: {exc}")
    run_server(settings)


@topic_app.command("create")
def topic_create(
    name: str,
    queues: Annotated[Optional[int], typer.Option(help="Number of queues [default: broker's default].")] = None,
    perm: Annotated[str, typer.Option(help="rw | r | w")] = "rw",
    cluster: Annotated[Optional[str], typer.Option(help="With --namesrv: only this cluster's masters.")] = None,
    url: Url = DEFAULT_URL,
    namesrv: Namesrv = None,
) -> None:
    """Create a topic (with --namesrv: on every master broker)."""
    with open_client(url, namesrv) as c:
        created = c.create_topic(name, queues, perm, cluster=cluster)
    for broker, t in created.items():
        console.print(f"topic {t['name']}: {t['queues']} queues, perm {t['perm']!r} on {broker}")


@topic_app.command("list")
def topic_list(url: Url = DEFAULT_URL, namesrv: Namesrv = None) -> None:
    """List topics."""
    with open_client(url, namesrv) as c:
        per_broker = c.topics()
    print_table(["topic", "broker", "queues", "perm"],
                sorted((t["name"], b, t["queues"], t["perm"]) for b, topics in per_broker.items() for t in topics))


@topic_app.command("describe")
def topic_describe(name: str, url: Url = DEFAULT_URL, namesrv: Namesrv = None) -> None:
    """Show a topic's queues and offsets."""
    with open_client(url, namesrv) as c:
        per_broker = c.describe_topic(name)
    for broker, t in per_broker.items():
        rows = [(q["queue_id"], q["min_offset"], q["max_offset"], q["max_offset"] - q["min_offset"])
                for q in t["queue_offsets"]]
        print_table(["queue", "min offset", "max offset", "messages"], rows,
                    title=f"{t['name']} on {broker} (perm {t['perm']!r}, {t['messages']} messages)")


@topic_app.command("delete")
def topic_delete(
    name: str,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    url: Url = DEFAULT_URL,
    namesrv: Namesrv = None,
) -> None:
    """Delete a topic and all its messages (with --namesrv: on every broker serving it)."""
    if not yes:
        typer.confirm(f"delete topic {name!r} and all its messages?", abort=True)
    with open_client(url, namesrv) as c:
        brokers = c.delete_topic(name)
    console.print(f"deleted topic {name} on {', '.join(brokers)}")


@app.command()
def produce(
    topic: str,
    bodies: Annotated[Optional[list[str]], typer.Argument(help="Message bodies; stdin lines if none.")] = None,
    key: Annotated[Optional[list[str]], typer.Option("--key", "-k", help="Key (repeatable).")] = None,
    tag: Annotated[Optional[str], typer.Option("--tag", "-t", help="Tag.")] = None,
    queue: Annotated[Optional[int], typer.Option(help="Explicit queue id.")] = None,
    url: Url = DEFAULT_URL,
    namesrv: Namesrv = None,
) -> None:
    """Produce messages (arguments, or one per stdin line)."""
    import sys

    lines = bodies if bodies else (line.rstrip("\n") for line in sys.stdin)
    extra = {"keys": key or [], **({"tags": tag} if tag else {}), **({"queue_id": queue} if queue is not None else {})}
    total, batch = 0, []
    with open_client(url, namesrv) as c:
        for line in lines:
            batch.append({"body": line, **extra})
            if len(batch) == 1000:
                total += len(c.produce(topic, batch))
                batch = []
        if batch:
            results = c.produce(topic, batch)
            total += len(results)
            if total == len(results) and total <= 10:
                print_table(["msg_id", "broker", "queue", "offset"],
                            [(r.msg_id, r.broker, r.queue_id, r.queue_offset) for r in results])
    console.print(f"produced {total} message(s) to {topic}")


@app.command()
def groups(
    group: Annotated[Optional[str], typer.Argument(help="Describe this group.")] = None,
    url: Url = DEFAULT_URL,
    namesrv: Namesrv = None,
) -> None:
    """List consumer groups, or show one group's offsets and lag."""
    with open_client(url, namesrv) as c:
        if group is None:
            rows = [(g["group"], b, ",".join(g["topics"]), g["total_lag"], g["consume_enabled"])
                    for b, gs in c.groups().items() for g in gs]
            print_table(["group", "broker", "topics", "lag", "enabled"], rows)
            return
        per_broker = c.group(group)
    for b, g in per_broker.items():
        print_table(["topic", "queue", "committed", "max offset", "lag"],
                    [(r["topic"], r["queue_id"], r["committed_offset"], r["max_offset"], r["lag"])
                     for r in g["queues"]],
                    title=f"group {group} on {b}: lag {g['total_lag']}" + ("" if g["consume_enabled"] else " (DISABLED)"))


def _parse_sets(items: list[str]) -> dict[int, int]:
    values: dict[int, int] = {}
    for item in items:
        qid, sep, off = item.partition("=")
        if not sep or not qid.isdigit() or not off.isdigit():
            fail(f"--set {item!r} must look like QUEUE=OFFSET, e.g. --set 0=12")
        values[int(qid)] = int(off)
    return values


@app.command()
def offsets(
    group: str,
    topic: Annotated[str, typer.Option(help="Topic.")],
    set_: Annotated[Optional[list[str]], typer.Option("--set", help="QUEUE=OFFSET to commit (repeatable).")] = None,
    broker: Annotated[Optional[str], typer.Option(help="With --namesrv: the broker whose queues --set sets.")] = None,
    url: Url = DEFAULT_URL,
    namesrv: Namesrv = None,
) -> None:
    """Show a group's committed offsets on a topic, or set them with --set."""
    values = _parse_sets(set_) if set_ else {}
    with open_client(url, namesrv) as c:
        if values:
            c.commit_offsets(group, topic, values, broker=broker)
        got = c.get_offsets(group, topic)
    print_table(["broker", "queue", "next offset"],
                sorted((b, q, o) for b, per_queue in got.items() for q, o in per_queue.items()),
                title=f"group {group} on {topic}")


app.command("sql")(sql_command)
app.command("namesrv")(namesrv_command)


def main() -> None:
    """Console-script entry point."""
    app()

"""``sparkmq``: run a broker and talk to one from the shell.

    sparkmq serve [--host H] [--port P] [--data-dir D] [--config F] [--flush-mode sync|async]
    sparkmq topic create|list|describe|delete ...
    sparkmq produce TOPIC [BODY ...]      (bodies from stdin, one per line, when none given)
    sparkmq consume TOPIC [--group G] [--follow]
    sparkmq groups [GROUP]
    sparkmq offsets GROUP --topic T [--set QUEUE=OFFSET ...]
    sparkmq sql "SELECT ..."              (over the Delta mirror)

Client commands reach the broker at ``--url`` (env ``SPARKMQ_URL``,
default http://127.0.0.1:8080).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from pydantic import ValidationError

from .cli_consume import consume
from .cli_sql import sql_command
from .cli_client import CliClient, console, fail, print_table
from .settings import load_settings

__all__ = ["app", "main"]

app = typer.Typer(help="sparkmq: a RocketMQ-style broker for Spark Structured Streaming.",
                  no_args_is_help=True, add_completion=False)
topic_app = typer.Typer(help="Create, list, describe and delete topics.", no_args_is_help=True)
app.add_typer(topic_app, name="topic")
app.command("consume")(consume)

Url = Annotated[str, typer.Option("--url", envvar="SPARKMQ_URL", help="Broker base URL.")]
DEFAULT_URL = "http://127.0.0.1:8080"


@app.command()
def serve(
    host: Annotated[Optional[str], typer.Option(help="Listen address [default: 127.0.0.1].")] = None,
    port: Annotated[Optional[int], typer.Option(help="Listen port [default: 8080].")] = None,
    data_dir: Annotated[Optional[Path], typer.Option("--data-dir", help="Data directory [default: ./data].")] = None,
    config: Annotated[Optional[Path], typer.Option(help="TOML settings file [default: ./conf/broker.toml].")] = None,
    flush_mode: Annotated[Optional[str], typer.Option("--flush-mode", help="sync | async [default: async].")] = None,
    log_level: Annotated[Optional[str], typer.Option("--log-level", help="debug|info|warning|error.")] = None,
) -> None:
    """Run a broker (settings: flags > SPARKMQ_* env > TOML file > defaults)."""
    from .server import serve as run_server

    broker = {k: v for k, v in {"host": host, "port": port, "data_dir": str(data_dir) if data_dir else None,
                                "log_level": log_level}.items() if v is not None}
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
    url: Url = DEFAULT_URL,
) -> None:
    """Create a topic."""
    body = {"name": name, "perm": perm, **({"queues": queues} if queues else {})}
    with CliClient(url) as c:
        t = c.call("POST", "/v1/topics", json=body)
    console.print(f"topic {t['name']}: {t['queues']} queues, perm {t['perm']!r}")


@topic_app.command("list")
def topic_list(url: Url = DEFAULT_URL) -> None:
    """List topics."""
    with CliClient(url) as c:
        topics = c.call("GET", "/v1/topics")
    print_table(["topic", "queues", "perm"], [(t["name"], t["queues"], t["perm"]) for t in topics])


@topic_app.command("describe")
def topic_describe(name: str, url: Url = DEFAULT_URL) -> None:
    """Show a topic's queues and offsets."""
    with CliClient(url) as c:
        t = c.call("GET", f"/v1/topics/{name}")
    rows = [(q["queue_id"], q["min_offset"], q["max_offset"], q["max_offset"] - q["min_offset"])
            for q in t["queue_offsets"]]
    print_table(["queue", "min offset", "max offset", "messages"], rows,
                title=f"{t['name']} (perm {t['perm']!r}, {t['messages']} messages)")


@topic_app.command("delete")
def topic_delete(
    name: str,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    url: Url = DEFAULT_URL,
) -> None:
    """Delete a topic and all its messages."""
    if not yes:
        typer.confirm(f"delete topic {name!r} and all its messages?", abort=True)
    with CliClient(url) as c:
        c.call("DELETE", f"/v1/topics/{name}")
    console.print(f"deleted topic {name}")


@app.command()
def produce(
    topic: str,
    bodies: Annotated[Optional[list[str]], typer.Argument(help="Message bodies; stdin lines if none.")] = None,
    key: Annotated[Optional[list[str]], typer.Option("--key", "-k", help="Key (repeatable).")] = None,
    tag: Annotated[Optional[str], typer.Option("--tag", "-t", help="Tag.")] = None,
    queue: Annotated[Optional[int], typer.Option(help="Explicit queue id.")] = None,
    url: Url = DEFAULT_URL,
) -> None:
    """Produce messages (arguments, or one per stdin line)."""
    import sys

    lines = bodies if bodies else (line.rstrip("\n") for line in sys.stdin)
    extra = {"keys": key or [], **({"tags": tag} if tag else {}), **({"queue_id": queue} if queue is not None else {})}
    total, batch = 0, []
    with CliClient(url) as c:
        for line in lines:
            batch.append({"body": line, **extra})
            if len(batch) == 1000:
                total += len(c.call("POST", f"/v1/topics/{topic}/messages", json={"messages": batch})["results"])
                batch = []
        if batch:
            results = c.call("POST", f"/v1/topics/{topic}/messages", json={"messages": batch})["results"]
            total += len(results)
            if total == len(results) and total <= 10:
                print_table(["msg_id", "queue", "offset"], [(r["msg_id"], r["queue_id"], r["queue_offset"])
                                                            for r in results])
    console.print(f"produced {total} message(s) to {topic}")


@app.command()
def groups(
    group: Annotated[Optional[str], typer.Argument(help="Describe this group.")] = None,
    url: Url = DEFAULT_URL,
) -> None:
    """List consumer groups, or show one group's offsets and lag."""
    with CliClient(url) as c:
        if group is None:
            rows = c.call("GET", "/v1/groups")
            print_table(["group", "topics", "lag", "enabled"],
                        [(g["group"], ",".join(g["topics"]), g["total_lag"], g["consume_enabled"]) for g in rows])
            return
        g = c.call("GET", f"/v1/groups/{group}")
    print_table(["topic", "queue", "committed", "max offset", "lag"],
                [(r["topic"], r["queue_id"], r["committed_offset"], r["max_offset"], r["lag"]) for r in g["queues"]],
                title=f"group {group}: lag {g['total_lag']}" + ("" if g["consume_enabled"] else " (DISABLED)"))


@app.command()
def offsets(
    group: str,
    topic: Annotated[str, typer.Option(help="Topic.")],
    set_: Annotated[Optional[list[str]], typer.Option("--set", help="QUEUE=OFFSET to commit (repeatable).")] = None,
    url: Url = DEFAULT_URL,
) -> None:
    """Show a group's committed offsets on a topic, or set them with --set."""
    with CliClient(url) as c:
        if set_:
            values: dict[str, int] = {}
            for item in set_:
                qid, sep, off = item.partition("=")
                if not sep or not qid.isdigit() or not off.isdigit():
                    fail(f"--set {item!r} must look like QUEUE=OFFSET, e.g. --set 0=12")
                values[qid] = int(off)
            c.call("PUT", f"/v1/groups/{group}/offsets", json={"topic": topic, "offsets": values})
        got = c.call("GET", f"/v1/groups/{group}/offsets", params={"topic": topic})
    print_table(["queue", "next offset"], sorted(((int(q), o) for q, o in got["offsets"].items())),
                title=f"group {group} on {topic}")


app.command("sql")(sql_command)


def main() -> None:
    """Console-script entry point."""
    app()

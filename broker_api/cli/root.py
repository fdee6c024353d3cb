"""``sparkmq``: run a broker and talk to one from the shell.

    sparkmq serve [--host H] [--port P] [--data-dir D] [--config F] [--flush-mode sync|async]
                  [--namesrv A;B] [--cluster C] [--broker-name N] [--broker-id I]
                  [--broker-role async_master|sync_master|slave] [--ha-port P]
                  [--ha-master-addr H:P] [--master-url URL]
    sparkmq namesrv [--host H] [--port P] [--config F]
    sparkmq topic create|alter|list|describe|delete ...  (cli/topic.py; --table-* options: cli/table.py)
    sparkmq table status [TOPIC]; sparkmq table replay-dlq TOPIC   (cli/table.py: table topics)
    sparkmq produce TOPIC [BODY ...] [--file PATH]       (cli/produce.py; stdin lines when no body)
    sparkmq consume TOPIC [--group G] [--follow] [--filter SQL]   (cli/consume.py)
    sparkmq pop TOPIC --group G; sparkmq ack --group G RECEIPT...; sparkmq dlq GROUP   (cli/pop.py)
    sparkmq groups [GROUP]; sparkmq offsets GROUP --topic T [--set QUEUE=OFFSET ...]   (cli/groups.py)
    sparkmq sql "SELECT ..."                             (cli/sql.py, over the Delta mirror)
    sparkmq cluster [--namesrv A]                        (cli/cluster.py: roles, slaves, replication lag)
    sparkmq user add|remove|list; sparkmq acl grant|revoke|list   (cli/acl.py: [auth] users and policies)
    sparkmq --token USER:SECRET --ca-file CA.pem COMMAND ...      (env SPARKMQ_TOKEN, SPARKMQ_CA_FILE)

Output rules (stdout for data, stderr for progress and one-line errors) are
in ``cli/common.py``.

Client commands reach the broker at ``--url`` (env ``SPARKMQ_URL``,
default http://127.0.0.1:8080), or with ``--namesrv`` (env ``SPARKMQ_NAMESRV``)
the brokers the NameServers route the topic to (see ``broker_api.client``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from .bench import bench_command
from .cluster import cluster_command
from .acl import acl_app, user_app
from .common import ClientOptions, check_listen_address, fail, note, set_client_options, validation_summary
from .consume import consume
from .groups import groups, offsets
from .produce import produce
from .sql import sql_command
from .store import store_app
from .table import table_app
from .topic import topic_app
from .namesrv import namesrv_command
from .pop import ack_command, dlq_command, pop_command

__all__ = ["app", "main"]

app = typer.Typer(
    help="sparkmq: a RocketMQ-style broker for Spark Structured Streaming.\n\n"
         "Client commands reach the broker at --url (env SPARKMQ_URL, default http://127.0.0.1:8080), "
         "or the brokers the NameServers route to with --namesrv (env SPARKMQ_NAMESRV). "
         "Run `sparkmq COMMAND --help` for a command's options and examples.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Listen address (default: 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Listen port (default: 8080; 0 = any free port).")] = None,
    data_dir: Annotated[Path | None, typer.Option("--data-dir", help="Data directory (default: ./data).")] = None,
    config: Annotated[Path | None, typer.Option(help="TOML settings file (default: ./conf/broker.toml).")] = None,
    flush_mode: Annotated[str | None, typer.Option("--flush-mode", help="sync | async (default: async).")] = None,
    log_level: Annotated[str | None, typer.Option("--log-level", help="debug | info | warning | error.")] = None,
    namesrv: Annotated[str | None, typer.Option(
        "--namesrv", help="NameServers to register with, \"host:port;host:port\" (default: none).")] = None,
    cluster: Annotated[str | None, typer.Option("--cluster", help="Cluster name (default: DefaultCluster).")] = None,
    broker_name: Annotated[str | None, typer.Option(
        "--broker-name", help="Broker name; a master and its slaves share it (default: broker-a).")] = None,
    broker_id: Annotated[int | None, typer.Option(
        "--broker-id", min=0, help="0 = master, > 0 = slave (default: 0).")] = None,
    broker_role: Annotated[str | None, typer.Option(
        "--broker-role", help="async_master | sync_master | slave (default: by broker id).")] = None,
    ha_port: Annotated[int | None, typer.Option(
        "--ha-port", min=0, max=65535, help="Master: HA port slaves connect to (default: any free port).")] = None,
    ha_master_addr: Annotated[str | None, typer.Option(
        "--ha-master-addr", help="Slave: the master's HA host:port (default: from the NameServer).")] = None,
    master_url: Annotated[str | None, typer.Option(
        "--master-url", help="Slave: the master's HTTP URL (default: from the NameServer).")] = None,
    controller: Annotated[str | None, typer.Option(
        "--controller", help="Controller mode: NameServer(s) run with --controller, ADDR[,ADDR...]; the "
        "controller assigns role and id and fails over ([ha] controller).")] = None,
    admin_port: Annotated[int | None, typer.Option(
        "--admin-port", min=-1, max=65535,
        help="Control listener for /healthz /readyz /metrics /v1/broker (default: any free port; -1 = none).")] = None,
    ssl_certfile: Annotated[Path | None, typer.Option(
        "--ssl-certfile", help="PEM certificate chain: serve HTTPS (tls.certfile setting).")] = None,
    ssl_keyfile: Annotated[Path | None, typer.Option(
        "--ssl-keyfile", help="PEM private key of --ssl-certfile (tls.keyfile setting).")] = None,
    kafka_port: Annotated[int | None, typer.Option(
        "--kafka-port", min=-1, max=65535, help="Kafka protocol listener port (default: off; 0 = any free port).")] = None,
) -> None:
    """Run a broker on its embedded defaults.

    Settings: flags > SPARKMQ_<SECTION>__<FIELD> environment > TOML file >
    defaults (see docs/reference/configuration.md). Prints one line
    when ready; Ctrl-C or SIGTERM shuts down cleanly.

    Examples:

      sparkmq serve

      sparkmq serve --port 8081 --data-dir ./data-b --flush-mode sync

      sparkmq serve --namesrv 127.0.0.1:9876 --cluster c1 --broker-name broker-a

      sparkmq serve --port 8081 --data-dir ./data-s --broker-id 1 --ha-master-addr 127.0.0.1:10912

      sparkmq serve --port 8081 --data-dir ./d1 --broker-name bk --controller 127.0.0.1:9876 --namesrv 127.0.0.1:9876

      SPARKMQ_AUTH__ENABLED=true sparkmq serve --ssl-certfile cert.pem --ssl-keyfile key.pem
    """
    from pydantic import ValidationError  # settings (pydantic) and the server load only when serving

    from ..settings.broker import load_settings

    flags = {"host": host, "port": port, "data_dir": str(data_dir) if data_dir else None, "log_level": log_level,
             "namesrv_addr": namesrv, "cluster": cluster, "name": broker_name, "broker_id": broker_id}
    broker = {k: v for k, v in flags.items() if v is not None}
    store = {"flush_mode": flush_mode} if flush_mode else {}
    server = {"admin_port": admin_port} if admin_port is not None else {}
    ha_flags = {"role": broker_role, "listen_port": ha_port, "master_addr": ha_master_addr, "master_url": master_url,
                "controller": controller}
    ha = {k: v for k, v in ha_flags.items() if v is not None}
    tls = {k: str(v) for k, v in (("certfile", ssl_certfile), ("keyfile", ssl_keyfile)) if v is not None}
    try:
        kafka = {"port": kafka_port} if kafka_port is not None else {}
        settings = load_settings(config, broker=broker, store=store, ha=ha, tls=tls, server=server, kafka=kafka)
    except FileNotFoundError as exc:
        fail(str(exc))
    except ValidationError as exc:
        fail(f"invalid settings: {validation_summary(exc)}")
    check_listen_address(settings.broker.host, settings.broker.port, "broker")
    from ..auth import exposure_warning  # the server's imports (FastAPI, the store) after the checks: bad
    from ..server import serve as run_server  # settings and a busy port are refused at once

    warning = exposure_warning(settings.broker.host, settings.auth.enabled, settings.tls.enabled, "broker")
    if warning:
        note(warning)
    run_server(settings)


@app.callback()
def _client_options(
    token: Annotated[str | None, typer.Option(
        "--token", envvar="SPARKMQ_TOKEN", help="Credentials <user>:<secret> for brokers and NameServers "
        "with \\[auth] enabled (from `sparkmq user add`).")] = None,  # \\[: rich markup would eat [auth]
    ca_file: Annotated[str | None, typer.Option(
        "--ca-file", envvar="SPARKMQ_CA_FILE", help="PEM CA bundle that signed the brokers' and "
        "NameServers' certificates (https:// URLs).")] = None,
) -> None:
    """Options every client command shares: sparkmq --token U:S --ca-file ca.pem COMMAND ..."""
    set_client_options(ClientOptions(token=token, ca_file=ca_file))


app.add_typer(topic_app, name="topic")
app.add_typer(user_app, name="user")
app.add_typer(acl_app, name="acl")
app.add_typer(store_app, name="store")
app.add_typer(table_app, name="table")
app.command("produce")(produce)
app.command("consume")(consume)
app.command("pop")(pop_command)
app.command("ack")(ack_command)
app.command("dlq")(dlq_command)
app.command("groups")(groups)
app.command("offsets")(offsets)
app.command("sql")(sql_command)
app.command("bench")(bench_command)
app.command("namesrv")(namesrv_command)
app.command("cluster")(cluster_command)


def main() -> None:
    """Console-script entry point: errors no command translated still end as one ``error:`` line."""
    try:
        app()
    except Exception as exc:  # noqa: BLE001 - a bug or an unforeseen failure: one line, never a traceback
        note(f"error: {type(exc).__name__}: {exc}")
        sys.exit(1)

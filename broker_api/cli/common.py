"""The CLI's shared options, client opener and output helpers.

Output rules every command follows:

* data (tables, messages, JSON) goes to stdout; progress, counts and errors
  go to stderr, so ``sparkmq consume orders > out.jsonl`` keeps a clean file;
* an error is exactly one line, ``error: <what was wrong and what to do>``,
  on stderr, never wrapped at the terminal width, with exit status 1;
* tables have a title and headers, numbers are right-aligned, and ``--json``
  prints the same data for scripts.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import orjson
import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text

if TYPE_CHECKING:  # the client (httpx) and pydantic load when a command uses them, not for --help
    from pydantic import ValidationError

    from ..client import BrokerUnreachableError, SparkMQClient

__all__ = [
    "DEFAULT_URL",
    "AsJson",
    "ClientOptions",
    "Namesrv",
    "Url",
    "check_listen_address",
    "client_options",
    "set_client_options",
    "console",
    "fail",
    "note",
    "open_client",
    "print_json",
    "print_table",
    "say",
    "validation_summary",
]

Url = Annotated[str, typer.Option("--url", envvar="SPARKMQ_URL", help="Broker base URL.")]
Namesrv = Annotated[str | None, typer.Option(
    "--namesrv", envvar="SPARKMQ_NAMESRV",
    help="NameServers \"host:port;host:port\": route to the brokers serving the topic (instead of --url).")]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table (for scripts).")]
DEFAULT_URL = "http://127.0.0.1:8080"

# Piped stdout gets a wide console so tables and lines are never cut at 80 columns.
console = Console(width=None if sys.stdout.isatty() else 400, highlight=False)


def _one_line(message: str) -> str:
    return " ".join(message.split())


def fail(message: str, code: int = 1) -> NoReturn:
    """Print ``error: message`` as one line on stderr and exit ``code``."""
    typer.echo(typer.style("error:", fg="red", bold=True) + " " + _one_line(message), err=True)
    raise typer.Exit(code)


def note(message: str) -> None:
    """A status line for people (counts, summaries) on stderr, unwrapped."""
    typer.echo(_one_line(message), err=True)


def validation_summary(exc: ValidationError) -> str:
    """A pydantic error as one line: ``store.flush_mode: Input should be 'sync' or 'async'; ...``."""
    return "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" if e["loc"] else e["msg"]
                     for e in exc.errors())


def say(message: str) -> None:
    """A result line on stdout, unwrapped (rich markup allowed)."""
    console.print(message, soft_wrap=True)


def check_listen_address(host: str, port: int, what: str) -> None:
    """Exit with one ``error:`` line if ``host:port`` cannot be listened on (e.g. already in use)."""
    if port == 0:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}; is another {what} running there? "
                 "pick another --port")


def _hint(namesrv: str | None, exc: BrokerUnreachableError) -> str:
    if "CERTIFICATE_VERIFY_FAILED" in exc.message:
        return " (the server's certificate is not trusted: pass --ca-file or set SPARKMQ_CA_FILE)"
    if exc.broker:  # the NameServers answered; the message names the broker that did not
        return " (start it again, or read the others with --allow-partial where the command has it)"
    if namesrv:
        return " (is a NameServer running? start one with `sparkmq namesrv`, or check --namesrv)"
    return " (is the broker running? start one with `sparkmq serve`, or pass --url)"


@dataclass(frozen=True)
class ClientOptions:
    """The root options every client command shares (``sparkmq --token ... --ca-file ... COMMAND``)."""

    token: str | None = None
    ca_file: str | None = None


# Set by the root command's callback for the command it runs (a context variable, not a global setting).
_CLIENT_OPTIONS: ContextVar[ClientOptions] = ContextVar("sparkmq_client_options", default=ClientOptions())


def set_client_options(options: ClientOptions) -> None:
    _CLIENT_OPTIONS.set(options)


def client_options() -> ClientOptions:
    """The root command's ``--token`` / ``--ca-file`` (or their environment variables)."""
    return _CLIENT_OPTIONS.get()


@contextmanager
def open_client(url: str, namesrv: str | None) -> Iterator[SparkMQClient]:
    """A :class:`SparkMQClient` (``--namesrv`` wins over ``--url``); its errors exit 1 with one line."""
    from ..client import BrokerUnreachableError, SparkMQClient
    from ..errors import BrokerError

    o = client_options()
    try:
        with (SparkMQClient(namesrv=namesrv, token=o.token, ca_file=o.ca_file) if namesrv
              else SparkMQClient(url, token=o.token, ca_file=o.ca_file)) as client:
            yield client
    except BrokerUnreachableError as exc:
        fail(exc.message + _hint(namesrv, exc))
    except BrokerError as exc:
        code = getattr(exc, "code", None)
        status = getattr(exc, "status", None)
        fail(exc.message + (f" ({code}, HTTP {status})" if code and status else ""))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def print_table(columns: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None = None) -> None:
    """A titled table on stdout; columns whose values are all numbers are right-aligned."""
    from rich.table import Table  # loads with the first table, not for --help

    materialized = [list(row) for row in rows]
    if title:
        console.print(f"[bold]{escape(title)}[/]", soft_wrap=True)
    table = Table(show_edge=False, header_style="bold")
    for i, column in enumerate(columns):
        values = [row[i] for row in materialized if row[i] is not None]
        numeric = bool(values) and all(_is_number(v) for v in values)
        table.add_column(column, justify="right" if numeric else "left", no_wrap=True)
    for row in materialized:
        table.add_row(*(Text("" if v is None else _cell(v)) for v in row))
    if not materialized:
        table.caption = "(none)"
    console.print(table)


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def print_json(value: Any) -> None:
    """One JSON document on stdout (keys sorted, so scripts and diffs are stable)."""
    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS).decode() + "\n")
    sys.stdout.flush()

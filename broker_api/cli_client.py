"""The CLI's small HTTP client and output helpers."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Iterable, Optional, Sequence

import httpx
import typer
from rich.console import Console
from rich.table import Table

from .client import SparkMQClient
from .errors import BrokerError

__all__ = ["DEFAULT_URL", "CliClient", "Namesrv", "Url", "console", "fail", "open_client", "print_table"]

Url = Annotated[str, typer.Option("--url", envvar="SPARKMQ_URL", help="Broker base URL.")]
Namesrv = Annotated[Optional[str], typer.Option(
    "--namesrv", envvar="SPARKMQ_NAMESRV",
    help="NameServers \"host:port;host:port\": route to the brokers serving the topic (instead of --url).")]
DEFAULT_URL = "http://127.0.0.1:8080"

console = Console()
_err = Console(stderr=True)


def fail(message: str, code: int = 1) -> None:
    """Print ``error: message`` to stderr and exit non-zero."""
    _err.print(f"[bold red]error:[/] {message}", highlight=False)
    raise typer.Exit(code)


@contextmanager
def open_client(url: str, namesrv: str | None) -> Iterator[SparkMQClient]:
    """A :class:`SparkMQClient` (``--namesrv`` wins over ``--url``); its errors exit 1 with one line."""
    try:
        with SparkMQClient(namesrv=namesrv) if namesrv else SparkMQClient(url) as client:
            yield client
    except BrokerError as exc:
        code = getattr(exc, "code", None)
        status = getattr(exc, "status", None)
        fail(exc.message + (f" ({code}, HTTP {status})" if code else ""))


class CliClient:
    """Talks to a broker; every failure becomes a clear message and exit code 1."""

    def __init__(self, url: str, timeout_s: float = 35.0) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.Client(base_url=self.url, timeout=timeout_s)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "CliClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            resp = self._http.request(method, path, **kwargs)
        except httpx.ConnectError:
            fail(f"cannot reach the broker at {self.url}; start one with `sparkmq serve` or pass --url")
        except httpx.HTTPError as exc:
            fail(f"request to {self.url}{path} failed: {exc}")
        if resp.status_code >= 400:
            try:
                body = resp.json()
                fail(f"{body['message']} ({body['error']}, HTTP {resp.status_code})")
            except (ValueError, KeyError, TypeError):
                fail(f"HTTP {resp.status_code} from {path}: {resp.text[:200]}")
        return resp.json()


def print_table(columns: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None = None) -> None:
    table = Table(title=title, show_edge=False, header_style="bold")
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*("" if v is None else str(v) for v in row))
    console.print(table)

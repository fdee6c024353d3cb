"""The broker's side of table topics: settings on the topic, Delta writing on a master.

A topic's ``table`` settings (:class:`connectors.tables.TableSpec`) live in its
metadata (``topics.json``, synced to slaves).  :class:`TableManager` checks a
change before it is stored (bad settings 400, a narrowing schema change 409),
hands it to :class:`connectors.tables.service.TableTopics`, which writes the
tables (masters only; enabling backfills from the oldest retained message),
and answers the status, SQL table list and metrics of every table topic.

On a slave, or with ``[tables] enabled = false``, settings are kept and shown
but nothing is written; enabling a table there is ``503 tables_disabled``
(a slave refuses every write before this, ``403 slave_read_only``).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from connectors.errors import TableError
from connectors.tables.spec import TableSpec

from ..errors import BadRequestError, TableNotFoundError, TablesDisabledError
from ..metrics import render_gauge
from ..settings.broker import BrokerSettings
from .topics import TopicConfig, TopicManager

__all__ = ["TableManager"]

log = logging.getLogger(__name__)

_GAUGES = (  # status key -> (metric, help)
    ("rows", "sparkmq_table_rows", "Rows in the topic's Delta table."),
    ("dlq_rows", "sparkmq_table_dlq_rows", "Rows in the topic's dead-letter table <topic>__dlq (bodies that "
                                           "did not fit the schema)."),
    ("lag_bytes", "sparkmq_table_lag_bytes", "CommitLog bytes not yet committed to the topic's table."),
    ("lag_seconds", "sparkmq_table_lag_seconds", "Age of the oldest message not yet committed to the table."),
    ("committed_offset", "sparkmq_table_committed_offset", "CommitLog offset the table's last commit covers."),
)


class TableManager:
    """``start()``/``stop()``; topic create/alter/delete go through it so the table follows the metadata."""

    def __init__(self, settings: BrokerSettings, store: Any, topics: TopicManager, is_slave: bool) -> None:
        self._settings, self._store, self._topics = settings, store, topics
        self._writes = settings.tables.enabled and not is_slave
        self._why_not = ("this broker is a slave; tables are written by its master" if is_slave else
                         "[tables] enabled = false on this broker; set it to true and restart")
        self.service: Any = None  # connectors.tables.service.TableTopics once started
        self._errors: dict[str, str] = {}  # topic -> why its table could not be configured at start
        self._lock = threading.Lock()  # one settings change at a time
        self._started = False

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> None:
        """Configure every topic with a table (after the store and topics are loaded); the writer starts with the
        first table, so a broker without table topics never loads it."""
        self._started = True
        for cfg in self._topics.list():
            if cfg.table.enabled and self._ensure_service() is not None:
                try:
                    self.service.configure(cfg.name, cfg.table)
                except TableError as exc:  # one bad table must not stop the broker: shown in its status
                    log.error("table of topic %s not started: %s", cfg.name, exc)
                    self._errors[cfg.name] = str(exc)

    def stop(self) -> None:
        """Stop writing (each table keeps its committed offset); safe twice."""
        self._started = False
        service, self.service = self.service, None
        if service is not None:
            service.stop()

    def _ensure_service(self) -> Any:
        """The running writer (started on first use), or None where tables are not written."""
        if self.service is None and self._writes and self._started:
            from connectors.tables.service import TableTopics  # the Delta writer loads only when used

            root = self._settings.tables_root  # a local directory, or an object store URI (s3://...)
            if "://" not in root:
                self._settings.tables_path.mkdir(parents=True, exist_ok=True)
            service = TableTopics(self._store, root, app_id=self._settings.broker.name)
            service.start()
            self.service = service
        return self.service

    # -- settings changes ------------------------------------------------------

    def create(self, name: str, queues: int, perm: str, table: TableSpec) -> tuple[TopicConfig, bool]:
        """Create (or find the identical) topic with ``table``; (config, existed)."""
        with self._lock:
            existed = self._topics.exists(name)
            if table.enabled and not (existed and self._topics.get(name).table == table):
                self._check(name, TableSpec(), table)
            cfg = self._topics.create(name, queues, perm, exist_ok=True, table=table)
            if table.enabled and not existed:
                self._apply(name, table)
            return cfg, existed

    def alter(self, name: str, changes: dict[str, Any]) -> TopicConfig:
        """Merge ``changes`` into the topic's table settings (PUT semantics), check, apply, store."""
        with self._lock:
            old = self._topics.get(name).table
            new = old.merged(changes)  # TableSpecError (400) names unknown keys and bad values
            if new == old:
                return self._topics.get(name)
            self._check(name, old, new)
            self._apply(name, new)
            return self._topics.set_table(name, new)

    def drop(self, name: str) -> None:
        """The topic is being deleted with its data: stop writing its table and delete it and its DLQ table."""
        with self._lock:
            if self.service is not None and self._topics.get(name).table.enabled:
                from connectors.tables.delta import TopicDelta

                self.service.configure(name, None)
                TopicDelta.drop(self.service.table_uri(name))
                TopicDelta.drop(self.service.dlq_uri(name))
            self._errors.pop(name, None)

    def replay_dlq(self, name: str) -> dict[str, Any]:
        """Translate the topic's dead-letter rows again with its current schema."""
        cfg = self._topics.get(name)
        if not cfg.table.enabled:
            raise TableNotFoundError(f"topic {name!r} has no table (table mode 'off'); enable one with "
                                     f"PUT /v1/topics/{name} {{\"table\": {{\"mode\": \"typed\", ...}}}}")
        if cfg.table.mode != "typed":  # a raw table takes every message: it has no dead letters
            raise BadRequestError(f"topic {name!r} has a {cfg.table.mode} table, which has no dead-letter rows; "
                                  "only a typed table (mode 'typed') has <topic>__dlq to replay")
        service = self._ensure_service()
        if service is None:
            raise TablesDisabledError(f"no table is written here: {self._why_not}")
        return dict(service.replay_dlq(name))

    def _check(self, name: str, old: TableSpec, new: TableSpec) -> None:
        from connectors.tables.schema import check_evolution, validate_spec

        if new.enabled and not self._writes:
            raise TablesDisabledError(f"cannot enable the table of topic {name!r}: {self._why_not}")
        validate_spec(new)  # TableSpecError: 400 bad_table
        if old.enabled and new.enabled:
            check_evolution(old, new)  # SchemaChangeError: 409 schema_change_refused, naming the field

    def _apply(self, name: str, table: TableSpec) -> None:
        service = self._ensure_service() if table.enabled else self.service
        if service is not None:
            service.configure(name, table if table.enabled else None)
            self._errors.pop(name, None)

    # -- what the routes, SQL and metrics read ---------------------------------

    def status(self, name: str) -> dict[str, Any] | None:
        """The status of topic ``name``'s table; None without one; ``writing`` false where none is written."""
        cfg = self._topics.get(name)
        if not cfg.table.enabled:
            return None
        return self._status_of(cfg, self._service_status())

    def statuses(self) -> dict[str, dict[str, Any]]:
        """topic -> status, for every topic with a table."""
        live = self._service_status()
        return {c.name: self._status_of(c, live) for c in self._topics.list() if c.table.enabled}

    def _service_status(self) -> dict[str, dict[str, Any]]:
        return dict(self.service.status()) if self.service is not None else {}

    def _status_of(self, cfg: TopicConfig, live: dict[str, dict[str, Any]]) -> dict[str, Any]:
        status: dict[str, Any] = {"mode": cfg.table.mode, "write_mode": cfg.table.write_mode,
                                  "writing": self.service is not None, "rows": None, "dlq_rows": None,
                                  "committed_offset": None, "lag_bytes": None, "lag_seconds": None,
                                  "version": None, "last_error": None}
        status.update(live.get(cfg.name, {}))
        status["writing"] = self.service is not None and cfg.name in live
        if not self._writes:
            status["last_error"] = f"not written here: {self._why_not}"
        elif cfg.name in self._errors:
            status["last_error"] = self._errors[cfg.name]
        if self.service is not None:
            status["table_uri"] = self.service.table_uri(cfg.name)
            status["dlq_uri"] = self.service.dlq_uri(cfg.name)
        return status

    def sql_tables(self) -> dict[str, str]:
        """SQL name -> Delta table URI: each table topic by its name, its dead letters as ``<topic>__dlq``."""
        if self.service is None:
            return {}
        out: dict[str, str] = {}
        for cfg in self._topics.list():
            if cfg.table.enabled:
                out[cfg.name] = self.service.table_uri(cfg.name)
                out[f"{cfg.name}__dlq"] = self.service.dlq_uri(cfg.name)
        return out

    def metric_lines(self) -> list[str]:
        """Per-table gauges (rows, DLQ rows, lag in bytes and seconds) in Prometheus text."""
        statuses = self.statuses()
        lines: list[str] = []
        for key, metric, help_text in _GAUGES:
            samples = [({"topic": t}, float(s[key])) for t, s in sorted(statuses.items())
                       if isinstance(s.get(key), (int, float)) and not isinstance(s.get(key), bool)]
            lines += render_gauge(metric, help_text, samples)
        return lines

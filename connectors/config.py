"""Typed settings of the Delta mirror and the embedded SQL engine.

Each field's ``metadata["doc"]`` is its one-line description: the broker's
configuration reference (``docs/reference/configuration.md``, ``conf/broker.toml``) is generated from it
by ``python -m broker_api.settings.doc``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = ["MirrorConfig"]



@dataclass(frozen=True)
class MirrorConfig:
    """Every knob of the mirror; the broker's ``[mirror]`` section has exactly these fields."""

    enabled: bool = field(
        default=True,
        metadata={"doc": "Mirror messages into a Delta table (and serve POST /v1/sql over it)."},
    )
    host: Literal["thread", "process"] = field(
        default="thread",
        metadata={"doc": 'Where the Delta writer runs: "thread" (in the broker, on the batches the reput thread '
                         'already parsed) or "process" (a child process reading the CommitLog read-only, off the '
                         "broker's GIL and memory)."},
    )
    table_uri: str = field(default="", metadata={"doc": 'Delta table path or URI (`s3://bucket/prefix/messages`: credentials and '
                                                       'endpoint from the AWS_* environment); "" = '
                                                       '`<data_dir>/delta/messages`.'})
    bodies: bool = field(
        default=True,
        metadata={"doc": "Mirror message bodies too (false keeps only the index columns; body stays null)."},
    )
    batch_rows: int = field(
        default=50_000,
        metadata={"doc": "Rows per Delta commit while the mirror keeps up (up to 4x this while it is behind)."},
    )
    batch_interval_s: float = field(
        default=1.0,
        metadata={"doc": "Commit at least this often (seconds) while messages arrive."},
    )
    compact_every_commits: int = field(
        default=50,
        metadata={"doc": "Compact small files every this many mirror commits."},
    )
    checkpoint_every_commits: int = field(
        default=20,
        metadata={"doc": "Write a Delta checkpoint every this many mirror commits."},
    )
    vacuum_retention_hours: float = field(
        default=168.0,
        metadata={"doc": "Files removed by compaction are deleted this many hours later."},
    )
    app_id: str = field(
        default="",
        metadata={"doc": "Delta app-transaction id recording the mirrored CommitLog offset; "
                         '"" = `[broker] name`.'},
    )
    sql_max_rows: int = field(
        default=10_000,
        metadata={"doc": "Most rows a SQL query returns (POST /v1/sql, `sparkmq sql`)."},
    )
    sql_timeout_s: float = field(default=30.0, metadata={"doc": "SQL query timeout in seconds."})

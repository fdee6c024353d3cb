"""Typed settings of the Delta mirror and the embedded SQL engine."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MirrorConfig"]


@dataclass(frozen=True)
class MirrorConfig:
    """Every knob of the mirror; the broker's ``[mirror]`` section has exactly these fields."""

    enabled: bool = True
    # "" means <data_dir>/delta/messages (the broker fills it in).
    table_uri: str = ""
    # False mirrors index data only: the body column stays null.
    bodies: bool = True
    # A commit happens every batch_rows rows or batch_interval_s seconds.
    batch_rows: int = 50_000
    batch_interval_s: float = 1.0
    # Maintenance cadence, counted in mirror commits.
    compact_every_commits: int = 50
    checkpoint_every_commits: int = 20
    # Files removed by compaction are deleted this long after removal.
    vacuum_retention_hours: float = 168.0
    # Delta app transaction id; "" means the broker name.
    app_id: str = ""
    # Embedded SQL limits.
    sql_max_rows: int = 10_000
    sql_timeout_s: float = 30.0

"""What a sink task hands the driver, and how the driver groups it per broker.

The driver's write planner and commit runner are fresh Python processes on a query's first
batch; this module (and :mod:`writer`, which uses it) imports neither pyarrow nor the task's
sending code, so those processes load only what a commit needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql.datasource import WriterCommitMessage

from .options import ClientConfig, WriterOptions

__all__ = ["SinkCommitMessage", "per_broker", "transaction_ids"]


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    """What one task wrote: its open transactions (one per topic) and row count.

    With ``namesrv``, ``per_broker`` maps broker address → transaction ids and
    ``broker_names`` address → broker name; ``transaction_ids`` is then empty.
    """

    transaction_ids: list[str] = field(default_factory=list)
    rows: int = 0
    per_broker: dict[str, list[str]] = field(default_factory=dict)
    broker_names: dict[str, str] = field(default_factory=dict)


def transaction_ids(messages: list[WriterCommitMessage | None]) -> list[str]:
    return [t for m in messages if isinstance(m, SinkCommitMessage) for t in m.transaction_ids]


def per_broker(
    opts: WriterOptions, messages: list[WriterCommitMessage | None]
) -> list[tuple[str, ClientConfig, list[str]]]:
    """(broker name, client config, transaction ids) for each broker the batch wrote to."""
    if not opts.client.routed:
        return [("", opts.client, transaction_ids(messages))]
    merged: dict[str, list[str]] = {}
    names: dict[str, str] = {}
    for m in messages:
        if isinstance(m, SinkCommitMessage):
            names.update(m.broker_names)
            for address, txids in m.per_broker.items():
                merged.setdefault(address, []).extend(txids)
    return [
        (names.get(addr, addr),
         ClientConfig((addr,), opts.client.timeout_s, broker=names.get(addr, ""), trust=opts.client.trust),
         sorted(txids))
        for addr, txids in sorted(merged.items(), key=lambda kv: names.get(kv[0], kv[0]))
    ]

"""Delta table upkeep shared by the mirror table and the table topics: compact, checkpoint, vacuum.

Every write and upkeep commit runs with ``NO_HOOKS``: checkpoints and log clean-up are
scheduled by their owners, never run as a side effect of a commit.
"""

from __future__ import annotations

from deltalake import DeltaTable, PostCommitHookProperties

__all__ = ["NO_HOOKS", "checkpoint", "compact", "vacuum"]

NO_HOOKS = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)


def compact(table: DeltaTable) -> None:
    """Rewrite small files into larger ones (same rows, new files)."""
    table.optimize.compact(post_commithook_properties=NO_HOOKS)


def checkpoint(table: DeltaTable) -> None:
    """Write a checkpoint so readers do not replay the whole log."""
    table.create_checkpoint()


def vacuum(table: DeltaTable, retention_hours: float) -> None:
    """Delete files removed from the table more than ``retention_hours`` ago."""
    table.vacuum(retention_hours=max(0, int(retention_hours)), dry_run=False, enforce_retention_duration=False,
                 post_commithook_properties=NO_HOOKS)

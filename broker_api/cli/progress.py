"""Progress bars for long CLI work, always on stderr.

A :class:`ProgressBar` animates (rich) only when stderr is a terminal; on a
pipe or a file it draws nothing, so logs get no animation frames.  Data on
stdout is never touched: the bar does not redirect ``print``.
"""

from __future__ import annotations

import sys
from types import TracebackType
from typing import TYPE_CHECKING, Self

if TYPE_CHECKING:  # rich.progress loads only when a bar is drawn
    from rich.progress import Progress, ProgressColumn, TaskID

__all__ = ["ProgressBar", "stderr_is_terminal"]


def stderr_is_terminal() -> bool:
    """True when stderr is an interactive terminal (where a bar may animate)."""
    return sys.stderr.isatty()


class ProgressBar:
    """``with ProgressBar("producing", total=None) as bar: bar.advance(n)``.

    ``total=None`` shows a counter and elapsed time instead of a bar.
    ``enabled=False`` (or a non-terminal stderr) makes every call a no-op.
    """

    def __init__(self, description: str, total: int | None, *, unit: str = "messages",
                 enabled: bool = True) -> None:
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self.done = 0
        if enabled and stderr_is_terminal():
            from rich.console import Console
            from rich.progress import Progress

            self._progress = Progress(*_columns(total, unit), console=Console(stderr=True),
                                      redirect_stdout=False, redirect_stderr=False, transient=False)
            self._task = self._progress.add_task(description, total=total)

    def __enter__(self) -> Self:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def advance(self, n: int) -> None:
        self.done += n
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, completed=self.done)

    def close(self) -> None:
        """Draw the final state and stop animating (safe to call twice)."""
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


def _columns(total: int | None, unit: str) -> list[ProgressColumn]:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    if total is None:
        return [SpinnerColumn(), TextColumn("{task.description}"),
                TextColumn(f"{{task.completed:,.0f}} {unit}"), TimeElapsedColumn()]
    return [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn(unit), TimeElapsedColumn(), TimeRemainingColumn()]

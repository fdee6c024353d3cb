"""The benchmark table: one row per measure, as markdown (stdout and docs/benchmarks.md) and JSON.

Columns: what, the command that reproduces the row, the figure, the peer's
figure measured in the same run, the ratio, the target from the issues, and
the machine.  :func:`rewrite_block` replaces what lies between the page's
``<!-- generated:bench start -->`` and ``<!-- generated:bench end -->``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.results import Measure, Target

__all__ = [
    "BEGIN",
    "END",
    "BlockMarkersMissing",
    "Row",
    "check_block",
    "fmt_value",
    "markdown_table",
    "rewrite_block",
]

BEGIN = "<!-- generated:bench start -->"
END = "<!-- generated:bench end -->"
HEADERS = ("what", "command", "figure", "peer, same run", "ratio", "target", "machine")


class BlockMarkersMissing(ValueError):
    """Raised when a file lacks the generated:bench start/end markers."""


@dataclass(frozen=True)
class Row:
    """A measure placed in the table: its area, reproducing command and machine."""

    area: str
    command: str
    measure: Measure
    machine: str

    def cells(self) -> tuple[str, ...]:
        m = self.measure
        return (m.what, f"`{self.command}`", fmt_value(m.value, m.unit), _peer_cell(m), _ratio_cell(m),
                _target_cell(m), self.machine)

    def to_json(self) -> dict[str, Any]:
        m = self.measure
        targets = [{**_target_json(t), "text": _target_text(t, m.unit), "met": t.met(m.value, m.ratio)}
                   for t in m.targets]
        return {"area": self.area, "key": m.key, "what": m.what, "command": self.command, "value": m.value,
                "unit": m.unit, "peer": m.peer, "peer_value": m.peer_value, "peer_skipped": m.peer_skipped,
                "ratio": m.ratio, "targets": targets, "machine": self.machine, "details": m.details}


def _target_json(t: Target) -> dict[str, Any]:
    return {"op": t.op, "threshold": t.threshold, "on": t.on}


def fmt_value(value: float, unit: str) -> str:
    """``163,000 msg/s``, ``6.10 s/GiB``, ``2.31 ms``: three significant figures at least."""
    size = abs(value)
    if size >= 100:
        text = f"{value:,.0f}"
    elif size >= 10:
        text = f"{value:.1f}"
    else:
        text = f"{value:.2f}"
    return f"{text} {unit}"


def _peer_cell(m: Measure) -> str:
    if m.peer is None:
        return ""
    if m.peer_value is None:
        return f"{m.peer}: skipped, {m.peer_skipped or 'not measured'}"
    return f"{m.peer}: {fmt_value(m.peer_value, m.unit)}"


def _ratio_cell(m: Measure) -> str:
    return "" if m.ratio is None else f"{m.ratio:.2f}×"


def _target_text(t: Target, unit: str) -> str:
    op = "≥" if t.op == ">=" else "≤"
    if t.on == "ratio":
        return f"{op} {t.threshold:g}× peer"
    number = f"{t.threshold:,.0f}" if float(t.threshold).is_integer() else f"{t.threshold:g}"
    return f"{op} {number} {unit}"


def _target_cell(m: Measure) -> str:
    parts = []
    for t in m.targets:
        met = t.met(m.value, m.ratio)
        verdict = "not measured" if met is None else ("met" if met else "missed")
        parts.append(f"{_target_text(t, m.unit)}: {verdict}")
    return "; ".join(parts)


def _escape(cell: str) -> str:
    return cell.replace("|", "\\|").replace("\n", " ")


def markdown_table(rows: list[Row]) -> str:
    """The table as GitHub markdown, one line per row."""
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(_escape(c) for c in row.cells()) + " |" for row in rows]
    return "\n".join(lines)


def check_block(path: Path) -> None:
    """Raise :class:`BlockMarkersMissing` unless ``path`` has both markers, start before end."""
    text = path.read_text(encoding="utf-8")
    begin, end = text.find(BEGIN), text.find(END)
    if begin < 0 or end < begin:
        raise BlockMarkersMissing(f"{path} has no '{BEGIN}' ... '{END}' block; add both lines where the "
                                  "table should go")


def rewrite_block(path: Path, block: str) -> None:
    """Replace the text between the markers in ``path`` with ``block`` (the rest stays byte for byte)."""
    check_block(path)
    text = path.read_text(encoding="utf-8")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{BEGIN}\n{block.strip()}\n{END}{tail}"
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(new, encoding="utf-8")
    tmp.replace(path)

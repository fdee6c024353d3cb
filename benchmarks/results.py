"""Structured results that each benchmark script hands to ``sparkmq bench``.

A script builds a :class:`Recorder`, announces its phases with
:meth:`Recorder.phase` (a ``[phase] ...`` line on stdout, which the suite
shows in its progress display) and adds one :class:`Measure` per figure.
With ``--json-out PATH`` the script writes them as::

    {"benchmark": "store", "options": {...}, "measures": [{"key": ..., "value": ..., ...}]}

A measure carries its peer (measured in the same run) and the issue's
targets, so the suite only adds the command and the machine.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = ["PHASE_PREFIX", "Measure", "Recorder", "Target", "load_measures"]

PHASE_PREFIX = "[phase] "


@dataclass(frozen=True)
class Target:
    """A goal from the issues: ``value`` (or ``ratio`` to the peer) ``>=`` / ``<=`` ``threshold``."""

    op: Literal[">=", "<="]
    threshold: float
    on: Literal["value", "ratio"] = "value"

    def met(self, value: float, ratio: float | None) -> bool | None:
        """Whether the figure meets the target; None when the ratio is unknown (peer skipped)."""
        got = value if self.on == "value" else ratio
        if got is None:
            return None
        return got >= self.threshold if self.op == ">=" else got <= self.threshold


@dataclass(frozen=True)
class Measure:
    """One figure of one benchmark, with its peer and targets."""

    key: str
    what: str
    value: float
    unit: str
    peer: str | None = None
    peer_value: float | None = None
    peer_skipped: str | None = None
    targets: tuple[Target, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        """``value / peer_value`` when the peer was measured."""
        if self.peer_value is None or self.peer_value == 0:
            return None
        return self.value / self.peer_value

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["targets"] = [asdict(t) for t in self.targets]
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Measure:
        targets = tuple(Target(**t) for t in data.get("targets", ()))
        return cls(**{**data, "targets": targets})


class Recorder:
    """Collects a script's measures; writes them to ``json_out`` (if given) on :meth:`write`."""

    def __init__(self, benchmark: str, json_out: str | Path | None, options: dict[str, Any]) -> None:
        self.benchmark = benchmark
        self.json_out = Path(json_out) if json_out else None
        self.options = options
        self.measures: list[Measure] = []

    def phase(self, text: str) -> None:
        """Announce the phase starting now (shown by the suite's progress display)."""
        print(f"{PHASE_PREFIX}{text}", flush=True)

    def add(self, measure: Measure) -> Measure:
        self.measures.append(measure)
        return measure

    def write(self) -> None:
        if self.json_out is None:
            return
        data = {"benchmark": self.benchmark, "options": self.options,
                "measures": [m.to_json() for m in self.measures]}
        tmp = self.json_out.with_suffix(self.json_out.suffix + ".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(self.json_out)


def load_measures(path: Path) -> list[Measure]:
    """The measures a script wrote with ``--json-out``."""
    data = json.loads(path.read_text())
    return [Measure.from_json(m) for m in data["measures"]]

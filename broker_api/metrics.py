"""Prometheus text exposition without a client library.

Counters and histograms are updated on the hot paths (cheap: one lock, a
dict update); gauges (queue depth, consumer lag, store and mirror stats) are
computed when ``/metrics`` is scraped.
"""

from __future__ import annotations

import bisect
import threading
from typing import Iterable

__all__ = ["Counter", "Histogram", "Metrics", "render_gauge"]

Labels = tuple[tuple[str, str], ...]
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


def _fmt_labels(labels: Labels) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
    return "{" + inner + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class Counter:
    """A monotonically increasing value per label set."""

    def __init__(self, name: str, help_text: str) -> None:
        self.name, self.help = name, help_text
        self._values: dict[Labels, float] = {}
        self._lock = threading.Lock()

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) + amount

    def render(self) -> Iterable[str]:
        yield f"# HELP {self.name} {self.help}"
        yield f"# TYPE {self.name} counter"
        with self._lock:
            items = list(self._values.items())
        for labels, value in items:
            yield f"{self.name}{_fmt_labels(labels)} {value:g}"


class Histogram:
    """Observations in fixed buckets (seconds), per label set."""

    def __init__(self, name: str, help_text: str, buckets: tuple[float, ...] = _LATENCY_BUCKETS) -> None:
        self.name, self.help, self.buckets = name, help_text, buckets
        self._data: dict[Labels, list[float]] = {}  # bucket counts..., sum, count
        self._lock = threading.Lock()

    def observe(self, value: float, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        i = bisect.bisect_left(self.buckets, value)
        with self._lock:
            row = self._data.get(key)
            if row is None:
                row = self._data[key] = [0.0] * (len(self.buckets) + 2)
            if i < len(self.buckets):
                row[i] += 1
            row[-2] += value
            row[-1] += 1

    def render(self) -> Iterable[str]:
        yield f"# HELP {self.name} {self.help}"
        yield f"# TYPE {self.name} histogram"
        with self._lock:
            items = [(k, list(v)) for k, v in self._data.items()]
        for labels, row in items:
            cumulative = 0.0
            for bound, count in zip(self.buckets, row):
                cumulative += count
                le = labels + (("le", f"{bound:g}"),)
                yield f"{self.name}_bucket{_fmt_labels(le)} {cumulative:g}"
            yield f"{self.name}_bucket{_fmt_labels(labels + (('le', '+Inf'),))} {row[-1]:g}"
            yield f"{self.name}_sum{_fmt_labels(labels)} {row[-2]:g}"
            yield f"{self.name}_count{_fmt_labels(labels)} {row[-1]:g}"


def render_gauge(name: str, help_text: str, samples: Iterable[tuple[dict[str, str], float]]) -> list[str]:
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
    for labels, value in samples:
        lines.append(f"{name}{_fmt_labels(tuple(sorted(labels.items())))} {value:g}")
    return lines


class Metrics:
    """The broker's counters and histograms."""

    def __init__(self) -> None:
        self.produce_requests = Counter("sparkmq_produce_requests_total", "Produce requests answered, by outcome.")
        self.produce_messages = Counter("sparkmq_produce_messages_total", "Messages appended, by topic.")
        self.produce_bytes = Counter("sparkmq_produce_bytes_total", "Message body bytes appended, by topic.")
        self.produce_latency = Histogram("sparkmq_produce_latency_seconds", "Produce request latency.")
        self.pull_requests = Counter("sparkmq_pull_requests_total", "Pull requests answered, by status.")
        self.pull_messages = Counter("sparkmq_pull_messages_total", "Messages served by pulls, by topic.")
        self.pull_latency = Histogram("sparkmq_pull_latency_seconds", "Pull latency (long-poll waits included).")
        self.requests_rejected = Counter(
            "sparkmq_requests_rejected_total",
            "Requests answered 503 or 429, by route class (produce, pull, transaction, admin, control) and reason.")

    def families(self) -> list[Counter | Histogram]:
        return [
            self.produce_requests, self.produce_messages, self.produce_bytes, self.produce_latency,
            self.pull_requests, self.pull_messages, self.pull_latency, self.requests_rejected,
        ]

    def render(self) -> list[str]:
        lines: list[str] = []
        for family in self.families():
            lines.extend(family.render())
        return lines

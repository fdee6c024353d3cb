"""Protection: admission per request class, fast failure, memory bounds.

Names load on first use, so a client or the CLI that needs one module does not load the room."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_getattr

if TYPE_CHECKING:
    from .admission import Admission, CLASSES, Lane, OverloadedError, TICKET_KEY, Ticket
    from .fastfail import WriteGate
    from .memory import anon_memory_bytes, memory_bound_bytes, trim, tune_allocator

__getattr__ = lazy_getattr(__name__, {
    "Admission": "admission",
    "CLASSES": "admission",
    "Lane": "admission",
    "OverloadedError": "admission",
    "TICKET_KEY": "admission",
    "Ticket": "admission",
    "WriteGate": "fastfail",
    "anon_memory_bytes": "memory",
    "memory_bound_bytes": "memory",
    "trim": "memory",
    "tune_allocator": "memory",
})

__all__ = [
    "Admission",
    "CLASSES",
    "Lane",
    "OverloadedError",
    "TICKET_KEY",
    "Ticket",
    "WriteGate",
    "anon_memory_bytes",
    "memory_bound_bytes",
    "trim",
    "tune_allocator",
]

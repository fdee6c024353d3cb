"""Timer messages (RocketMQ 5's timer wheel + timer log, RIP-43): :class:`TimerStore`."""

from __future__ import annotations

from .timer_log import UNIT_DTYPE, UNIT_SIZE, TimerLog
from .timer_store import Due, TimerStore

__all__ = ["Due", "TimerLog", "TimerStore", "UNIT_DTYPE", "UNIT_SIZE"]

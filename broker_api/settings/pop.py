"""The ``[pop]`` settings section (POP, retry topics, DLQ), kept out of ``settings.py`` to keep it small.

The retry back-off uses the delay levels (``[delay] levels``): retry n waits level 2 + n.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["PopSection"]


class PopSection(BaseModel):
    """POP consumption, retry topics and dead-letter queues (RocketMQ 5 POP, consumerSendMsgBack)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_reconsume_times: int = Field(default=16, ge=0, description=(
        "Deliveries after the first before a message goes to `%DLQ%{group}` (RocketMQ maxReconsumeTimes); "
        "per group with PUT /v1/groups/{group} {\"max_reconsume_times\": N}."))
    revive_interval_ms: int = Field(default=200, ge=10, le=10_000, description=(
        "How often (ms) popped messages past their invisible time are looked for (RocketMQ reviveInterval)."))
    max_invisible_ms: int = Field(default=12 * 3_600_000, ge=1000, description=(
        "Longest invisible time a pop or POST /invisible may ask for (ms; RocketMQ's proxy: 12 h)."))


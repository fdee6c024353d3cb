"""The ``[pop]`` settings section (POP, retry topics, DLQ), kept out of ``settings.py`` to keep it small."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["PopSection", "parse_delays"]

_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_delays(spec: str) -> list[int]:
    """``"1s 5s 10s"`` -> [1000, 5000, 10000] (units ms, s, m, h, d)."""
    out = []
    for word in spec.split():
        number = word.rstrip("smhd")
        unit = word[len(number):]
        if not number.isdigit() or unit not in _UNITS_MS:
            raise ValueError(f"delay {word!r} is not a number with a unit ms, s, m, h or d")
        out.append(int(number) * _UNITS_MS[unit])
    if not out:
        raise ValueError('at least one delay is needed, e.g. "1s 5s 10s"')
    return out


class PopSection(BaseModel):
    """POP consumption, retry topics and dead-letter queues (RocketMQ 5 POP, consumerSendMsgBack)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_reconsume_times: int = Field(default=16, ge=0, description=(
        "Deliveries after the first before a message goes to `%DLQ%{group}` (RocketMQ maxReconsumeTimes); "
        "per group with PUT /v1/groups/{group} {\"max_reconsume_times\": N}."))
    retry_levels: str = Field(default="1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h", description=(
        "Back-off before a retry, by delay level (units ms, s, m, h, d): retry n waits level 2 + n "
        "(10 s, 30 s, 1 m, ...; RocketMQ's level 3 + reconsume times), higher levels wait the last one."))
    revive_interval_ms: int = Field(default=200, ge=10, le=10_000, description=(
        "How often (ms) popped messages past their invisible time are looked for (RocketMQ reviveInterval)."))
    max_invisible_ms: int = Field(default=12 * 3_600_000, ge=1000, description=(
        "Longest invisible time a pop or POST /invisible may ask for (ms; RocketMQ's proxy: 12 h)."))

    @field_validator("retry_levels")
    @classmethod
    def _check_levels(cls, value: str) -> str:
        parse_delays(value)  # a ValueError names the bad level
        return value

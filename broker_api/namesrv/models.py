"""Request bodies of the NameServer API (pydantic models, unknown fields refused)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..http.schemas import JsonInt
from ..errors import NamesrvAddressError
from ..settings.addresses import ADDRESS_PATTERN, normalize_url

__all__ = [
    "DataVersionBody",
    "TopicQueuesBody",
    "BrokerRef",
    "RegisterBody",
    "QueryDataVersionBody",
    "UnregisterBody",
]

_Name = Field(min_length=1, max_length=127, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DataVersionBody(_Body):
    """A broker's topic-config version: wall-clock ms of the last change + a counter."""

    timestamp: JsonInt = Field(ge=0)
    counter: JsonInt = Field(ge=0)


class TopicQueuesBody(_Body):
    """One topic as a broker serves it (RocketMQ's QueueData)."""

    read_queues: JsonInt = Field(ge=0, le=65535)
    write_queues: JsonInt = Field(ge=0, le=65535)
    perm: Literal["rw", "r", "w", ""] = "rw"


class BrokerRef(_Body):
    """Who is speaking: cluster, broker name, broker id (0 = master) and address."""

    cluster: str = _Name
    broker_name: str = _Name
    broker_id: JsonInt = Field(ge=0, le=1_000_000)
    address: str = Field(description="The broker's HTTP base URL, e.g. http://127.0.0.1:8080",
                         json_schema_extra={"pattern": ADDRESS_PATTERN})

    @field_validator("address")
    @classmethod
    def _url(cls, value: str) -> str:
        if "://" not in value:
            raise ValueError("address must be an http(s) URL such as http://127.0.0.1:8080")
        try:
            return normalize_url(value)
        except NamesrvAddressError as exc:
            raise ValueError(str(exc)) from exc


class RegisterBody(BrokerRef):
    """A full registration: identity, HA address, topics, data version and body CRC."""

    ha_address: str | None = None
    data_version: DataVersionBody
    topics: dict[str, TopicQueuesBody] = Field(default_factory=dict)
    crc32: JsonInt = Field(ge=0, le=0xFFFFFFFF)


class QueryDataVersionBody(BrokerRef):
    """needRegister: has this broker's data version changed since its last registration?"""

    data_version: DataVersionBody


class UnregisterBody(BrokerRef):
    """A clean shutdown: forget this broker address now."""

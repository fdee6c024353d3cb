"""The benchmark areas ``sparkmq bench --only`` takes, without the suite: the CLI declares its option from them."""

from __future__ import annotations

__all__ = ["ALL_AREAS", "AREAS", "OPT_IN_AREAS"]

AREAS = ("store", "broker", "spark", "mirror")  # the default run: Python, Spark and redis-server only
OPT_IN_AREAS = ("kafka", "failover", "tiered")  # only when named in --only: Java and Maven; 20 SIGKILLs (~10 min);
# 1 GB written, uploaded to moto's S3 and read back twice through Spark (minutes)
ALL_AREAS = AREAS + OPT_IN_AREAS

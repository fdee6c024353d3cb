"""``[runtime]``: the broker process's collector settings, applied once the broker listens."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from broker_api.settings.broker import BrokerSettings

REPO = Path(__file__).resolve().parents[2]
REPO_CHECK = (
    "import gc, sys\n"
    "from broker_api.server import tune_runtime\n"
    "from broker_api.settings import BrokerSettings\n"
    "tune_runtime(BrokerSettings())\n"
    "print(gc.get_freeze_count(), gc.get_threshold()[0], sys.getswitchinterval())\n"
)


def _run(env: dict[str, str]) -> list[str]:
    out = subprocess.run([sys.executable, "-c", REPO_CHECK], capture_output=True, text=True, check=True,
                         env={"PATH": "/usr/bin:/bin", **env}, cwd=str(REPO))
    return out.stdout.split()


def test_start_up_heap_is_frozen_and_young_collections_are_rarer_by_default() -> None:
    frozen, threshold, switch = _run({})
    assert int(frozen) > 10_000  # modules, settings, pydantic models: out of every full collection
    assert int(threshold) == 7000 and float(switch) == pytest.approx(0.001)


def test_settings_turn_it_off_and_refuse_a_tiny_threshold() -> None:
    frozen, threshold, _ = _run({"SPARKMQ_RUNTIME__GC_FREEZE": "false", "SPARKMQ_RUNTIME__GC_THRESHOLD": "700"})
    assert int(frozen) == 0 and int(threshold) == 700
    with pytest.raises(ValidationError, match="gc_threshold"):
        BrokerSettings(runtime={"gc_threshold": 10})

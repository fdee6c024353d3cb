"""Settings: precedence, the documented TOML file, and the section contracts."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from broker_api.settings.broker import BrokerSettings, load_settings
from connectors import MirrorConfig
from store import StoreConfig

REPO = Path(__file__).resolve().parents[2]


def _settings_in_subprocess(tmp_path: Path, env: dict[str, str], code: str) -> dict:
    script = "import json; from broker_api.settings import load_settings; " + code
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env={"PATH": "/usr/bin:/bin", **env},
                         capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


def test_precedence_flags_over_env_over_toml_over_defaults(tmp_path: Path) -> None:
    toml = tmp_path / "b.toml"
    toml.write_text('[broker]\nport = 9001\nname = "from-toml"\ncluster = "toml-cluster"\n'
                    '[store]\nflush_interval_ms = 7\n')
    env = {"SPARKMQ_BROKER__NAME": "from-env", "SPARKMQ_BROKER__CLUSTER": "env-cluster",
           "PYTHONPATH": str(REPO)}
    code = (f"s = load_settings({str(toml)!r}, broker={{'cluster': 'flag-cluster'}}); "
            "print(json.dumps([s.broker.port, s.broker.name, s.broker.cluster, s.store.flush_interval_ms, "
            "s.broker.default_queues]))")
    port, name, cluster, interval, queues = _settings_in_subprocess(tmp_path, env, code)
    assert (port, name, cluster, interval, queues) == (9001, "from-env", "flag-cluster", 7, 4)


def test_conf_broker_toml_documents_every_setting_with_its_default() -> None:
    text = (REPO / "conf" / "broker.toml").read_text()
    doc = tomllib.loads(text)
    defaults = BrokerSettings().model_dump()
    assert set(doc) == set(defaults)
    for section, values in defaults.items():
        assert doc[section] == values, section
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if "=" in line and not line.startswith("#") and not line.startswith("["):
            before = [x for x in lines[max(0, i - 2):i] if x.strip()]
            assert before and (before[-1].startswith("#") or "=" in before[-1]), line


def test_store_and_mirror_sections_match_the_dataclasses() -> None:
    s = BrokerSettings()
    store_fields = {f.name for f in dataclasses.fields(StoreConfig)}
    assert set(s.store.model_dump()) == store_fields
    mirror_defaults = {f.name: f.default for f in dataclasses.fields(MirrorConfig)}
    assert s.mirror.model_dump() == mirror_defaults


def test_missing_explicit_config_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="missing.toml"):
        load_settings(tmp_path / "missing.toml")


def test_empty_paths_are_filled_from_the_data_dir(tmp_path: Path) -> None:
    s = BrokerSettings(broker={"data_dir": str(tmp_path)})
    assert Path(s.store_config().root_dir) == tmp_path / "store"
    mirror = MirrorConfig(**s.mirror_values())
    assert mirror.table_uri == str(tmp_path / "delta" / "messages") and mirror.app_id == "broker-a"

"""Settings precedence, address parsing, data versions, the body CRC and the CLI's errors."""

from __future__ import annotations

import subprocess
import sys
import zlib
from pathlib import Path

import orjson
import pytest

from broker_api.namesrv import (
    DataVersion,
    NamesrvAddressError,
    NamesrvSettings,
    body_crc32,
    load_namesrv_settings,
    parse_namesrv_addrs,
)

from .support import REPO_ROOT


def test_shipped_toml_matches_the_defaults() -> None:
    from_file = load_namesrv_settings(REPO_ROOT / "conf" / "namesrv.toml")
    assert from_file.model_dump() == NamesrvSettings().model_dump()
    assert (from_file.host, from_file.port) == ("127.0.0.1", 9876)
    assert (from_file.scan_interval_s, from_file.broker_timeout_s) == (5.0, 120.0)


def test_flags_beat_the_file(tmp_path: Path) -> None:
    conf = tmp_path / "ns.toml"
    conf.write_text('port = 9999\nbroker_timeout_s = 30.0\nhost = "127.0.0.1"\n')
    settings = load_namesrv_settings(conf, port=7000, host=None)
    assert (settings.port, settings.broker_timeout_s, settings.host) == (7000, 30.0, "127.0.0.1")
    with pytest.raises(FileNotFoundError):
        load_namesrv_settings(tmp_path / "nope.toml")


def test_addresses_parse_rocketmq_style() -> None:
    assert parse_namesrv_addrs("127.0.0.1:9876;http://127.0.0.1:9877/; 127.0.0.1:9876") == [
        "http://127.0.0.1:9876", "http://127.0.0.1:9877"]
    assert parse_namesrv_addrs(["a:1", "b:2;c:3"]) == ["http://a:1", "http://b:2", "http://c:3"]
    for bad in ("", ";", "127.0.0.1", "ftp://x:1", "x:port"):
        with pytest.raises(NamesrvAddressError):
            parse_namesrv_addrs(bad)


def test_data_version_bumps_and_compares() -> None:
    v = DataVersion(timestamp=1000, counter=3)
    same = DataVersion.from_dict(v.to_dict())
    assert v == same
    v.next_version()
    assert v != same and v.counter == 4 and v.timestamp >= 1000


def test_crc_is_over_the_canonical_json_without_the_crc() -> None:
    body = {"b": 1, "a": {"z": [1, 2], "y": "é"}}
    expected = zlib.crc32(orjson.dumps(body, option=orjson.OPT_SORT_KEYS))
    assert body_crc32(body) == expected
    assert body_crc32({**body, "crc32": 123}) == expected


def test_cli_reports_a_missing_config_file(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "broker_api", "namesrv", "--config", str(tmp_path / "missing.toml")],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2
    assert "missing.toml" in proc.stderr and "does not exist" in proc.stderr

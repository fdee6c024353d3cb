"""The configuration reference (docs/reference/configuration.md, conf/*.toml) is generated from the settings models
and current."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from broker_api.settings.doc import (
    BEGIN,
    END,
    REGENERATE,
    render_markdown,
    render_toml,
    replace_block,
)
from broker_api.settings.reference import ConfigDocError
from broker_api.settings.namesrv import NamesrvSettings
from broker_api.settings.broker import BrokerSettings
from connectors import MirrorConfig
from store import StoreConfig

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "reference" / "configuration.md"


def _page_block() -> str:
    text = PAGE.read_text(encoding="utf-8")
    assert BEGIN in text and END in text, f"{PAGE} lost its {BEGIN} / {END} markers"
    return text.split(BEGIN, 1)[1].split(END, 1)[0]


def _subsections(block: str) -> dict[str, str]:
    """Heading text -> the lines under it, for the ``### ...`` headings of the block."""
    parts = re.split(r"^### (.+)$", block, flags=re.MULTILINE)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def test_the_reference_page_is_current() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert replace_block(text, render_markdown()) == text, (
        f"docs/reference/configuration.md is stale; regenerate it with `{REGENERATE}`")


def test_the_readme_no_longer_holds_the_reference() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert BEGIN not in readme and "docs/reference/configuration.md" in readme


@pytest.mark.parametrize("server", ["broker", "namesrv"])
def test_conf_toml_files_are_current(server: str) -> None:
    path = REPO / "conf" / f"{server}.toml"
    assert path.read_text(encoding="utf-8") == render_toml(server), (
        f"conf/{server}.toml is stale; regenerate it with `{REGENERATE}`")


def test_every_field_of_every_section_appears_with_its_env_var() -> None:
    sections = _subsections(_page_block())
    expected: dict[str, list[str]] = {
        f"Broker `[{name}]`": list(field.annotation.model_fields)  # type: ignore[union-attr]
        for name, field in BrokerSettings.model_fields.items()
    }
    assert set(BrokerSettings.model_fields) == {"broker", "limits", "fast_failure", "server", "groups",
                                                "protection", "transactions", "pop", "delay", "store", "mirror", "ha", "kafka",
                                                "tls", "auth", "tables", "runtime", "tiered"}
    # the sections generated from the dataclasses carry every dataclass field
    assert expected["Broker `[store]`"] == [f.name for f in dataclasses.fields(StoreConfig)]
    assert expected["Broker `[mirror]`"] == [f.name for f in dataclasses.fields(MirrorConfig)]
    for heading, keys in expected.items():
        section = heading.split("[")[1].rstrip("]`").upper()
        assert heading in sections, f"reference page has no {heading} section; regenerate with `{REGENERATE}`"
        for key in keys:
            assert f"| `{key}` |" in sections[heading], f"{heading} {key} missing from the reference page"
            assert f"`SPARKMQ_{section}__{key.upper()}`" in sections[heading]
    namesrv = next(body for heading, body in sections.items() if heading.startswith("NameServer"))
    for key in NamesrvSettings.model_fields:
        assert f"| `{key}` |" in namesrv and f"`SPARKMQ_NAMESRV_{key.upper()}`" in namesrv


def test_every_row_has_a_type_a_default_and_a_description() -> None:
    rows = [line for line in _page_block().splitlines() if line.startswith("| `")]
    assert len(rows) == sum(len(f.annotation.model_fields)  # type: ignore[union-attr]
                            for f in BrokerSettings.model_fields.values()) + len(NamesrvSettings.model_fields)
    for row in rows:
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]]
        assert len(cells) == 5 and all(cells), row
    flush = next(r for r in rows if r.startswith("| `flush_mode` |"))
    assert '"sync" \\| "async"' in flush and '`"async"`' in flush


def test_defaults_in_the_shipped_toml_are_the_model_defaults() -> None:
    doc = tomllib.loads((REPO / "conf" / "broker.toml").read_text(encoding="utf-8"))
    assert doc == BrokerSettings().model_dump()
    ns = tomllib.loads((REPO / "conf" / "namesrv.toml").read_text(encoding="utf-8"))
    assert ns == NamesrvSettings().model_dump()


def test_the_block_is_found_wherever_it_is_and_nothing_else_changes() -> None:
    text = f"# Title\n\nintro\n\n{BEGIN}\nold stuff\n{END}\n\n## After\n\nmore\n"
    out = replace_block(text, "NEW\n")
    assert out == f"# Title\n\nintro\n\n{BEGIN}\nNEW\n{END}\n\n## After\n\nmore\n"
    with pytest.raises(ConfigDocError, match="exactly one"):
        replace_block("no markers here", "NEW\n")
    with pytest.raises(ConfigDocError, match="comes before"):
        replace_block(f"{END}\n{BEGIN}\n", "NEW\n")


def test_command_writes_checks_and_names_itself_when_stale(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{BEGIN}\nstale\n{END}\ntail\n", encoding="utf-8")
    cmd = [sys.executable, "-m", "broker_api.settings.doc", "--write", str(readme)]
    stale = subprocess.run([*cmd, "--check"], check=False, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert stale.returncode == 1 and REGENERATE in stale.stderr
    assert "stale" in readme.read_text()  # --check writes nothing
    wrote = subprocess.run([*cmd, "--toml-dir", str(tmp_path)], check=False, cwd=REPO, capture_output=True,
                           text=True, timeout=120)
    assert wrote.returncode == 0, wrote.stderr
    assert readme.read_text().endswith(f"{END}\ntail\n") and "| `flush_mode` |" in readme.read_text()
    assert (tmp_path / "broker.toml").read_text() == (REPO / "conf" / "broker.toml").read_text()
    fresh = subprocess.run([*cmd, "--check"], check=False, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert fresh.returncode == 0, fresh.stderr

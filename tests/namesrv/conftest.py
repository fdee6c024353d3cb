"""NameServer fixtures: real ``python -m broker_api namesrv`` processes on free ports."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from .support import NamesrvProcess, free_port


@pytest.fixture(scope="module")
def namesrv_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., NamesrvProcess]]:
    """``start(env=None, port=None)``; every NameServer is stopped (SIGTERM, exit 0) at teardown."""
    started: list[NamesrvProcess] = []

    def start(env: dict[str, str] | None = None, port: int | None = None) -> NamesrvProcess:
        log = tmp_path_factory.mktemp("namesrv") / "namesrv.log"
        proc = NamesrvProcess(port or free_port(), log, env)
        started.append(proc)
        return proc.start()

    yield start
    codes = [p.stop() for p in started]
    assert all(code == 0 for code in codes), f"a NameServer did not exit cleanly: {codes}"


@pytest.fixture(scope="module")
def namesrv(namesrv_factory: Callable[..., NamesrvProcess]) -> NamesrvProcess:
    """A NameServer with default expiry (nothing expires during a test)."""
    return namesrv_factory()

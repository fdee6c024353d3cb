"""Change bytes of a stored record in a broker's segment files, as a bad sector or a stray write would."""

from __future__ import annotations

from pathlib import Path

__all__ = ["garble_body"]

_HEADER = 88  # CommitLog record header (store.codec)


def garble_body(data_dir: Path, msg_id: str, segment_bytes: int = 1 << 20) -> int:
    """Flip a body byte of the record ``msg_id`` names (a broker's data dir); returns its CommitLog offset."""
    phy = int(msg_id[16:], 16)
    start = phy - phy % segment_bytes
    with open(Path(data_dir) / "store" / "commitlog" / f"{start:020d}", "r+b") as f:
        f.seek(phy - start + _HEADER + 1)
        old = f.read(1)
        f.seek(phy - start + _HEADER + 1)
        f.write(bytes([old[0] ^ 0x55]))
    return phy

"""CRC-32 for the store's hot paths: the function every record's BODY_CRC is checked with.

:func:`crc32` is :func:`zlib.crc32` (the same polynomial and values, the same ``(data, start)``
signature), taken from ISA-L through python-isal when it is installed, else from zlib.  On
this box ISA-L's is about 3x faster both per call on a 100-byte body (41 vs 137 ns, most of
a column put's per-message cost) and per GiB (0.05 vs 0.16 s, recovery's floor).  Nothing on
disk depends on which one runs.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["crc32", "FAST"]

try:
    from isal.isal_zlib import crc32 as _crc32

    FAST = True
except ImportError:  # pragma: no cover - isal is a dependency; zlib gives the same values
    from zlib import crc32 as _crc32

    FAST = False

crc32: Callable[..., int] = _crc32

"""What the benchmarks ran on: cores, memory, OS, Python, load, and the git commit."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from typing import Any

__all__ = ["REPO", "git_commit", "machine_info", "machine_short"]

REPO = Path(__file__).resolve().parent.parent


def _ram_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / (1 << 20)
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / (1 << 30)


def _os_name() -> str:
    """``Debian 12``, ``Ubuntu 24.04``, ``macOS 14.5``, else ``<system> <release>``."""
    try:
        fields = dict(line.split("=", 1) for line in Path("/etc/os-release").read_text().splitlines() if "=" in line)
        name = fields.get("NAME", "").strip('"').split()[0]
        version = fields.get("VERSION_ID", "").strip('"')
        if name:
            return f"{name} {version}".strip()
    except OSError:
        pass
    if platform.system() == "Darwin":
        return f"macOS {platform.mac_ver()[0]}"
    return f"{platform.system()} {platform.release()}"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def machine_info() -> dict[str, Any]:
    """Machine details for the JSON results."""
    return {
        "cores": os.cpu_count(),
        "ram_gib": round(_ram_gib(), 1),
        "os": _os_name(),
        "kernel": platform.release(),
        "cpu_model": _cpu_model(),
        "python": platform.python_version(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def machine_short(info: dict[str, Any]) -> str:
    """``2 cores, 23 GiB, Debian 12, Py 3.11``."""
    py = ".".join(str(info["python"]).split(".")[:2])
    return f"{info['cores']} cores, {info['ram_gib']:.0f} GiB, {info['os']}, Py {py}"


def git_commit(repo: Path = REPO) -> dict[str, Any] | None:
    """``{"commit": sha, "dirty": bool}`` of the checkout the benchmarks ran from; None outside git."""
    try:
        sha = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10, check=True).stdout.strip()
        status = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": sha, "dirty": bool(status.strip())}

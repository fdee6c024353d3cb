"""A stand-in benchmark script for the suite's tests: it fails unless its scratch directory exists."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmarks.results import Measure, Recorder


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True)
    parser.add_argument("--json-out")
    args = parser.parse_args()
    if not Path(args.dir).is_dir():
        sys.exit(f"scratch directory {args.dir} does not exist")
    rec = Recorder("probe", args.json_out, vars(args))
    rec.add(Measure("probe.scratch", "scratch directory given and present", 1, "dirs"))
    rec.write()


if __name__ == "__main__":
    main()

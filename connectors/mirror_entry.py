"""``python -m connectors.mirror_entry SPEC_JSON``: runs the Delta mirror's child process (:mod:`.mirror_child`).

A module of its own so that the package's ``__init__`` never imports it (``runpy`` would warn).
"""

from __future__ import annotations

import sys

from connectors.mirror_child import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

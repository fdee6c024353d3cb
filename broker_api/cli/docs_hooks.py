"""MkDocs hooks of the documentation site (``mkdocs.yml``: ``hooks:``).

Some guides are written alongside the others and may not exist yet in a clone:
each of :data:`OPTIONAL_GUIDES` joins the site's navigation, and a link to it
replaces the ``<!-- extra-guides -->`` line of the home page, only when its
file exists, so ``mkdocs build --strict`` passes with or without them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["OPTIONAL_GUIDES", "on_config", "on_page_markdown"]

# file under docs/ -> its title in the navigation and on the home page
OPTIONAL_GUIDES = {
    "guides/security-permissions.md": "Security: permissions",
    "guides/cluster-security.md": "Cluster security",
    "guides/client-failures.md": "When a client call fails",
    "guides/failover.md": "Failover",
    "guides/kafka-protocol.md": "The Kafka protocol listener",
}
_MARKER = "<!-- extra-guides -->"


def _present(docs_dir: str) -> dict[str, str]:
    return {path: title for path, title in OPTIONAL_GUIDES.items() if (Path(docs_dir) / path).is_file()}


def on_config(config: Any) -> Any:
    """Add the optional guides that exist to the "Guides" section of the navigation."""
    present = _present(config["docs_dir"])
    for section in config["nav"] or []:
        if isinstance(section, dict) and "Guides" in section:
            listed = {next(iter(item.values())) for item in section["Guides"] if isinstance(item, dict)}
            section["Guides"] += [{title: path} for path, title in present.items() if path not in listed]
    return config


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """On the home page, list the optional guides that exist where the marker stands."""
    if _MARKER not in markdown:
        return markdown
    present = _present(config["docs_dir"])
    links = "".join(f"- [{title}]({path})\n" for path, title in present.items())
    return markdown.replace(_MARKER, f"More guides:\n\n{links}" if links else "")

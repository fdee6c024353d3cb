"""Opening the object store a ``[tiered] uri`` names (obstore: S3, or a local directory for tests).

``s3://bucket/prefix`` takes credentials, region and endpoint from the usual AWS_* environment
variables (``AWS_ENDPOINT_URL`` and ``AWS_ALLOW_HTTP=true`` for an S3-compatible server on
plain HTTP); anything without a scheme is a local directory, created if missing.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from obstore.exceptions import BaseError
from obstore.store import LocalStore, from_url

__all__ = ["OBJECT_ERRORS", "ObjectStore", "open_store"]

OBJECT_ERRORS = (BaseError, OSError)  # what obstore raises (a missing object is a FileNotFoundError)
ObjectStore = Any  # an obstore store (S3Store, LocalStore, ...): obstore's functions take any of them

_RETRY = {"max_retries": 3, "backoff": {"init_backoff": timedelta(milliseconds=100),
                                        "max_backoff": timedelta(seconds=2), "base": 2},
          "retry_timeout": timedelta(seconds=30)}


def open_store(uri: str) -> ObjectStore:
    """The store ``uri`` names; a plain path is a LocalStore rooted there."""
    if "://" not in uri:
        path = Path(uri)
        path.mkdir(parents=True, exist_ok=True)
        return LocalStore(prefix=path)
    if uri.startswith("file://"):
        Path(uri.removeprefix("file://")).mkdir(parents=True, exist_ok=True)
    return from_url(uri, retry_config=_RETRY)  # type: ignore[arg-type]  # client options from AWS_* too

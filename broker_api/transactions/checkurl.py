"""Which check-back URLs a producer may give: ``[transactions] check_url_allow``.

The broker POSTs to a transaction's ``check_url`` (checkback.py), so an
unchecked URL would make it a request proxy into its own network.  The
setting is a list of entries separated by spaces or commas::

    loopback          127.0.0.0/8, ::1 and the name localhost (the default)
    10.1.0.0/16       an IP network (CIDR) or a single address
    app.example.com   a host name, exactly (case-insensitive)
    *.example.com     any host name ending in .example.com

A produce whose ``check_url`` names another host is answered 400 naming the
setting; the check-back thread checks again before every POST (the setting
may have changed since the transaction began).  Host names are compared as
written, not resolved: allow a name only when you trust what it resolves to.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache
from urllib.parse import urlsplit

import httpx

from ..errors import BadRequestError

__all__ = ["CheckUrlRefusedError", "check_url_allowed"]

_LOOPBACK = ("127.0.0.0/8", "::1/128", "localhost")
_Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class CheckUrlRefusedError(BadRequestError):
    """Raised when a transaction's check_url is malformed or names a host ``check_url_allow`` does not list."""


@lru_cache(maxsize=16)
def _parse(allow: str) -> tuple[tuple[_Network, ...], frozenset[str], tuple[str, ...]]:
    nets: list[_Network] = []
    names: set[str] = set()
    suffixes: list[str] = []
    for entry in allow.replace(",", " ").split():
        for item in (_LOOPBACK if entry.lower() == "loopback" else (entry,)):
            try:
                nets.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                if item.startswith("*."):
                    suffixes.append(item[1:].lower())
                else:
                    names.add(item.lower().rstrip("."))
    return tuple(nets), frozenset(names), tuple(suffixes)


def _host(url: str) -> str:
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        _ = parts.port  # a malformed port raises here
        httpx.URL(url)  # what the check-back client parses: bad punycode (xn--a), bad labels stop here
    except (ValueError, UnicodeError, httpx.InvalidURL) as exc:
        raise CheckUrlRefusedError(f"check_url {url!r} is not a valid URL: {exc}") from exc
    if parts.scheme not in ("http", "https") or not host:
        raise CheckUrlRefusedError(f"check_url {url!r} must be an http:// or https:// URL with a host")
    return host.lower().rstrip(".")


def check_url_allowed(url: str, allow: str) -> None:
    """Raise CheckUrlRefusedError unless ``url`` is an http(s) URL whose host ``allow`` lists."""
    host = _host(url)
    nets, names, suffixes = _parse(allow)
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        if host in names or any(host.endswith(s) for s in suffixes):
            return
    else:
        if any(address in net for net in nets):
            return
    raise CheckUrlRefusedError(f"check_url host {host!r} is not allowed by [transactions] check_url_allow "
                               f"({allow!r}); add it there (SPARKMQ_TRANSACTIONS__CHECK_URL_ALLOW) or use a "
                               f"loopback address")

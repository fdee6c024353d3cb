"""``message(id)``: the broker that stored a message, or its slaves when that master is gone.

A message id holds the address of the master that stored it.  Its slaves
hold the same bytes at the same physical offset, so the client asks::

    the master (if still listed), then its slaves by id      from GET /v1/cluster
    the master the NameServers dropped: its address, then    the slaves of the broker name it was
                                                             last seen under (routes, listings)
    an address never seen: it, then every slave of a         the master that has no master listed
    broker name that has no master now                       is the likeliest owner

With the NameServers down, the last listing seen is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import NamesrvUnavailableError
from .results import BrokerUnreachableError
from .routing import id_host, urls_by_host

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..cluster.namesrv_client import NamesrvClient
    from .routes import RouteCache

__all__ = ["LookupMixin"]


class LookupMixin:
    """Message lookups of :class:`~broker_api.client.SparkMQClient` (which supplies the transport)."""

    if TYPE_CHECKING:
        endpoint: str | None
        _namesrv: NamesrvClient | None
        _cache: RouteCache | None

        def _call(self, method: str, url: str, broker: str | None = None, **kwargs: Any) -> Any: ...
        def _read(self, broker: str, urls: list[str], call: Callable[[str], Any]) -> tuple[str, Any]: ...

    _listing: list[dict[str, Any]] | None = None

    def message(self, msg_id: str) -> dict[str, Any]:
        """The message with id ``msg_id``: from the broker that stored it, else from one of its slaves."""
        host = id_host(msg_id)
        if self._namesrv is None:
            urls = [str(self.endpoint)] if self.endpoint else [f"http://{host}"]
        else:
            urls = self._message_urls(host)
        _, answer = self._read(host, urls, lambda u: self._call("GET", f"{u}/v1/messages/{msg_id}"))
        return dict(answer)

    def _cluster_listing(self) -> list[dict[str, Any]]:
        """The NameServers' live brokers (remembered: the last listing serves while they are away)."""
        assert self._namesrv is not None and self._cache is not None
        try:
            brokers = list(self._namesrv.cluster()["brokers"])
        except NamesrvUnavailableError as exc:
            if self._listing is None:
                raise BrokerUnreachableError(f"no NameServer answered: {exc.message}") from exc
            return self._listing
        self._cache.learn_hosts(brokers)
        self._listing = brokers
        return brokers

    def _brokers_by_host(self) -> dict[str, list[str]]:
        """"ip:port" of every live broker the NameServers know -> its URLs (itself first, then its slaves)."""
        return urls_by_host(self._cluster_listing())

    def _message_urls(self, host: str) -> list[str]:
        assert self._cache is not None
        listing = self._cluster_listing()
        listed = urls_by_host(listing).get(host)
        if listed:
            return listed
        name = self._cache.broker_of(host)
        masterless = {b["broker_name"] for b in listing} - {b["broker_name"] for b in listing if b["broker_id"] == 0}
        owners = {name} if name is not None else masterless
        slaves = sorted((int(b["broker_id"]), str(b["address"])) for b in listing
                        if b["broker_name"] in owners and b["broker_id"] != 0)
        scheme = next((str(b["address"]).split("://", 1)[0] for b in listing), "http")
        return [f"{scheme}://{host}", *(url for _, url in slaves)]

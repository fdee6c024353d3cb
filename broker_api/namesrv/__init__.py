"""The NameServer (RocketMQ's namesrv): broker registration, liveness scan, topic routes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_getattr
from ..cluster.namesrv_client import NamesrvClient
from ..errors import (
    BadCrcError,
    BadRegistrationError,
    BrokerNotRegisteredError,
    NamesrvAddressError,
    NamesrvError,
    NamesrvRejectedError,
    NamesrvUnavailableError,
    TopicRouteNotFoundError,
)
from .route_table import LiveInfo, QueueData, RegisterResult, RouteTable
from .scan import ScanService
from ..settings.namesrv import (
    NamesrvSettings,
    default_namesrv_config_path,
    load_namesrv_settings,
)
from ..cluster.wire import DataVersion, body_crc32
from ..settings.addresses import normalize_url, parse_namesrv_addrs
from .errors import ERROR_TABLE

if TYPE_CHECKING:
    from .app import create_namesrv_app
    from .server import run_namesrv, serve_namesrv

# The app and server load FastAPI: imported on first use, so clients start fast.
__getattr__ = lazy_getattr(__name__, {"create_namesrv_app": "app", "run_namesrv": "server",
                                      "serve_namesrv": "server"})


__all__ = [
    "ERROR_TABLE",
    "BadCrcError",
    "BadRegistrationError",
    "BrokerNotRegisteredError",
    "DataVersion",
    "LiveInfo",
    "NamesrvAddressError",
    "NamesrvClient",
    "NamesrvError",
    "NamesrvRejectedError",
    "NamesrvSettings",
    "NamesrvUnavailableError",
    "QueueData",
    "RegisterResult",
    "RouteTable",
    "ScanService",
    "TopicRouteNotFoundError",
    "body_crc32",
    "create_namesrv_app",
    "default_namesrv_config_path",
    "load_namesrv_settings",
    "normalize_url",
    "parse_namesrv_addrs",
    "run_namesrv",
    "serve_namesrv",
]

"""Master/slave replication of the CommitLog: RocketMQ's classic HA.

Roles, as the broker wires them (settings in :class:`store.config.HAConfig`)::

    ASYNC_MASTER   HAService(store, cfg).start()            puts never wait
    SYNC_MASTER    HAService(store, cfg).start(); after a put ending at E:
                     if not ha.slave_available():  SLAVE_NOT_AVAILABLE
                     elif not ha.wait_for_slave(E): FLUSH_SLAVE_TIMEOUT
                     else:                          SEND_OK
    SLAVE          HAClient(store, cfg).start(); update_master_address("h:p")
                   when the NameServer names the master; refuse puts

Wire format (one TCP connection per slave, big-endian)::

    slave -> master, at connect, after every write, every heartbeat_interval_s:
    +---------------------------+
    | max phy offset  int64     |
    +---------------------------+

    master -> slave:
    0               8          12                      12+size
    +---------------+----------+-----------------------+
    | phy offset    | size     | raw CommitLog bytes   |
    | int64         | int32    | whole records         |
    +---------------+----------+-----------------------+
    size 0 = heartbeat (offset = where the master's next bytes start); the
    first frame of a connection is one, so the slave checks it at once.

Where sending starts: at the slave's reported offset; at the master's oldest
retained segment for an empty slave (reports 0) or one below it.  The master
closes a connection silent for ``housekeeping_interval_s``, and one whose
ack is above its own max offset.  It answers a slave it cannot serve (more
data than the master, or an offset where no master record starts) with one
heartbeat at its max offset and closes.

The slave writes every frame at the same physical offset
(``MessageStore.append_replicated``: CRC-checked whole records, BLANKs at the
same places, so ``commitlog_segment_bytes`` must be the master's) and its
reput builds identical ConsumeQueues, queue offsets and message ids.  A frame
that does not continue its log stops replication with ``HAClient.error`` set;
the slave never truncates.  Classic HA carries no history checksum: two logs
that differ but share record boundaries at the slave's end are not detected
(RocketMQ 5's controller mode adds epochs for that).
"""

from __future__ import annotations

from .client import HAClient, HAClientStatus
from .group_transfer import GroupTransferService
from .service import HAMasterStatus, HAService, SlaveStatus

__all__ = [
    "GroupTransferService",
    "HAClient",
    "HAClientStatus",
    "HAMasterStatus",
    "HAService",
    "SlaveStatus",
]

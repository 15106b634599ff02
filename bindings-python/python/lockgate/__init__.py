"""lockgate: distributed locks with fencing tokens, watchdog leases and honest loss signals.

Blocking API::

    import lockgate

    client = lockgate.Client("redis://127.0.0.1:6379")
    with client.lock("invoice:42").acquire(timeout=5) as lease:
        charge(invoice, fencing_token=lease.fencing_token)

One :class:`Client` for every backend, picked by the URL's scheme: ``redis://``, ``rediss://``,
``redis+cluster://``, ``redlock://host1:port,host2:port,host3:port`` (``client.capabilities``
says what it offers). Besides the mutex (``client.lock(name, reentrant=False)``): semaphores
(``client.semaphore(name, permits)``), read-write locks (``client.read_write_lock(name)``) and
leader elections (``client.election(name)``). Every grant is a :class:`Lease`.

asyncio API: :mod:`lockgate.aio` (``lockgate.aio.Client``). Durations are seconds (floats).
Errors derive from :class:`LockError` and carry ``.code`` and ``.retryable``.
"""

import atexit

from ._lockgate import (
    AlreadyHeldError,
    AuthenticationError,
    Client,
    ClientClosedError,
    Election,
    InvalidArgumentError,
    LeaderInfo,
    Lease,
    Lock,
    LockCancelledError,
    LockConnectionError,
    LockError,
    LockTimeoutError,
    NotHeldError,
    ProtocolError,
    ReadWriteLock,
    Semaphore,
    UnsupportedError,
    __version__,
    _close_all,
    _flush_telemetry,
)
from . import aio

# Log the telemetry still queued (atexit runs the last registered first: this runs after
# _close_all, whose releases raise events too).
atexit.register(_flush_telemetry)
# Release what is still held, and withdraw abandoned waits, before the process is gone:
# otherwise others wait for the lease to run out.
atexit.register(_close_all)

__all__ = [
    "AlreadyHeldError",
    "AuthenticationError",
    "Client",
    "ClientClosedError",
    "Election",
    "InvalidArgumentError",
    "LeaderInfo",
    "Lease",
    "Lock",
    "LockCancelledError",
    "LockConnectionError",
    "LockError",
    "LockTimeoutError",
    "NotHeldError",
    "ProtocolError",
    "ReadWriteLock",
    "Semaphore",
    "UnsupportedError",
    "__version__",
    "aio",
]

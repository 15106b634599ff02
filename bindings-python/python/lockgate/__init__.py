"""lockgate: distributed locks with fencing tokens, watchdog leases and honest loss signals.

Blocking API::

    import lockgate

    client = lockgate.Client("redis://127.0.0.1:6379")
    with client.lock("invoice:42").acquire(timeout=5) as lease:
        charge(invoice, fencing_token=lease.fencing_token)

Besides the mutex (``client.lock(name, reentrant=False)``): counting semaphores
(``client.semaphore(name, permits)``), read-write locks (``client.read_write_lock(name)``, with
``.read_lock`` and ``.write_lock``) and leader elections (``client.election(name)``, with
``campaign(value)`` and ``observe()``). Every grant is a :class:`Lease`.

Redlock over N independent masters (``lockgate.Redlock(urls)``, then ``.lock(name)``): a lock
that survives the loss of a minority of them; its grants are :class:`RedlockLease` objects,
which carry no fencing token (PROTOCOL.md §8).

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
    Redlock,
    RedlockLease,
    RedlockLock,
    Semaphore,
    __version__,
    _close_all,
)
from . import aio

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
    "Redlock",
    "RedlockLease",
    "RedlockLock",
    "Semaphore",
    "__version__",
    "aio",
]

"""lockgate for asyncio: the same locks as :mod:`lockgate`, with awaitable methods.

::

    import lockgate.aio

    async with lockgate.aio.Client("redis://127.0.0.1:6379") as client:
        async with client.lock("invoice:42").acquire(timeout=5) as lease:
            await charge(invoice, fencing_token=lease.fencing_token)
        async with client.semaphore("api-quota", 3).acquire() as permit:
            await call_api()
        async with client.election("scheduler").campaign("node-a") as leadership:
            await run_scheduler(term=leadership.fencing_token)

Cancelling a task that waits in ``acquire`` or ``campaign`` abandons the wait and removes it
from the server. Errors are those of :mod:`lockgate` (``lockgate.LockError`` and its
subclasses); ``Election.observe`` returns :class:`lockgate.LeaderInfo`.

Redlock over independent masters: ``async with lockgate.aio.Redlock(urls) as redlock:`` then
``async with redlock.lock("x").acquire(timeout=5) as lease:`` (no fencing token).
"""

from ._lockgate import AcquireContext
from ._lockgate import AsyncClient as Client
from ._lockgate import AsyncElection as Election
from ._lockgate import AsyncLease as Lease
from ._lockgate import AsyncLock as Lock
from ._lockgate import AsyncReadWriteLock as ReadWriteLock
from ._lockgate import AsyncRedlock as Redlock
from ._lockgate import AsyncRedlockLease as RedlockLease
from ._lockgate import AsyncRedlockLock as RedlockLock
from ._lockgate import AsyncSemaphore as Semaphore
from ._lockgate import LeaderInfo
from ._lockgate import RedlockAcquireContext

__all__ = [
    "AcquireContext",
    "Client",
    "Election",
    "LeaderInfo",
    "Lease",
    "Lock",
    "ReadWriteLock",
    "Redlock",
    "RedlockAcquireContext",
    "RedlockLease",
    "RedlockLock",
    "Semaphore",
]

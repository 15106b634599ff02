"""lockgate for asyncio: the same client, locks and leases as :mod:`lockgate`, awaitable.

::

    import lockgate.aio

    async with lockgate.aio.Client("redis://127.0.0.1:6379") as client:
        async with client.lock("invoice:42").acquire(timeout=5) as lease:
            await charge(invoice, fencing_token=lease.fencing_token)

Cancelling a task that waits in ``acquire`` or ``campaign`` abandons the wait and removes it
from the server. Errors are those of :mod:`lockgate`; ``Election.observe`` returns
:class:`lockgate.LeaderInfo`.
"""

from ._lockgate import AcquireContext
from ._lockgate import AsyncClient as Client
from ._lockgate import AsyncElection as Election
from ._lockgate import AsyncLease as Lease
from ._lockgate import AsyncLock as Lock
from ._lockgate import AsyncReadWriteLock as ReadWriteLock
from ._lockgate import AsyncSemaphore as Semaphore
from ._lockgate import LeaderInfo

__all__ = ["AcquireContext", "Client", "Election", "LeaderInfo", "Lease", "Lock", "ReadWriteLock", "Semaphore"]

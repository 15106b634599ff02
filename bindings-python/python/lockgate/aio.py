"""lockgate for asyncio: the same locks as :mod:`lockgate`, with awaitable methods.

::

    import lockgate.aio

    async with lockgate.aio.Client("redis://127.0.0.1:6379") as client:
        async with client.lock("invoice:42").acquire(timeout=5) as lease:
            await charge(invoice, fencing_token=lease.fencing_token)

Cancelling a task that waits in ``acquire`` abandons the wait and removes it from the server.
Errors are those of :mod:`lockgate` (``lockgate.LockError`` and its subclasses).
"""

from ._lockgate import AcquireContext
from ._lockgate import AsyncClient as Client
from ._lockgate import AsyncLease as Lease
from ._lockgate import AsyncLock as Lock

__all__ = ["AcquireContext", "Client", "Lease", "Lock"]

"""Handing a lease to another process from Python (issue 25, PROTOCOL.md §17):
``Lease.identity()`` and ``Client.adopt(identity, lease=None, *, renew=None)`` in both APIs
against a real redis-server, and the README's migration row for redis-py's
``Lock(token=...)``. The cross-language and per-backend cases are the conformance scenario
adopt_lease."""

from __future__ import annotations

import asyncio
import threading

import pytest

import lockgate
import lockgate.aio
from conftest import RedisServer


def test_an_adopted_lease_is_the_same_hold_and_the_exporter_sees_its_release(server: RedisServer) -> None:
    with lockgate.Client(server.url) as a, lockgate.Client(server.url) as b:
        held = a.lock("adopt", 0.9, renew=True).acquire(timeout=5)
        lost = threading.Event()
        held.on_lost(lambda _reason: lost.set())
        identity = held.identity()
        assert isinstance(identity, str) and "adopt" in identity
        adopted = b.adopt(identity, 0.9, renew=True)
        assert adopted.name == "adopt"
        assert adopted.fencing_token == held.fencing_token, "no second grant"
        assert b.lock("adopt").try_acquire() is None
        adopted.extend(5)
        assert adopted.release() is True
        assert lost.wait(3), "the exporter learns of the release at its next renewal"
        assert held.release() is False
        with pytest.raises(lockgate.NotHeldError):
            b.adopt(identity)
        for bad in ["", "lockgate-lease/1/mutex/1/not a token/x", "lockgate-lease/9/mutex/1/ab/x"]:
            with pytest.raises(lockgate.InvalidArgumentError):
                b.adopt(bad)
        with pytest.raises(lockgate.NotHeldError):
            held.identity()


def test_redis_py_lock_with_token_migration_row(server: RedisServer) -> None:
    # redis-py: Lock(r, "job", token=tok).extend(...) / .release() from another process.
    with lockgate.Client(server.url) as worker, lockgate.Client(server.url) as other:
        lease = worker.semaphore("job-slots", 2).acquire(timeout=5)
        token = lease.identity()  # hand this string to the other process
        same = other.adopt(token)
        assert same.fencing_token == lease.fencing_token
        same.extend(10)
        assert same.release() is True
        assert lease.release() is False


def test_asyncio_adopt(server: RedisServer) -> None:
    async def main() -> None:
        async with lockgate.aio.Client(server.url) as a, lockgate.aio.Client(server.url) as b:
            lease = await a.lock("aio-adopt").acquire()
            identity = await lease.identity()
            adopted = await b.adopt(identity)
            assert adopted.fencing_token == lease.fencing_token
            assert await adopted.release() is True
            with pytest.raises(lockgate.NotHeldError):
                await b.adopt(identity)

    asyncio.run(main())

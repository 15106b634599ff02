"""Every asyncio method returns a real coroutine: `asyncio.create_task`, `TaskGroup`,
`wait_for` and `gather` take it, as they take the coroutine of an `async def`."""

from __future__ import annotations

import asyncio
import sys
from typing import Any, Coroutine

import pytest

import lockgate
import lockgate.aio
from conftest import RedisServer, lock_key, queue_len


def test_every_method_returns_a_coroutine(server: RedisServer) -> None:
    async def main() -> None:
        client = lockgate.aio.Client(server.url)
        coros: list[Coroutine[Any, Any, Any]] = [client.connect()]
        await asyncio.create_task(coros[0])
        lock = client.lock("coro")
        acquire = lock.acquire(timeout=1)
        assert asyncio.iscoroutine(acquire)
        lease = await asyncio.create_task(acquire)
        for coro in (lease.extend(5), client.lock("coro").try_acquire(), lease.release()):
            assert asyncio.iscoroutine(coro), type(coro)
            await asyncio.wait_for(asyncio.create_task(coro), 5)
        lost = lease.lost()  # resolves with None now that the lease was released
        assert asyncio.iscoroutine(lost)
        assert await asyncio.create_task(lost) is None
        election = client.election("coro-e")
        campaign = election.campaign("me", timeout=1)
        assert asyncio.iscoroutine(campaign)
        leader = await asyncio.create_task(campaign)
        assert asyncio.iscoroutine(election.observe())
        assert (await asyncio.create_task(election.observe())) is not None
        assert await asyncio.create_task(leader.release()) is True
        close = client.close()
        assert asyncio.iscoroutine(close)
        await asyncio.create_task(close)

    asyncio.run(main())


def test_wait_for_and_gather(server: RedisServer) -> None:
    async def main() -> None:
        async with lockgate.aio.Client(server.url) as client:
            leases = await asyncio.gather(
                client.lock("g1").acquire(timeout=1),
                client.lock("g2").acquire(timeout=1),
                client.semaphore("g3", 2).try_acquire(),
            )
            assert all(lease is not None and lease.is_held for lease in leases)
            released = await asyncio.gather(*(lease.release() for lease in leases if lease))
            assert released == [True, True, True]
            lease = await asyncio.wait_for(client.lock("g1").acquire(timeout=1), 5)
            assert await asyncio.wait_for(lease.release(), 5) is True

    asyncio.run(main())


@pytest.mark.skipif(sys.version_info < (3, 11), reason="asyncio.TaskGroup is Python 3.11+")
def test_task_groups(server: RedisServer) -> None:
    raw = server.raw()

    async def main() -> None:
        async with lockgate.aio.Client(server.url) as a, lockgate.aio.Client(server.url) as b:
            async with asyncio.TaskGroup() as tg:  # type: ignore[attr-defined]
                first = tg.create_task(a.lock("tg1").acquire(timeout=1))
                second = tg.create_task(a.lock("tg2").acquire(timeout=1))
            for task in (first, second):
                assert task.result().is_held
            # A task group that fails cancels its queued acquire, which leaves the queue.
            with pytest.raises(BaseException):
                async with asyncio.TaskGroup() as tg:  # type: ignore[attr-defined]
                    tg.create_task(b.lock("tg1").acquire(timeout=30))
                    while queue_len(raw, "tg1") == 0:
                        await asyncio.sleep(0.01)
                    raise RuntimeError("give up")
            for _ in range(200):
                if queue_len(raw, "tg1") == 0:
                    break
                await asyncio.sleep(0.01)
            assert queue_len(raw, "tg1") == 0
            assert await first.result().release() is True
            assert await second.result().release() is True
            assert not raw.exists(lock_key("tg1"))

    asyncio.run(main())


def test_a_closed_acquire_never_starts(server: RedisServer) -> None:
    raw = server.raw()

    async def main() -> None:
        async with lockgate.aio.Client(server.url) as client:
            acquire = client.lock("closed-coro").acquire(timeout=1)
            acquire.close()
            await asyncio.sleep(0.1)
            assert not raw.exists(lock_key("closed-coro"))
            with pytest.raises(RuntimeError):
                await acquire
            thrown = client.lock("closed-coro").acquire(timeout=1)
            with pytest.raises(KeyError):
                thrown.throw(KeyError("x"))
            assert not raw.exists(lock_key("closed-coro"))

    asyncio.run(main())

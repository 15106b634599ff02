"""One lock handle shared by threads or asyncio tasks (issue 23, item 3): each caller waits its
turn, as with `threading.Lock`, kazoo's `Lock` (its `test_lock_many_threads`) or redis-py's
thread-local token; the same thread or task acquiring again through a non-reentrant handle
still fails at once with `AlreadyHeldError`, and the message says it was the same caller."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

import lockgate
import lockgate.aio
from conftest import RedisServer, queue_len

CALLERS = 20


class Occupancy:
    """Who is inside the protected section: records overlaps and the tokens in grant order."""

    def __init__(self) -> None:
        self.guard = threading.Lock()
        self.inside = 0
        self.overlaps = 0
        self.tokens: list[Any] = []

    def enter(self, token: Any) -> None:
        with self.guard:
            self.inside += 1
            self.overlaps += self.inside > 1
            self.tokens.append(token)

    def leave(self) -> None:
        with self.guard:
            self.inside -= 1

    def check(self) -> None:
        assert self.overlaps == 0, "two callers held the lock at once"
        assert len(self.tokens) == CALLERS, f"{len(self.tokens)} of {CALLERS} callers got their turn"
        assert all(a < b for a, b in zip(self.tokens, self.tokens[1:])), f"tokens must increase: {self.tokens}"


def test_many_threads_share_one_lock(server: RedisServer) -> None:
    client = lockgate.Client(server.url)
    lock = client.lock("many-threads")
    seen = Occupancy()
    errors: list[BaseException] = []

    def turn() -> None:
        try:
            lease = lock.acquire(timeout=60)
            seen.enter(lease.fencing_token)
            time.sleep(0.005)
            seen.leave()
            assert lock.release() is True, "release() gives back this thread's own lease"
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=turn) for _ in range(CALLERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=90)
    assert not errors, errors
    seen.check()
    assert not lock.owned()
    client.close()


def test_with_blocks_in_many_threads(server: RedisServer) -> None:
    client = lockgate.Client(server.url)
    lock = client.lock("many-with")
    seen = Occupancy()
    errors: list[BaseException] = []

    def turn() -> None:
        try:
            with lock as lease:
                seen.enter(lease.fencing_token)
                time.sleep(0.002)
                seen.leave()
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=turn) for _ in range(CALLERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=90)
    assert not errors, errors
    seen.check()
    client.close()


def test_the_same_thread_still_fails_at_once_while_others_wait(server: RedisServer) -> None:
    raw = server.raw()
    client = lockgate.Client(server.url)
    lock = client.lock("same-thread")
    lease = lock.acquire(timeout=5)
    started = time.monotonic()
    with pytest.raises(lockgate.AlreadyHeldError) as ei:
        lock.acquire(timeout=5)
    assert time.monotonic() - started < 1.0, "the same thread waited for itself"
    assert ei.value.code == "ALREADY_HELD"
    assert "this thread already holds" in str(ei.value) and "wait for itself" in str(ei.value)
    assert queue_len(raw, lock.name) == 0, "the refused acquire queued"

    # Another thread is not refused: it waits, and gets the lock once this thread releases.
    got: list[Any] = []
    other = threading.Thread(target=lambda: got.append(lock.acquire(timeout=10)))
    other.start()
    time.sleep(0.3)
    assert other.is_alive() and not got, "another thread must wait its turn"
    assert lease.release() is True
    other.join(timeout=10)
    assert got and got[0].fencing_token > lease.fencing_token
    assert got[0].release() is True
    client.close()


def test_many_asyncio_tasks_share_one_lock(server: RedisServer) -> None:
    seen = Occupancy()

    async def main() -> None:
        async with lockgate.aio.Client(server.url) as client:
            lock = client.lock("many-tasks")

            async def awaited() -> None:
                lease = await lock.acquire(timeout=60)
                seen.enter(lease.fencing_token)
                await asyncio.sleep(0.002)
                seen.leave()
                assert await lock.release() is True

            async def entered() -> None:
                async with lock as lease:
                    seen.enter(lease.fencing_token)
                    await asyncio.sleep(0.002)
                    seen.leave()

            half = CALLERS // 2
            # Half as coroutines of their own, half as the bare awaitables `gather` wraps in tasks.
            await asyncio.gather(*(awaited() for _ in range(half)), *(entered() for _ in range(CALLERS - half - 2)),
                                 *(_bare(lock, seen) for _ in range(2)))

    asyncio.run(main())
    seen.check()


async def _bare(lock: Any, seen: Occupancy) -> None:
    # `lock.acquire()` made here but awaited in a task of `gather`'s own: that task is the owner.
    lease = await asyncio.gather(lock.acquire(timeout=60))
    seen.enter(lease[0].fencing_token)
    await asyncio.sleep(0.002)
    seen.leave()
    assert await lease[0].release() is True


def test_the_same_task_still_fails_at_once(server: RedisServer) -> None:
    async def main() -> None:
        async with lockgate.aio.Client(server.url) as client:
            lock = client.lock("same-task")
            lease = await lock.acquire(timeout=5)
            started = time.monotonic()
            with pytest.raises(lockgate.AlreadyHeldError) as ei:
                await lock.acquire(timeout=5)
            assert time.monotonic() - started < 1.0
            assert "this task already holds" in str(ei.value) and "wait for itself" in str(ei.value)
            with pytest.raises(lockgate.AlreadyHeldError):
                await lock.try_acquire()
            # Another task waits its turn instead.
            other = asyncio.ensure_future(lock.acquire(timeout=10))
            await asyncio.sleep(0.3)
            assert not other.done(), "another task must wait its turn"
            assert await lease.release() is True
            second = await other
            assert (second.fencing_token or 0) > (lease.fencing_token or 0)
            assert await second.release() is True

    asyncio.run(main())

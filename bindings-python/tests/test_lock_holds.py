"""A lock handle keeps the lease it took (the redis-py habit), and never waits for itself.

`lock.acquire(timeout=5)` with its result ignored must leave the lock held until the caller
releases it through the handle (`lock.release()`), leaves a `with` block, closes the client or
drops the handle itself; a non-reentrant handle that holds the lock refuses a second acquire at
once with `AlreadyHeldError` instead of queueing behind itself.
"""

from __future__ import annotations

import asyncio
import gc
import time

import pytest

import lockgate
import lockgate.aio
from conftest import RedisServer, lock_key, queue_len, wait_until


def test_an_ignored_lease_keeps_the_lock_held(server: RedisServer) -> None:
    raw = server.raw()
    client = lockgate.Client(server.url)
    other = lockgate.Client(server.url).lock("habit")
    lock = client.lock("habit", 5.0)
    lock.acquire(timeout=5)  # the result ignored, as redis-py code does
    gc.collect()
    time.sleep(0.2)  # a background release would have landed by now
    assert raw.exists(lock_key("habit")), "the ignored lease was released"
    assert other.try_acquire() is None
    assert lock.owned() and lock.locked()
    lock.extend(20)  # acts on the lease the handle holds
    assert raw.pttl(lock_key("habit")) > 10_000
    assert lock.release() is True
    assert not lock.owned() and not lock.locked()
    assert not raw.exists(lock_key("habit"))
    with pytest.raises(lockgate.NotHeldError):
        lock.release()  # redis-py raises for an unlocked lock too
    with pytest.raises(lockgate.NotHeldError):
        lock.extend(5)
    lease = other.acquire(timeout=1)
    assert lease.release() is True


def test_release_through_the_lease_or_a_block_frees_the_handle(server: RedisServer) -> None:
    client = lockgate.Client(server.url)
    lock = client.lock("both-ways")
    lease = lock.acquire(timeout=1)
    assert lease.release() is True
    assert not lock.owned()
    with pytest.raises(lockgate.NotHeldError):
        lock.release()
    with lock:
        assert lock.owned()
    assert not lock.owned()
    with lock.acquire(timeout=1):
        assert lock.owned()
    assert not lock.owned()
    # Holds of a reentrant handle come back one by one, most recent first.
    rlock = client.lock("both-ways-r", reentrant=True)
    rlock.acquire(timeout=1)
    rlock.acquire(timeout=1)
    assert rlock.release() is True
    assert rlock.owned()
    assert rlock.release() is True
    assert not rlock.owned()


def test_a_collected_handle_releases_what_it_held(server: RedisServer) -> None:
    raw = server.raw()
    client = lockgate.Client(server.url)
    lock = client.lock("gone")
    lock.acquire(timeout=1)
    del lock
    gc.collect()
    wait_until(lambda: not raw.exists(lock_key("gone")), what="the collected handle's release")
    lease = lockgate.Client(server.url).lock("gone").acquire(timeout=5)
    assert lease.release() is True


def test_closing_the_client_releases_what_a_handle_held(server: RedisServer) -> None:
    raw = server.raw()
    client = lockgate.Client(server.url)
    lock = client.lock("closed-handle")
    lock.acquire(timeout=1)
    client.close()
    assert not raw.exists(lock_key("closed-handle"))
    assert not lock.owned()


def test_a_holding_handle_fails_fast_instead_of_waiting_for_itself(server: RedisServer) -> None:
    raw = server.raw()
    client = lockgate.Client(server.url)
    for make in (lambda: client.lock("self"), lambda: client.read_write_lock("self-rw").write_lock):
        lock = make()
        lease = lock.acquire(timeout=1)
        started = time.monotonic()
        with pytest.raises(lockgate.AlreadyHeldError) as ei:
            lock.acquire(timeout=5)
        assert time.monotonic() - started < 1.0, "the second acquire waited"
        assert ei.value.code == "ALREADY_HELD" and ei.value.retryable is False
        assert isinstance(ei.value, RuntimeError) and isinstance(ei.value, lockgate.LockError)
        with pytest.raises(lockgate.AlreadyHeldError):
            with lock:
                pass
        assert queue_len(raw, lock.name) == 0, "the refused acquire queued"
        assert lease.release() is True
        assert lock.acquire(timeout=1).release() is True


def test_asyncio_handles_keep_their_lease_and_fail_fast(server: RedisServer) -> None:
    raw = server.raw()

    async def main() -> None:
        async with lockgate.aio.Client(server.url) as a, lockgate.aio.Client(server.url) as b:
            lock = a.lock("ahabit", 5.0)
            await lock.acquire(timeout=5)  # the result ignored
            gc.collect()
            await asyncio.sleep(0.2)
            assert raw.exists(lock_key("ahabit")), "the ignored lease was released"
            assert await b.lock("ahabit").try_acquire() is None
            assert lock.owned() and lock.locked()
            started = time.monotonic()
            with pytest.raises(lockgate.AlreadyHeldError) as ei:
                await lock.acquire(timeout=5)
            assert time.monotonic() - started < 1.0
            assert ei.value.code == "ALREADY_HELD"
            await lock.extend(20)
            assert raw.pttl(lock_key("ahabit")) > 10_000
            assert await lock.release() is True
            assert not lock.owned()
            assert not raw.exists(lock_key("ahabit"))
            with pytest.raises(lockgate.NotHeldError):
                await lock.release()
            # try_acquire's lease is kept the same way.
            assert await lock.try_acquire() is not None
            gc.collect()
            assert await b.lock("ahabit").try_acquire() is None
            assert await lock.release() is True

    asyncio.run(main())

"""The asyncio API against a real redis-server."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable

import pytest
import redis.asyncio

import lockgate
import lockgate.aio
from conftest import RedisServer, lock_key, queue_len, wait_until


def run(fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
    return asyncio.run(asyncio.wait_for(fn(*args), 60))


async def until(cond: Callable[[], object], timeout: float = 5.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.005)


def test_tasks_on_several_clients_lose_no_updates(server: RedisServer) -> None:
    async def worker(url: str, rounds: int) -> list[int]:
        raw = redis.asyncio.Redis.from_url(url)
        tokens = []
        async with lockgate.aio.Client(url) as client:
            lock = client.lock("acounter")
            for _ in range(rounds):
                async with lock.acquire(timeout=30) as lease:
                    tokens.append(lease.fencing_token)
                    v = int(await raw.get("acounter") or 0)
                    await asyncio.sleep(0.001)  # other tasks run here
                    await raw.set("acounter", v + 1)
        await raw.aclose()
        return tokens

    async def main() -> None:
        results = await asyncio.gather(*(worker(server.url, 25) for _ in range(4)))
        for tokens in results:
            assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens)
        assert len({t for ts in results for t in ts}) == 100, "one fencing token per grant"

    run(main)
    assert int(server.raw().get("acounter") or 0) == 100


def test_context_managers_and_try_acquire(server: RedisServer) -> None:
    raw = server.raw()

    async def main() -> None:
        async with lockgate.aio.Client(server.url) as client:
            lock = client.lock("acm", wait=5)
            assert lock.wait == 5.0 and lock.renew
            async with lock.acquire(timeout=5) as lease:
                assert lease.is_held and raw.exists(lock_key("acm"))
                assert await client.lock("acm").try_acquire() is None
                with pytest.raises(lockgate.AlreadyHeldError):
                    await lock.try_acquire()  # this handle holds it
            assert not raw.exists(lock_key("acm"))
            async with lock as lease2:
                assert lease2.fencing_token > lease.fencing_token
                assert raw.exists(lock_key("acm"))
            assert not raw.exists(lock_key("acm"))
            lease3 = await lock.acquire()
            async with lease3:
                assert lease3.is_held
            assert not raw.exists(lock_key("acm"))
            with pytest.raises(KeyError):
                async with lock.acquire(timeout=5):
                    raise KeyError("boom")
            assert not raw.exists(lock_key("acm"))
            free = await lock.try_acquire()
            assert free is not None
            assert await free.release() is True
            assert await free.release() is False

    run(main)


def test_timeout_expiry_and_extend(server: RedisServer) -> None:
    raw = server.raw()

    async def main() -> None:
        async with lockgate.aio.Client(server.url) as a, lockgate.aio.Client(server.url) as b:
            held = await a.lock("at", 0.15).acquire(timeout=1)
            with pytest.raises(lockgate.LockTimeoutError) as ei:
                await b.lock("at").acquire(timeout=0.05)
            assert isinstance(ei.value, TimeoutError) and ei.value.retryable
            reason = await asyncio.wait_for(held.lost(), 2)
            assert isinstance(reason, lockgate.NotHeldError)
            await until(lambda: not raw.exists(lock_key("at")), what="server expiry")
            with pytest.raises(lockgate.NotHeldError):
                await held.extend(5)
            assert not raw.exists(lock_key("at")), "extend must not resurrect the lock"
            nxt = await b.lock("at", 0.5).acquire(timeout=1)
            assert nxt.fencing_token > held.fencing_token
            assert await nxt.extend(10) is None
            assert raw.pttl(lock_key("at")) > 5000
            assert await nxt.release() is True

    run(main)


def test_watchdog_and_loss_signal(server: RedisServer) -> None:
    raw = server.raw()

    async def main() -> None:
        async with lockgate.aio.Client(server.url) as client:
            lock = client.lock("adog", 0.3, renew=True)
            lease = await lock.acquire(timeout=1)
            lost = asyncio.ensure_future(lease.lost())
            end = time.monotonic() + 1.2
            while time.monotonic() < end:
                assert raw.pttl(lock_key("adog")) > 0, "the key expired despite the watchdog"
                await asyncio.sleep(0.02)
            assert lease.is_held and not lost.done()
            called: asyncio.Future[lockgate.LockError] = asyncio.get_running_loop().create_future()
            lease.on_lost(called.set_result)
            raw.delete(lock_key("adog"))
            reason = await asyncio.wait_for(lost, 2)
            assert isinstance(reason, lockgate.NotHeldError) and reason.code == "NOT_HELD"
            from_callback = await asyncio.wait_for(called, 2)
            assert isinstance(from_callback, lockgate.NotHeldError)
            assert not lease.is_held and lease.lost_reason is not None
            with pytest.raises(lockgate.NotHeldError):
                async with lease:
                    pass

    run(main)


def test_lost_resolves_none_after_release(server: RedisServer) -> None:
    async def main() -> None:
        async with lockgate.aio.Client(server.url) as client:
            lease = await client.lock("arel").acquire(timeout=1)
            lost = asyncio.ensure_future(lease.lost())
            await asyncio.sleep(0)
            assert await lease.release() is True
            assert await asyncio.wait_for(lost, 2) is None

    run(main)


def test_cancelling_a_waiting_task_leaves_no_queue_entry(server: RedisServer) -> None:
    raw = server.raw()

    async def main() -> None:
        async with lockgate.aio.Client(server.url) as a, lockgate.aio.Client(server.url) as b:
            held = await a.lock("acancel").acquire(timeout=1)
            waiting = asyncio.ensure_future(b.lock("acancel").acquire(timeout=30))
            await until(lambda: queue_len(raw, "acancel") == 1, what="the waiter to queue")
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            await until(lambda: queue_len(raw, "acancel") == 0, what="the entry to go")
            assert await held.release() is True
            assert not raw.exists(lock_key("acancel")), "the cancelled waiter was not granted"
            # asyncio.wait_for's timeout cancels the same way.
            held = await a.lock("acancel").acquire(timeout=1)
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(b.lock("acancel").acquire(timeout=30), 0.2)
            await until(lambda: queue_len(raw, "acancel") == 0, what="the entry to go")
            assert await held.release() is True
            assert not raw.exists(lock_key("acancel"))

    run(main)


def test_lazy_connect_close_and_errors(server: RedisServer) -> None:
    async def main() -> None:
        client = lockgate.aio.Client(server.url)
        lock = client.lock("alazy")  # no connection yet
        lease = await lock.acquire(timeout=1)  # connects on first use
        assert await client.connect() is None
        assert await client.close() is None
        assert not server.raw().exists(lock_key("alazy"))
        assert not lease.is_held
        with pytest.raises(lockgate.ClientClosedError):
            await lock.acquire(timeout=1)
        unreachable = lockgate.aio.Client(f"redis://127.0.0.1:{closed_port()}", connect_timeout=1)
        with pytest.raises(lockgate.LockConnectionError) as ei:
            await unreachable.connect()
        assert ei.value.retryable is True and ei.value.code == "CONNECTION"

    run(main)


def closed_port() -> int:
    from conftest import free_port

    return free_port()


def test_many_awaits_and_loops_in_several_threads(server: RedisServer) -> None:
    import threading

    async def many(tag: str) -> list[int]:
        async with lockgate.aio.Client(server.url) as client:
            locks = [client.lock(f"{tag}-{i}") for i in range(50)]
            leases = await asyncio.gather(*(lk.acquire(timeout=5) for lk in locks))
            assert all(lease.is_held for lease in leases)
            assert await asyncio.gather(*(lease.release() for lease in leases)) == [True] * 50
            return [lease.fencing_token for lease in leases]

    results: dict[str, list[int]] = {}
    errors: list[BaseException] = []

    def in_thread(tag: str) -> None:
        try:
            for _ in range(3):  # a fresh event loop each time
                results[tag] = run(many, tag)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=in_thread, args=(t,)) for t in ("x", "y")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert len(results["x"]) == len(results["y"]) == 50
    raw = server.raw()
    for tag in ("x", "y"):
        for i in range(50):
            assert not raw.exists(lock_key(f"{tag}-{i}")), "every lock was released"


class _NoReaderLoop(asyncio.SelectorEventLoop):
    """A loop that cannot watch a socket, like Windows' proactor loop (its default there)."""

    def add_reader(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError


def test_a_loop_that_cannot_watch_a_socket_is_woken_threadsafe(server: RedisServer) -> None:
    # The bridge falls back to call_soon_threadsafe (Windows' path): results, a waiter woken by
    # a release on another client, and a timeout all resolve.
    async def main() -> list[object]:
        raw = server.raw()
        async with lockgate.aio.Client(server.url) as a, lockgate.aio.Client(server.url) as b, lockgate.aio.Client(server.url) as c:
            held = await a.lock("no-reader").acquire(timeout=5)
            waiting = asyncio.ensure_future(b.lock("no-reader").acquire(timeout=5))
            await until(lambda: queue_len(raw, "no-reader") == 1, what="the waiter queued")
            with pytest.raises(lockgate.LockTimeoutError):
                await c.lock("no-reader").acquire(timeout=0.2)
            first = held.fencing_token
            await held.release()
            second = await waiting
            token = second.fencing_token
            await second.release()
            return [first, token]

    loop = _NoReaderLoop()
    try:
        first, second = loop.run_until_complete(asyncio.wait_for(main(), 30))
    finally:
        loop.close()
    assert isinstance(first, int) and isinstance(second, int) and second > first

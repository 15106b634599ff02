"""Breaking a lock from Python (issue 25): ``Client.break_lock(name, token=None, kind=...)`` in
both APIs against a real redis-server — what it returns, the next waiter woken with a larger
token, the broken holder's loss signal and release, a stale token, bad input — and the README's
migration row for python-redis-lock's ``reset()``. The cross-language and per-backend cases are
the conformance scenarios break_*."""

from __future__ import annotations

import asyncio
import threading

import pytest

import lockgate
import lockgate.aio
from conftest import RedisServer


def test_break_wakes_the_next_waiter_and_the_holder_learns_of_its_loss(server: RedisServer) -> None:
    with lockgate.Client(server.url, label="py-brk-a") as a, lockgate.Client(server.url) as b, lockgate.Client(server.url) as ops:
        held = a.lock("jobs", 0.9, renew=True).acquire(timeout=5)
        lost = threading.Event()
        held.on_lost(lambda _reason: lost.set())
        got: list[lockgate.Lease] = []
        waiter = threading.Thread(target=lambda: got.append(b.lock("jobs").acquire(timeout=5)))
        waiter.start()
        threading.Event().wait(0.2)
        assert ops.break_lock("jobs") == {"label": "py-brk-a", "fencing_token": held.fencing_token}
        waiter.join(5)
        (granted,) = got
        assert granted.fencing_token > held.fencing_token
        assert lost.wait(3), "the broken holder learns of its loss at its next renewal"
        assert isinstance(held.lost_reason, lockgate.NotHeldError)
        assert held.release() is False
        assert granted.release() is True
        assert ops.break_lock("jobs") is None


def test_a_stale_token_breaks_nothing_and_reset_breaks_the_holder(server: RedisServer) -> None:
    with lockgate.Client(server.url) as a, lockgate.Client(server.url) as ops:
        lock = a.lock("stale")
        first = lock.acquire(timeout=5)
        assert first.release()
        second = lock.acquire(timeout=5)
        assert ops.break_lock("stale", first.fencing_token) is None
        assert lock.is_locked()
        # python-redis-lock's Lock(r, name).reset(): break whoever holds it.
        assert ops.break_lock("stale")["fencing_token"] == second.fencing_token
        assert not lock.is_locked()
        assert second.release() is False
        for bad in [dict(name=""), dict(name="x", token=-1), dict(name="x", token=True), dict(name="x", token="7"), dict(name="x", kind="table")]:
            with pytest.raises(lockgate.InvalidArgumentError):
                ops.break_lock(**bad)  # type: ignore[arg-type]


def test_asyncio_break_lock(server: RedisServer) -> None:
    async def main() -> None:
        async with lockgate.aio.Client(server.url, label="py-aio-brk") as c:
            lease = await c.lock("aio-brk").acquire()
            assert await c.break_lock("aio-brk", lease.fencing_token) == {"label": "py-aio-brk", "fencing_token": lease.fencing_token}
            assert await c.break_lock("aio-brk") is None
            assert await lease.release() is False

    asyncio.run(main())

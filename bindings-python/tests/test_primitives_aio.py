"""Semaphores, read-write locks, leader elections and reentrant locks (asyncio API) against a
real redis-server."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable

import pytest

import lockgate
import lockgate.aio
from conftest import RedisServer
from test_primitives import live_keys, zcard


def run(fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
    return asyncio.run(asyncio.wait_for(fn(*args), 60))


async def until(cond: Callable[[], object], timeout: float = 5.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.005)


def test_semaphore_caps_holders_across_tasks_and_clients(server: RedisServer) -> None:
    raw = server.raw()
    active = 0
    peak = 0

    async def worker(client: lockgate.aio.Client) -> None:
        nonlocal active, peak
        sem = client.semaphore("apool", 3)
        for _ in range(20):
            async with sem.acquire(timeout=30) as permit:
                assert permit.is_held
                active += 1
                peak = max(peak, active)
                await asyncio.sleep(0.002)
                active -= 1

    async def main() -> None:
        async with lockgate.aio.Client(server.url) as a, lockgate.aio.Client(server.url) as b:
            sem = a.semaphore("apool", 3, wait=5)
            assert isinstance(sem, lockgate.aio.Semaphore) and isinstance(sem, lockgate.aio.Lock)
            assert sem.permits == 3 and sem.wait == 5.0
            assert repr(sem).startswith("<lockgate.aio.Semaphore name='apool' permits=3 ")
            await asyncio.gather(*(worker(c) for c in (a, b, a, b, a, b)))
            # Permits as leases: three at once, then nobody else.
            # (one handle holds one permit at a time: a permit per handle)
            handles = [sem] + [a.semaphore("apool", 3) for _ in range(3)]
            leases = [await h.acquire(timeout=1) for h in handles[:3]]
            assert len({lease.fencing_token for lease in leases}) == 3
            assert await handles[3].try_acquire() is None
            with pytest.raises(lockgate.LockTimeoutError):
                await handles[3].acquire(timeout=0.1)
            with pytest.raises(lockgate.AlreadyHeldError):
                await sem.acquire(timeout=0.1)
            for lease in leases:
                assert await lease.release() is True
            async with sem as one:
                assert one.is_held

    run(main)
    assert 2 <= peak <= 3, f"peak {peak} with 3 permits"
    assert live_keys(raw, "apool") == []


def test_read_write_lock(server: RedisServer) -> None:
    raw = server.raw()

    async def main() -> None:
        async with lockgate.aio.Client(server.url) as a, lockgate.aio.Client(server.url) as b:
            rw = a.read_write_lock("adoc")
            other = b.read_write_lock("adoc")
            assert isinstance(rw, lockgate.aio.ReadWriteLock)
            assert rw.name == "adoc" and rw.writers_first and not rw.reentrant
            assert rw.read_lock is rw.read_lock
            assert repr(rw.write_lock) == (
                "<lockgate.aio.Lock name='adoc' mode='write' lease=30.0 renew=True wait=None>"
            )
            r1 = await rw.read_lock.acquire(timeout=1)
            r2 = await other.read_lock.acquire(timeout=1)
            assert r1.is_held and r2.is_held, "readers overlap"
            assert await other.write_lock.try_acquire() is None, "a writer waits for readers"
            writer = asyncio.ensure_future(other.write_lock.acquire(timeout=10))
            await until(lambda: zcard(raw, "lockgate:{adoc}:rw:queue") == 1, what="the writer")
            late = a.read_write_lock("adoc").read_lock
            assert await late.try_acquire() is None, "a queued writer blocks new readers"
            # Every client of the name must agree on writers_first while it is in use.
            barging = a.read_write_lock("adoc", writers_first=False)
            with pytest.raises(lockgate.InvalidArgumentError):
                await barging.read_lock.try_acquire()
            assert await r1.release() is True
            assert not writer.done(), "the writer waits for the last reader"
            assert await r2.release() is True
            w = await writer
            assert w.is_held and w.fencing_token > r2.fencing_token
            assert await rw.read_lock.try_acquire() is None, "the writer excludes readers"
            async with w:
                pass
            async with rw.write_lock.acquire(timeout=1):
                assert await other.read_lock.try_acquire() is None

    run(main)
    assert live_keys(raw, "adoc") == []


def test_election(server: RedisServer) -> None:
    raw = server.raw()

    async def main() -> None:
        async with lockgate.aio.Client(server.url) as a, lockgate.aio.Client(server.url) as b:
            ea = a.election("alead", 0.6, renew=True)
            eb = b.election("alead", 0.6, renew=True)
            assert isinstance(ea, lockgate.aio.Election) and ea.name == "alead"
            assert ea.lease == 0.6 and ea.renew
            assert await ea.observe() is None
            lead = await ea.campaign("node-a", timeout=1)
            seen = await eb.observe()
            assert isinstance(seen, lockgate.LeaderInfo)
            assert (seen.value, seen.term) == ("node-a", lead.fencing_token)
            assert 0 < seen.remaining <= 0.6
            assert await eb.try_campaign("node-b") is None, "one leader"
            with pytest.raises(lockgate.LockTimeoutError):
                await eb.campaign("node-b", timeout=0.1)
            candidate = asyncio.ensure_future(eb.campaign("node-b", timeout=10))
            await until(lambda: zcard(raw, "lockgate:{alead}:elect:queue") == 1, what="b")
            await asyncio.sleep(0.8)  # past one lease: still one leader (watchdog)
            assert not candidate.done(), "two leaders at once"
            assert await lead.release() is True, "resign"
            b_lead = await candidate
            assert b_lead.fencing_token > lead.fencing_token, "a larger term"
            now = await ea.observe()
            assert now is not None and (now.value, now.term) == ("node-b", b_lead.fencing_token)
            # Lost leadership: the holders key deleted behind the leader's back.
            raw.delete("lockgate:{alead}:elect:holders")
            reason = await asyncio.wait_for(b_lead.lost(), 2)
            assert isinstance(reason, lockgate.NotHeldError)
            assert not b_lead.is_held and await ea.observe() is None
            assert await b_lead.release() is False
            # async with campaign(...) resigns on exit.
            async with ea.campaign("node-c") as c_lead:
                info = await eb.observe()
                assert info is not None and info.term == c_lead.fencing_token
                assert c_lead.fencing_token > b_lead.fencing_token
            assert await eb.observe() is None

    run(main)
    assert live_keys(raw, "alead") == []


def test_reentrant_lock(server: RedisServer) -> None:
    raw = server.raw()

    async def main() -> None:
        async with lockgate.aio.Client(server.url) as a, lockgate.aio.Client(server.url) as b:
            lock = a.lock("are", reentrant=True)
            probe = b.lock("are")
            assert lock.reentrant and not probe.reentrant
            async with lock as outer:
                async with lock.acquire(timeout=0) as inner:
                    assert inner.fencing_token == outer.fencing_token
                again = await lock.try_acquire()
                assert again is not None and again.fencing_token == outer.fencing_token
                assert await again.release() is True
                assert await again.release() is False, "a hold is given back once"
                assert outer.is_held and await probe.try_acquire() is None
            p = await probe.try_acquire()
            assert p is not None, "free after the last release"
            assert await b.lock("are").try_acquire() is None, "a plain handle does not re-enter"
            assert await p.release()
            rw = a.read_write_lock("are-rw", reentrant=True)
            assert rw.reentrant and rw.write_lock.reentrant
            async with rw.write_lock as w1, rw.write_lock as w2:
                assert w1.fencing_token == w2.fencing_token

    run(main)
    assert live_keys(raw, "are") == [] and live_keys(raw, "are-rw") == []


def test_cancelled_and_timed_out_waits_leave_no_keys(server: RedisServer) -> None:
    raw = server.raw()

    async def main() -> None:
        async with lockgate.aio.Client(server.url) as a, lockgate.aio.Client(server.url) as b:
            held = await a.semaphore("acan", 1).acquire(timeout=1)
            waiting = asyncio.ensure_future(b.semaphore("acan", 1).acquire(timeout=30))
            await until(lambda: zcard(raw, "lockgate:{acan}:sem:queue") == 1, what="queue")
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            await until(lambda: zcard(raw, "lockgate:{acan}:sem:queue") == 0, what="the entry to go")
            with pytest.raises(lockgate.LockTimeoutError):
                await b.semaphore("acan", 1).acquire(timeout=0.1)
            assert await held.release()
            w = await a.read_write_lock("acan").write_lock.acquire(timeout=1)
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(b.read_write_lock("acan").read_lock.acquire(timeout=30), 0.2)
            assert await w.release()
            lead = await a.election("acan").campaign("a")
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(b.election("acan").campaign("b"), 0.2)
            assert await lead.release()
            assert await b.election("acan").observe() is None, "the withdrawn candidate never led"

    run(main)
    deadline = time.monotonic() + 5
    while live_keys(raw, "acan") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert live_keys(raw, "acan") == []


def test_bad_input_raises_at_the_call(server: RedisServer) -> None:
    async def main() -> None:
        client = lockgate.aio.Client(server.url)  # not connected: validation needs no server
        election = client.election("e")
        for call in (
            lambda: client.semaphore("s", 0),
            lambda: client.semaphore("s", -3),
            lambda: client.semaphore("", 1),
            lambda: client.semaphore("s", 1).acquire(timeout=-1),
            lambda: client.read_write_lock("rw", 0),
            lambda: client.read_write_lock("rw").read_lock.acquire(timeout=-1),
            lambda: client.lock("m", reentrant=True).acquire(timeout=-1),
            lambda: client.election(""),
            lambda: election.campaign("x" * 4097),
            lambda: election.campaign("node", timeout=-1),
            lambda: election.try_campaign("x" * 4097),
        ):
            with pytest.raises(lockgate.InvalidArgumentError) as ei:
                call()
            assert ei.value.code == "INVALID_ARGUMENT"
        await client.close()

    run(main)

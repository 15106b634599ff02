"""Redlock over independent masters: the one `lockgate.Client` (and `lockgate.aio.Client`) with a
`redlock://host:port,...` URL, against real redis-servers the tests start (five masters, loopback
ports, temp dirs, stopped by pid): keys on every master, a minority down still grants, a majority
down fails with the CONNECTION error, context managers, garbage collection and the exit hook, the
loss signal, bad input and what a Redlock cannot do, and no fencing token. Mutual exclusion
between clients is the conformance scenario redlock_mutual_exclusion."""

from __future__ import annotations

import asyncio
import re
import gc
import subprocess
import sys
import textwrap
import time
from typing import Any, Awaitable, Callable, Iterator

import pytest

import lockgate
import lockgate.aio
from conftest import RedisMasters, redlock_key, wait_until

# A small max_lease: a freshly started master refuses grants for max_lease + 1 s, so the first
# acquire on new masters waits ~2-3 s (hence its timeout of FIRST seconds).
MAX_LEASE = 1.0
FIRST = 6.0
SETTINGS: dict[str, Any] = dict(
    max_lease=MAX_LEASE,
    node_timeout=0.2,
    retry_delay=0.01,
    retry_jitter=0.03,
    connect_timeout=1.0,
    response_timeout=2.0,
)


def run(fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
    return asyncio.run(asyncio.wait_for(fn(*args), 60))


@pytest.fixture(scope="module")
def masters() -> Iterator[RedisMasters]:
    """Five masters shared by the tests of this module that stop none of them (distinct lock
    names); warmed up once, and every master past the delayed-restart rule before the first test."""
    m = RedisMasters(5)
    try:
        with lockgate.Client(m.url, **SETTINGS) as redlock:
            redlock.lock("warm-up", MAX_LEASE).acquire(timeout=FIRST).release()
        m.wait_all_granting(MAX_LEASE)
        yield m
    finally:
        m.close()


def test_acquire_release_on_every_master(masters: RedisMasters) -> None:
    with lockgate.Client(masters.url, **SETTINGS) as redlock:
        assert redlock.url == masters.url and redlock.key_prefix == "lockgate:"
        assert repr(redlock) == f"<lockgate.Client url={masters.url!r} key_prefix='lockgate:'>"
        caps = redlock.capabilities
        # Mutexes, reentrant too (PROTOCOL.md §8): no fencing, queue, semaphore, ...
        assert [name for name, on in caps.items() if on] == ["reentrant", "list_locks", "adopt", "min_hold"], caps
        assert set(caps) >= {"fencing", "fifo", "semaphore", "read_write", "election", "reentrant"}
        lock = redlock.lock("orders", 0.8)
        assert (lock.name, lock.lease, lock.renew, lock.wait) == ("orders", 0.8, False, None)
        # A grant needs only a majority: a master still within its delayed-restart period
        # (max_lease + 1 s after start, PROTOCOL.md §8) refuses. This test checks every master,
        # so it waits until all five are past it (uptime in whole seconds, hence 3).
        wait_until(
            lambda: all(int(n.raw().info("server")["uptime_in_seconds"]) >= MAX_LEASE + 2 for n in masters.nodes),
            timeout=FIRST,
            what="every master past the delayed-restart rule",
        )
        lease = lock.acquire(timeout=FIRST)
        assert lease.is_held and lease.name == "orders"
        remaining = lease.remaining
        assert remaining is not None and 0.5 < remaining < 0.8  # drift deducted
        assert lease.lost_reason is None
        # The same owner value on all five masters (the 32-character token, then ":" and the
        # number of masters every participant must agree on, PROTOCOL.md §8), with the lease as its expiry.
        key = redlock_key("orders")
        assert sorted(masters.holders("orders")) == sorted(n.port for n in masters.nodes)
        tokens = {n.raw().get(key) for n in masters.nodes}
        assert len(tokens) == 1
        token, _, counted = (tokens.pop() or b"").partition(b":")
        assert len(token) == 32 and counted == b"5"
        assert all(0 < n.raw().pttl(key) <= 800 for n in masters.nodes)
        lease.extend(1.0)  # returns once a majority confirmed
        assert sum(700 < n.raw().pttl(key) <= 1000 for n in masters.nodes) >= 3
        assert lease.release() is True
        assert masters.holders("orders") == []
        assert not lease.is_held and lease.remaining is None
        assert lease.release() is False  # a second release: no longer held
        assert "orders" in repr(lease) and "held=False" in repr(lease)
        with pytest.raises(lockgate.NotHeldError):
            lease.extend(0.5)


def test_lease_has_no_fencing_token(masters: RedisMasters) -> None:
    for cls in (lockgate.Lease, lockgate.aio.Lease):
        doc = cls.fencing_token.__doc__  # type: ignore[attr-defined]
        assert doc is not None and "PROTOCOL.md §8" in doc and "None" in doc
    with lockgate.Client(masters.url, **SETTINGS) as redlock:
        with redlock.lock("no-token", 0.5).acquire(timeout=FIRST) as lease:
            assert isinstance(lease, lockgate.Lease) and lease.fencing_token is None
            assert "fencing_token" not in repr(lease)


def test_break_removes_the_holder_on_every_master_and_refuses_a_token(masters: RedisMasters) -> None:
    """PROTOCOL.md §15: a Redlock break is the holder's REDLOCK_RELEASE on every master; it issues
    no fencing tokens, so a break naming one is UNSUPPORTED."""
    with lockgate.Client(masters.url, label="rl-holder", **SETTINGS) as holder, lockgate.Client(masters.url, **SETTINGS) as ops:
        lease = holder.lock("broken", 1.0).acquire(timeout=FIRST)
        with pytest.raises(lockgate.UnsupportedError):
            ops.break_lock("broken", 7)
        assert ops.break_lock("broken") == {"label": "rl-holder", "fencing_token": None}
        assert masters.holders("broken") == []
        assert lease.release() is False
        assert ops.break_lock("broken") is None


def test_two_of_five_down_still_grants_three_down_is_a_connection_error() -> None:
    m = RedisMasters(5)
    try:
        with lockgate.Client(m.url, **SETTINGS) as redlock:
            lock = redlock.lock("quorum", MAX_LEASE)
            lock.acquire(timeout=FIRST).release()
            m.nodes[1].stop()
            m.nodes[4].stop()
            lease = lock.try_acquire()
            assert lease is not None, "3 of 5 masters are a majority"
            assert lease.is_held and len(m.holders("quorum")) == 3
            assert lease.release() is True
            assert m.holders("quorum") == []

            m.nodes[2].stop()
            with pytest.raises(lockgate.LockConnectionError) as e:
                lock.try_acquire()
            assert e.value.code == "CONNECTION" and e.value.retryable is True
            # Masters whose connection is down answer at once, so the attempt may be decided
            # (a majority is out of reach) before the two live masters' grants arrive.
            assert re.search(r"\b[0-2] of 5 masters granted, 3 are needed", str(e.value)), str(e.value)
            # A waiting acquire keeps trying until its timeout; too few masters answered, so it
            # ends with CONNECTION saying why the last attempt failed, not TIMEOUT (issue 23 item 7).
            started = time.monotonic()
            with pytest.raises(lockgate.LockConnectionError) as t:
                lock.acquire(timeout=0.4)
            assert time.monotonic() - started < 2
            assert t.value.code == "CONNECTION" and t.value.retryable is True
            assert "masters granted" in str(t.value)
            time.sleep(0.1)
            assert m.holders("quorum") == [], "failed attempts are undone on the live masters"
    finally:
        m.close()


def test_context_managers_release(masters: RedisMasters) -> None:
    with lockgate.Client(masters.url, **SETTINGS) as redlock:
        lock = redlock.lock("cm", 0.8, wait=FIRST)
        with lock as lease:
            assert lease.is_held
            masters.wait_all_hold("cm")
        assert masters.holders("cm") == [] and not lease.is_held
        with lock.acquire(timeout=FIRST) as lease2:
            masters.wait_all_hold("cm")
        assert masters.holders("cm") == []
        # An exception leaving the block: released, and the exception propagates alone.
        with pytest.raises(KeyError):
            with lock:
                raise KeyError("boom")
        assert masters.holders("cm") == []
        # Released inside the block: leaving it reports nothing.
        with lock.acquire() as lease3:
            assert lease3.release() is True
        assert not lease2.is_held
    # Closing the Redlock releases what it still holds and refuses further use.
    redlock = lockgate.Client(masters.url, **SETTINGS)
    lock = redlock.lock("closed", MAX_LEASE)
    kept = lock.acquire(timeout=FIRST)
    masters.wait_all_hold("closed")
    redlock.close()
    assert masters.holders("closed") == [] and not kept.is_held
    with pytest.raises(lockgate.ClientClosedError):
        lock.try_acquire()


def test_unreferenced_lease_is_released_in_the_background(masters: RedisMasters) -> None:
    with lockgate.Client(masters.url, **SETTINGS) as redlock:
        lease = redlock.lock("dropped").acquire(timeout=FIRST)  # renewed: would live on
        masters.wait_all_hold("dropped")
        del lease
        gc.collect()
        wait_until(lambda: masters.holders("dropped") == [], timeout=3, what="background release")


def test_exit_hook_releases_a_lease_still_held(masters: RedisMasters) -> None:
    script = textwrap.dedent(
        f"""
        import ctypes, lockgate
        redlock = lockgate.Client({masters.url!r}, max_lease={MAX_LEASE})
        lease = redlock.lock("at-exit", {MAX_LEASE}).acquire(timeout={FIRST})
        assert lease.is_held
        # Never collected (an extra reference), so only the exit hook can release it.
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(lease))
        print("held", flush=True)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert out.returncode == 0 and out.stdout == b"held\n", out.stderr
    # Its 1 s lease would keep the key for most of a second: the exit hook released it.
    assert masters.holders("at-exit") == []


def test_loss_is_signalled(masters: RedisMasters) -> None:
    with lockgate.Client(masters.url, **SETTINGS) as redlock:
        lease = redlock.lock("lost").acquire(timeout=FIRST)  # 1 s, renewed every 1/3 s
        reasons: list[lockgate.LockError] = []
        lease.on_lost(reasons.append)
        time.sleep(0.5)
        assert lease.is_held and lease.lost_reason is None
        # The key vanishes from a majority: the next renewal finds it gone, and never re-creates it.
        key = redlock_key("lost")
        for n in masters.nodes[:3]:
            n.raw().delete(key)
        wait_until(lambda: reasons, timeout=3, what="the loss callback")
        assert isinstance(reasons[0], lockgate.NotHeldError)
        assert isinstance(lease.lost_reason, lockgate.NotHeldError)
        assert not lease.is_held and lease.remaining is None
        with pytest.raises(lockgate.NotHeldError):
            lease.extend(0.5)

        # Leaving a block whose lease was lost raises NotHeldError: the work may have overlapped.
        with pytest.raises(lockgate.NotHeldError):
            with redlock.lock("expired", 0.3).acquire(timeout=FIRST):
                time.sleep(0.5)  # a fixed lease runs out: lost
        wait_until(lambda: masters.holders("expired") == [], timeout=2, what="expiry")

        # A normal release never calls the callback.
        calls: list[lockgate.LockError] = []
        ok = redlock.lock("fine").acquire(timeout=FIRST)
        ok.on_lost(calls.append)
        assert ok.release() is True
        time.sleep(0.3)
        assert calls == [] and ok.lost_reason is None


def test_bad_input_raises_invalid_argument(masters: RedisMasters) -> None:
    port = masters.nodes[0].port
    cases: list[tuple[str, dict[str, Any]]] = [
        ("redlock://", {}),
        (f"redlock://127.0.0.1:{port},127.0.0.1:{port}", {}),  # one master listed twice
        (masters.url, {"max_lease": 0}),
        (masters.url, {"max_lease": -1.0}),
        (masters.url, {"node_timeout": float("nan")}),
        (masters.url, {"drift_factor": 0.7}),
        (masters.url, {"retry_delay": 0}),
        (masters.url, {"key_prefix": "a{b"}),
        (masters.url, {"replica_acks": 1}),  # not a Redlock setting
        (masters.url, {"cluster": True}),
        (masters.nodes[0].url, {"max_lease": 5}),  # a Redlock setting on a redis:// URL
    ]
    for url, kw in cases:
        for cls in (lockgate.Client, lockgate.aio.Client):
            with pytest.raises(lockgate.InvalidArgumentError) as e:
                cls(url, **kw)
            assert e.value.code == "INVALID_ARGUMENT" and isinstance(e.value, ValueError)

    with lockgate.Client(masters.url, **SETTINGS) as redlock:
        # A lease longer than the deployment's max_lease: refused when the lock is made, before
        # anything is sent.
        with pytest.raises(lockgate.InvalidArgumentError, match="max_lease"):
            redlock.lock("too-long", MAX_LEASE + 1)
        assert masters.holders("too-long") == []
        for bad in ("", "x" * 600):
            with pytest.raises(lockgate.InvalidArgumentError):
                redlock.lock(bad)
        with pytest.raises(lockgate.InvalidArgumentError):
            redlock.lock("x", -1)
        with pytest.raises(lockgate.InvalidArgumentError, match="entry_ttl is not a Redlock setting"):
            redlock.lock("x", entry_ttl=1)
        with pytest.raises(lockgate.InvalidArgumentError):
            redlock.lock("x").acquire(timeout=-1)
        with redlock.lock("extend-too-long", 0.5).acquire(timeout=FIRST) as lease:
            with pytest.raises(lockgate.InvalidArgumentError, match="max_lease"):
                lease.extend(MAX_LEASE + 1)
            assert lease.is_held
        # What a Redlock cannot do is UNSUPPORTED when the handle is made, naming the backend.
        for make in (
            lambda: redlock.semaphore("s", 2),
            lambda: redlock.read_write_lock("rw"),
            lambda: redlock.election("e"),
        ):
            with pytest.raises(lockgate.UnsupportedError, match="Redlock") as u:
                make()
            assert u.value.code == "UNSUPPORTED" and u.value.retryable is False
            assert isinstance(u.value, lockgate.LockError)


def test_lease_none_defaults_to_a_renewed_lease_within_max_lease(masters: RedisMasters) -> None:
    with lockgate.Client(masters.url, **SETTINGS) as redlock:
        lock = redlock.lock("default")
        assert (lock.lease, lock.renew) == (MAX_LEASE, True)
        assert "lease=1.0 renew=True" in repr(lock)
    big = lockgate.aio.Client(masters.url, max_lease=120)
    assert (big.lock("d").lease, big.lock("d").renew) == (30.0, True)


def test_urls_hide_passwords() -> None:
    redlock = lockgate.aio.Client("redlock://app:s3cret-pw@127.0.0.1:1,127.0.0.1:2,127.0.0.1:3/3")
    for text in (repr(redlock), redlock.url):
        assert "s3cret-pw" not in text and "***" in text, text

    async def unreachable() -> None:
        with pytest.raises(lockgate.LockConnectionError) as e:
            await redlock.connect()
        assert "s3cret-pw" not in str(e.value)

    run(unreachable)


def test_asyncio(masters: RedisMasters) -> None:
    async def main() -> None:
        async with lockgate.aio.Client(masters.url, **SETTINGS) as a:
            b = lockgate.aio.Client(masters.url, **SETTINGS)
            assert a.capabilities == b.capabilities and not a.capabilities["fencing"]
            lock = a.lock("aio", 0.8)
            async with lock.acquire(timeout=FIRST) as lease:
                assert lease.is_held
                masters.wait_all_hold("aio")
                assert lease.fencing_token is None
                assert await b.lock("aio").try_acquire() is None
                with pytest.raises(lockgate.LockTimeoutError):
                    await b.lock("aio").acquire(timeout=0.3)
                await lease.extend(1.0)
                ttls = [n.raw().pttl(redlock_key("aio")) for n in masters.nodes]
                assert sum(700 < t <= 1000 for t in ttls) >= 3, ttls
            assert masters.holders("aio") == []
            assert await lease.lost() is None  # released normally
            # Another client takes it now; the lock handle's own `async with` works too.
            async with b.lock("aio", 0.8, wait=2) as taken:
                assert taken.is_held and await a.lock("aio").try_acquire() is None
            assert masters.holders("aio") == []
            got = await lock.try_acquire()
            assert got is not None and await got.release() is True and await got.release() is False

            # A cancelled wait leaves nothing behind.
            blocker = await lock.acquire(timeout=2)
            waiter = asyncio.ensure_future(b.lock("aio").acquire(timeout=30))
            await asyncio.sleep(0.2)
            waiter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiter
            assert await blocker.release() is True
            await asyncio.sleep(0.1)
            assert masters.holders("aio") == []

            # Loss: the key vanishes from a majority of masters; the renewal notices.
            renewed = await a.lock("aio-lost").acquire(timeout=FIRST)
            called = asyncio.Event()
            renewed.on_lost(lambda reason: called.set())
            for n in masters.nodes[1:4]:
                n.raw().delete(redlock_key("aio-lost"))
            reason = await asyncio.wait_for(renewed.lost(), 3)
            assert isinstance(reason, lockgate.NotHeldError)
            await asyncio.wait_for(called.wait(), 3)
            assert not renewed.is_held and isinstance(renewed.lost_reason, lockgate.NotHeldError)

            # Bad input raises at the call or the await, with the typed error.
            with pytest.raises(lockgate.InvalidArgumentError):
                a.lock("")
            with pytest.raises(lockgate.InvalidArgumentError, match="max_lease"):
                a.lock("too-long", MAX_LEASE + 1)
            # Not connected yet: what a Redlock cannot do is refused at the first await.
            with pytest.raises(lockgate.UnsupportedError):
                await lockgate.aio.Client(masters.url, **SETTINGS).semaphore("s", 2).try_acquire()
            await b.close()
            with pytest.raises(lockgate.ClientClosedError):
                await b.lock("aio").try_acquire()
        with pytest.raises(lockgate.ClientClosedError):
            await a.lock("aio").try_acquire()

    run(main)


def test_each_round_is_logged_with_its_votes(masters: RedisMasters, caplog: pytest.LogCaptureFixture) -> None:
    # The core's redlock.round events reach logging with the votes: a grant on all five
    # masters (decided at three: the others may not have answered yet), a refusal by a holder
    # elsewhere, a release (which hears every master).
    import logging

    caplog.set_level(logging.DEBUG, logger="lockgate")
    with lockgate.Client(masters.url, **SETTINGS) as a, lockgate.Client(masters.url, **SETTINGS) as b:
        lease = a.lock("rounds", MAX_LEASE).acquire(timeout=FIRST)
        assert b.lock("rounds", MAX_LEASE).try_acquire() is None
        lease.release()
    rounds = [
        (r.lockgate_call, r.lockgate_outcome, r.lockgate_masters, r.lockgate_yes + r.lockgate_unanswered, r.lockgate_no)
        for r in caplog.records
        if r.name == "lockgate" and r.lockgate_event == "redlock.round"
    ]
    assert rounds[0] == ("acquire", "granted", 5, 5, 0), rounds
    assert rounds[-1] == ("release", "confirmed", 5, 5, 0), rounds
    (refused,) = [r for r in rounds if r[1] == "refused"]
    assert refused[0] == "acquire" and refused[4] >= 3, rounds
    assert all(r.levelno == logging.DEBUG for r in caplog.records if r.name == "lockgate")

"""Semaphores, read-write locks, leader elections and reentrant locks (blocking API) against a
real redis-server."""

from __future__ import annotations

import threading
import time

import pytest
import redis

import lockgate
from conftest import RedisServer, wait_until


def live_keys(raw: "redis.Redis[bytes]", name: str) -> list[str]:
    """Every key of every primitive named `name`, except the fence counters (kept on purpose)."""
    keys = [k.decode() for k in raw.keys(f"lockgate:{{{name}}}*")]
    return sorted(k for k in keys if not k.endswith(":fence"))


def zcard(raw: "redis.Redis[bytes]", key: str) -> int:
    return int(raw.zcard(key))


# -------------------------------------------------------------------------------------------
# Semaphores
# -------------------------------------------------------------------------------------------


def test_semaphore_permits_are_leases(server: RedisServer) -> None:
    raw = server.raw()
    with lockgate.Client(server.url) as client:
        sem = client.semaphore("pool", 2, wait=5)
        assert isinstance(sem, lockgate.Semaphore) and isinstance(sem, lockgate.Lock)
        assert sem.permits == 2 and sem.name == "pool" and sem.wait == 5.0
        assert repr(sem) == "<lockgate.Semaphore name='pool' permits=2 lease=30.0 renew=True wait=5.0>"
        # One handle holds one permit at a time: a second permit takes a second handle.
        sem2 = client.semaphore("pool", 2, wait=5)
        with sem.acquire(timeout=1) as a, sem2 as b:
            assert a.is_held and b.is_held and a.fencing_token < b.fencing_token
            assert zcard(raw, "lockgate:{pool}:sem:holders") == 2
            third = client.semaphore("pool", 2)
            assert third.try_acquire() is None, "both permits are taken"
            with pytest.raises(lockgate.LockTimeoutError):
                third.acquire(timeout=0.1)
            with pytest.raises(lockgate.AlreadyHeldError):
                sem.try_acquire()
        c = sem.try_acquire()
        assert c is not None and c.fencing_token > b.fencing_token
        assert c.release() is True and c.release() is False
    assert live_keys(raw, "pool") == []
    assert raw.exists("lockgate:{pool}:sem:fence"), "fencing tokens outlive the holders"


def test_semaphore_caps_holders_across_threads(server: RedisServer) -> None:
    clients = [lockgate.Client(server.url) for _ in range(2)]
    # One handle per thread: a handle holds one permit at a time.
    sems = [clients[i % 2].semaphore("tpool", 3) for i in range(6)]
    active = 0
    peak = 0
    guard = threading.Lock()
    errors: list[BaseException] = []

    def worker(sem: lockgate.Semaphore) -> None:
        nonlocal active, peak
        try:
            for _ in range(20):
                with sem.acquire(timeout=30):
                    with guard:
                        active += 1
                        peak = max(peak, active)
                    time.sleep(0.002)
                    with guard:
                        active -= 1
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(sems[i],)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert 2 <= peak <= 3, f"peak {peak} with 3 permits"
    for c in clients:
        c.close()
    assert live_keys(server.raw(), "tpool") == []


# -------------------------------------------------------------------------------------------
# Read-write locks
# -------------------------------------------------------------------------------------------


def test_read_write_lock_readers_share_writers_exclude(server: RedisServer) -> None:
    raw = server.raw()
    with lockgate.Client(server.url) as a, lockgate.Client(server.url) as b:
        rw = a.read_write_lock("doc")
        assert isinstance(rw, lockgate.ReadWriteLock)
        assert rw.name == "doc" and rw.writers_first and not rw.reentrant
        assert rw.read_lock is rw.read_lock, "one handle per half"
        assert repr(rw) == "<lockgate.ReadWriteLock name='doc' writers_first=True reentrant=False>"
        other = b.read_write_lock("doc")
        r1 = rw.read_lock.acquire(timeout=1)
        r2 = other.read_lock.acquire(timeout=1)
        assert r1.is_held and r2.is_held, "readers overlap"
        assert other.write_lock.try_acquire() is None, "a writer waits for the readers"
        with pytest.raises(lockgate.LockTimeoutError):
            other.write_lock.acquire(timeout=0.1)
        # A queued writer blocks readers that arrive after it...
        got: list[lockgate.Lease] = []
        writer = threading.Thread(target=lambda: got.append(other.write_lock.acquire(timeout=10)))
        writer.start()
        wait_until(lambda: zcard(raw, "lockgate:{doc}:rw:queue") == 1, what="the writer to queue")
        late = a.read_write_lock("doc").read_lock
        assert late.try_acquire() is None, "a queued writer blocks new readers"
        with pytest.raises(lockgate.LockTimeoutError):
            late.acquire(timeout=0.1)
        # Every client of the name must agree on writers_first while it is in use (the server
        # records it); readers-first behaviour is test_readers_first_lets_readers_pass below.
        barging = a.read_write_lock("doc", writers_first=False)
        assert not barging.writers_first
        with pytest.raises(lockgate.InvalidArgumentError):
            barging.read_lock.try_acquire()
        r3 = r2
        for r in (r1, r2):
            assert r.release() is True
        writer.join(10)
        (w,) = got
        assert w.is_held and w.fencing_token > r3.fencing_token
        assert rw.read_lock.try_acquire() is None, "the writer excludes readers"
        assert rw.write_lock.try_acquire() is None, "and other writers"
        with w:
            pass
    assert live_keys(raw, "doc") == []


# -------------------------------------------------------------------------------------------
# Leader election
# -------------------------------------------------------------------------------------------


def test_election_one_leader_observe_and_resign_hands_over(server: RedisServer) -> None:
    raw = server.raw()
    with lockgate.Client(server.url) as a, lockgate.Client(server.url) as b:
        ea = a.election("leader", 1.0, renew=True)
        eb = b.election("leader", 1.0, renew=True)
        assert repr(ea) == "<lockgate.Election name='leader' lease=1.0 renew=True>"
        assert ea.observe() is None
        lead = ea.campaign("node-a", timeout=1)
        assert lead.name == "leader" and lead.is_held
        seen = eb.observe()
        assert seen is not None
        assert (seen.value, seen.term) == ("node-a", lead.fencing_token)
        assert 0 < seen.remaining <= 1.0
        assert isinstance(seen, lockgate.LeaderInfo)
        with pytest.raises(AttributeError):
            seen.value = "x"  # type: ignore[misc]
        assert "node-a" in repr(seen)
        # One leader: others wait (or give up).
        assert eb.try_campaign("node-b") is None
        with pytest.raises(lockgate.LockTimeoutError):
            eb.campaign("node-b", timeout=0.1)
        time.sleep(1.3)  # past one lease: the watchdog keeps the leader
        still = eb.observe()
        assert still is not None and still.term == lead.fencing_token
        got: list[lockgate.Lease] = []
        candidate = threading.Thread(target=lambda: got.append(eb.campaign("node-b", timeout=10)))
        candidate.start()
        wait_until(lambda: zcard(raw, "lockgate:{leader}:elect:queue") == 1, what="b to queue")
        assert candidate.is_alive(), "two leaders at once"
        assert lead.release() is True, "resign"
        candidate.join(10)
        (b_lead,) = got
        assert b_lead.fencing_token > lead.fencing_token, "a new leader has a larger term"
        now = ea.observe()
        assert now is not None and (now.value, now.term) == ("node-b", b_lead.fencing_token)
        with b_lead:
            pass
        assert ea.observe() is None
    assert live_keys(raw, "leader") == []


def test_leaving_a_campaign_block_after_lost_leadership_raises(server: RedisServer) -> None:
    raw = server.raw()
    with lockgate.Client(server.url) as client:
        with pytest.raises(lockgate.NotHeldError):
            with client.election("gone", 0.6, renew=True).campaign("me") as lead:
                raw.delete("lockgate:{gone}:elect:holders")
                wait_until(lambda: not lead.is_held, what="the loss")


# -------------------------------------------------------------------------------------------
# Reentrant locks
# -------------------------------------------------------------------------------------------


def test_reentrant_lock_counts_holds(server: RedisServer) -> None:
    raw = server.raw()
    with lockgate.Client(server.url) as client, lockgate.Client(server.url) as other:
        lock = client.lock("re", reentrant=True)
        assert lock.reentrant and not client.lock("re").reentrant
        assert repr(lock) == "<lockgate.Lock name='re' reentrant=True lease=30.0 renew=True wait=None>"
        probe = other.lock("re")
        outer = lock.acquire(timeout=1)
        inner = lock.acquire(timeout=1)
        assert inner.fencing_token == outer.fencing_token, "the same lease, one more hold"
        with lock as third:
            assert third.fencing_token == outer.fencing_token
        assert inner.release() is True
        assert inner.release() is False, "a hold is given back once"
        assert outer.is_held and probe.try_acquire() is None, "held until the last release"
        assert outer.release() is True
        p = probe.try_acquire()
        assert p is not None and p.fencing_token > outer.fencing_token
        # A non-reentrant handle on a held lock waits like anyone else.
        plain = other.lock("re")
        assert plain.try_acquire() is None
        assert p.release() is True
        # After the last release the reentrant handle acquires afresh.
        again = lock.try_acquire()
        assert again is not None and again.fencing_token > p.fencing_token
        assert again.release() is True
    assert live_keys(raw, "re") == []


def test_reentrant_read_write_lock(server: RedisServer) -> None:
    raw = server.raw()
    with lockgate.Client(server.url) as client, lockgate.Client(server.url) as other:
        rw = client.read_write_lock("rre", reentrant=True)
        assert rw.reentrant and rw.read_lock.reentrant and rw.write_lock.reentrant
        with rw.write_lock as w1:
            with rw.write_lock.acquire(timeout=0) as w2:
                assert w2.fencing_token == w1.fencing_token
            assert other.read_write_lock("rre").read_lock.try_acquire() is None
        with rw.read_lock as r1, rw.read_lock as r2:
            assert r1.fencing_token == r2.fencing_token
    assert live_keys(raw, "rre") == []


# -------------------------------------------------------------------------------------------
# Timeouts, bad input
# -------------------------------------------------------------------------------------------


def test_timeouts_leave_no_keys(server: RedisServer) -> None:
    raw = server.raw()
    with lockgate.Client(server.url) as a, lockgate.Client(server.url) as b:
        held = a.semaphore("t", 1).acquire(timeout=1)
        with pytest.raises(lockgate.LockTimeoutError) as ei:
            b.semaphore("t", 1).acquire(timeout=0.2)
        assert ei.value.code == "TIMEOUT" and ei.value.retryable
        assert held.release()
        w = a.read_write_lock("t").write_lock.acquire(timeout=1)
        with pytest.raises(lockgate.LockTimeoutError):
            b.read_write_lock("t").read_lock.acquire(timeout=0.2)
        with pytest.raises(lockgate.LockTimeoutError):
            b.read_write_lock("t").write_lock.acquire(timeout=0.2)
        assert w.release()
        lead = a.election("t").campaign("a", timeout=1)
        with pytest.raises(lockgate.LockTimeoutError):
            b.election("t").campaign("b", timeout=0.2)
        assert lead.release()
        r = a.lock("t", reentrant=True).acquire(timeout=1)
        with pytest.raises(lockgate.LockTimeoutError):
            b.lock("t", reentrant=True).acquire(timeout=0.2)
        assert r.release()
    wait_until(lambda: live_keys(raw, "t") == [], what="every key to go")


@pytest.mark.parametrize("permits", [0, -1, 1_000_001, 2**40])
def test_bad_permits(server: RedisServer, permits: int) -> None:
    with lockgate.Client(server.url) as client:
        with pytest.raises(lockgate.InvalidArgumentError) as ei:
            client.semaphore("s", permits)
        assert ei.value.code == "INVALID_ARGUMENT" and not ei.value.retryable
        assert isinstance(ei.value, ValueError)
        with pytest.raises(TypeError):
            client.semaphore("s", "2")  # type: ignore[arg-type]


def test_bad_primitive_arguments(server: RedisServer) -> None:
    raw = server.raw()
    with lockgate.Client(server.url) as client:
        election = client.election("bad")
        for call in (
            lambda: client.semaphore("", 1),
            lambda: client.semaphore("s", 1, 0),
            lambda: client.semaphore("s", 1).acquire(timeout=-1),
            lambda: client.read_write_lock("").read_lock,
            lambda: client.read_write_lock("rw", -1),
            lambda: client.read_write_lock("rw").write_lock.acquire(timeout=-0.5),
            lambda: client.read_write_lock("rw").read_lock.acquire(timeout=float("nan")),
            lambda: client.lock("m", reentrant=True).acquire(timeout=-1),
            lambda: client.election(""),
            lambda: client.election("e", 0.001),
            lambda: election.campaign("x" * 4097),
            lambda: election.campaign("é" * 2049),  # 4098 bytes
            lambda: election.try_campaign("x" * 4097),
            lambda: election.campaign("node", timeout=-1),
        ):
            with pytest.raises(lockgate.InvalidArgumentError) as ei:
                call()
            assert ei.value.code == "INVALID_ARGUMENT"
        lead = election.campaign("x" * 4096, timeout=1)  # the limit itself is fine
        info = election.observe()
        assert info is not None and info.value == "x" * 4096
        assert lead.release()
    assert live_keys(raw, "bad") == []

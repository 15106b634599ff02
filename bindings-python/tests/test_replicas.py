"""`replica_acks=` (the replica-acknowledged mode) against a real primary and replica the tests
start: a grant counts only once WAIT confirms it reached the replica; with the replica paused
(SIGSTOP, through the test-server launcher) grants fail as connection errors and leave no lock behind."""

from __future__ import annotations

import asyncio
import math
import threading
import time
from typing import Any, Iterator

import pytest

import lockgate
import lockgate.aio
from conftest import ReplicatedRedis, wait_until


def acked(url: str) -> lockgate.Client:
    return lockgate.Client(url, replica_acks=1, replica_ack_timeout=0.2, response_timeout=2)


def live_keys(r: "Any", name: str) -> list[str]:
    """Keys of lock `name` on a server, except the fence counter (kept on purpose)."""
    return sorted(k.decode() for k in r.keys(f"lockgate:{{{name}}}*") if not k.endswith(b":fence"))


@pytest.fixture
def paused(replicated: ReplicatedRedis) -> Iterator[ReplicatedRedis]:
    """The replica paused (SIGSTOP) for the test, resumed (SIGCONT) after, by the launcher."""
    replicated.replica.pause()
    try:
        yield replicated
    finally:
        replicated.replica.resume()


def test_grants_are_confirmed_by_the_replica(replicated: ReplicatedRedis) -> None:
    replica_raw = replicated.replica.raw()
    with acked(replicated.primary.url) as client, acked(replicated.primary.url) as other:
        lock = client.lock("acked", wait=5)
        lease = lock.acquire()
        assert lease.is_held
        # WAIT confirmed it: the replica has the lock key already, no polling needed.
        assert replica_raw.exists("lockgate:{acked}") == 1
        # A waiter in the same mode gets the lock when it is released (its grant confirmed too).
        got: list[lockgate.Lease] = []
        t = threading.Thread(target=lambda: got.append(other.lock("acked").acquire(timeout=10)))
        t.start()
        time.sleep(0.2)
        assert not got
        assert lease.release() is True
        t.join(10)
        assert len(got) == 1 and got[0].fencing_token > lease.fencing_token
        assert replica_raw.exists("lockgate:{acked}") == 1
        got[0].extend(20)  # an extend is confirmed the same way
        assert got[0].release() is True
    wait_until(lambda: live_keys(replica_raw, "acked") == [], what="the release to replicate")


def test_grant_fails_and_is_undone_while_the_replica_is_paused(paused: ReplicatedRedis) -> None:
    primary = paused.primary.raw()
    with acked(paused.primary.url) as client:
        lock = client.lock("unconfirmed")
        started = time.monotonic()
        with pytest.raises(lockgate.LockConnectionError) as ei:
            lock.try_acquire()
        assert ei.value.code == "CONNECTION" and ei.value.retryable
        assert time.monotonic() - started < 2, "WAIT is bounded by replica_ack_timeout"
        wait_until(lambda: live_keys(primary, "unconfirmed") == [], timeout=2,
                   what="the unconfirmed grant to be undone")
        # A waiting acquire keeps trying until its own timeout, then withdraws; no replica
        # acknowledged, so it ends with CONNECTION naming the replicas, not TIMEOUT (issue 23 item 7).
        with pytest.raises(lockgate.LockConnectionError) as t:
            lock.acquire(timeout=0.7)
        assert t.value.code == "CONNECTION" and "replicas" in str(t.value)
        wait_until(lambda: live_keys(primary, "unconfirmed") == [], timeout=2,
                   what="the abandoned wait to be undone")
        # Once the replica is back, grants are confirmed again.
        paused.replica.resume()
        with lock.acquire(timeout=5) as lease:
            assert lease.is_held
            assert paused.replica.raw().exists("lockgate:{unconfirmed}") == 1
    assert live_keys(primary, "unconfirmed") == []


def test_asyncio_grant_fails_while_the_replica_is_paused(paused: ReplicatedRedis) -> None:
    primary = paused.primary.raw()

    async def main() -> None:
        async with lockgate.aio.Client(paused.primary.url, replica_acks=1,
                                       replica_ack_timeout=0.2, response_timeout=2) as client:
            with pytest.raises(lockgate.LockConnectionError):
                await client.lock("aio-unconfirmed").try_acquire()

    asyncio.run(asyncio.wait_for(main(), 30))
    wait_until(lambda: live_keys(primary, "aio-unconfirmed") == [], timeout=2,
               what="the unconfirmed grant to be undone")


def test_without_replica_acks_a_paused_replica_goes_unnoticed(paused: ReplicatedRedis) -> None:
    # The contrast that shows the option is what makes the difference.
    with lockgate.Client(paused.primary.url) as client:
        with client.lock("plain").acquire(timeout=2) as lease:
            assert lease.is_held


@pytest.mark.parametrize(
    "kwargs",
    [
        {"replica_acks": 0},
        {"replica_acks": -1},
        {"replica_acks": 2**40},
        {"replica_acks": 1, "replica_ack_timeout": 0},
        {"replica_acks": 1, "replica_ack_timeout": -1.0},
        {"replica_acks": 1, "replica_ack_timeout": math.nan},
        {"replica_acks": 1, "replica_ack_timeout": math.inf},
        {"replica_acks": 1, "replica_ack_timeout": 0.0004},
        {"replica_acks": 1, "replica_ack_timeout": 5.0},  # not below response_timeout (5 s)
        {"replica_acks": 1, "replica_ack_timeout": 3.0, "response_timeout": 2.0},
        {"replica_ack_timeout": 0.5},  # a timeout without a replica count
        {"replica_acks": 1, "cluster": True},  # WAIT cannot follow a lock's slot
    ],
)
def test_bad_settings_raise_invalid_argument(kwargs: dict[str, Any]) -> None:
    # Checked before any connection: nothing listens on port 1.
    url = "redis://127.0.0.1:1"
    with pytest.raises(lockgate.InvalidArgumentError) as ei:
        lockgate.Client(url, **kwargs)
    assert ei.value.code == "INVALID_ARGUMENT"
    with pytest.raises(lockgate.InvalidArgumentError):
        lockgate.aio.Client(url, **kwargs)


def test_wrong_types_raise_invalid_argument() -> None:
    # Client options pass through to the core's one setter, which checks their types too.
    for kwargs in ({"replica_acks": "2"}, {"cluster": "yes"}, {"replica_acks": 1.5}):
        with pytest.raises(lockgate.InvalidArgumentError) as ei:
            lockgate.Client("redis://127.0.0.1:1", **kwargs)
        assert " must be " in str(ei.value)

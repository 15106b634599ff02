"""The blocking API against a real redis-server."""

from __future__ import annotations

import _thread
import gc
import signal
import threading
import time

import pytest

import lockgate
from conftest import RedisServer, lock_key, queue_len, wait_until


def lost_event(lease: lockgate.Lease) -> tuple[threading.Event, list[lockgate.LockError]]:
    """An event set (with the reason recorded) when `lease` is lost."""
    ev = threading.Event()
    reasons: list[lockgate.LockError] = []

    def cb(reason: lockgate.LockError) -> None:
        reasons.append(reason)
        ev.set()

    lease.on_lost(cb)
    return ev, reasons


def test_acquire_release_and_context_managers(server: RedisServer) -> None:
    raw = server.raw()
    with lockgate.Client(server.url) as client:
        lock = client.lock("cm")
        assert lock.name == "cm" and lock.lease == 30.0 and lock.renew and lock.wait is None
        with lock.acquire(timeout=5) as lease:
            assert lease.is_held and lease.name == "cm"
            assert raw.exists(lock_key("cm"))
            assert client.lock("cm").try_acquire() is None
            with pytest.raises(lockgate.AlreadyHeldError):
                lock.try_acquire()  # this handle holds it: it never waits for itself
        assert not raw.exists(lock_key("cm")), "leaving the block released the lock"
        assert not lease.is_held
        with lock as lease2:
            assert raw.exists(lock_key("cm"))
            assert lease2.fencing_token > lease.fencing_token
        assert not raw.exists(lock_key("cm"))
        # An exception in the block propagates, and the lock is still released.
        with pytest.raises(KeyError):
            with lock.acquire(timeout=5):
                raise KeyError("boom")
        assert not raw.exists(lock_key("cm"))
        # release() inside the block: leaving it is quiet.
        with lock.acquire(timeout=5) as lease3:
            assert lease3.release() is True
            assert lease3.release() is False, "a second release reports not held"


def test_loss_is_signalled_when_key_is_deleted(server: RedisServer) -> None:
    raw = server.raw()
    client = lockgate.Client(server.url)
    lock = client.lock("gone", 0.6, renew=True)
    lease = lock.acquire(timeout=1)
    lost, reasons = lost_event(lease)
    raw.delete(lock_key("gone"))
    assert lost.wait(2), "loss signalled within a lease"
    assert isinstance(reasons[0], lockgate.NotHeldError)
    assert reasons[0].code == "NOT_HELD" and reasons[0].retryable is False
    assert not lease.is_held
    assert isinstance(lease.lost_reason, lockgate.NotHeldError)
    # A callback registered after the loss still hears about it.
    late, _ = lost_event(lease)
    assert late.wait(2)


def test_leaving_a_block_after_a_loss_raises(server: RedisServer) -> None:
    raw = server.raw()
    client = lockgate.Client(server.url)
    lock = client.lock("honest", 0.6, renew=True)
    with pytest.raises(lockgate.NotHeldError):
        with lock.acquire(timeout=1) as lease:
            lost, _ = lost_event(lease)
            raw.delete(lock_key("honest"))
            assert lost.wait(2)
    # ... but never on top of the block's own exception.
    with pytest.raises(ZeroDivisionError):
        with lock.acquire(timeout=1) as lease:
            lost, _ = lost_event(lease)
            raw.delete(lock_key("honest"))
            assert lost.wait(2)
            _ = 1 / 0


def test_no_loss_callback_after_release(server: RedisServer) -> None:
    client = lockgate.Client(server.url)
    lock = client.lock("quiet", 0.2)
    lease = lock.acquire(timeout=1)
    lost, _ = lost_event(lease)
    assert lease.release() is True
    # Past the lease's end: a released lease never reports a loss.
    nxt = lock.acquire(timeout=1)
    nlost, _ = lost_event(nxt)
    assert nlost.wait(2), "the next (unreleased) fixed lease does expire"
    assert not lost.is_set()


def test_waiter_is_woken_by_release_and_lease_crosses_threads(server: RedisServer) -> None:
    a = lockgate.Client(server.url)
    b = lockgate.Client(server.url)
    holder = a.lock("wake").acquire(timeout=1)
    got: list[tuple[float, lockgate.Lease]] = []

    def wait() -> None:
        lease = b.lock("wake").acquire(timeout=20)
        got.append((time.monotonic(), lease))

    t = threading.Thread(target=wait)
    t.start()
    raw = server.raw()
    wait_until(lambda: queue_len(raw, "wake") == 1, what="the waiter to queue")
    released_at = time.monotonic()
    # Released from another thread than the one that acquired: ownership is the lease's.
    r = threading.Thread(target=holder.release)
    r.start()
    r.join()
    t.join(10)
    assert got, "the waiter acquired"
    gap = got[0][0] - released_at
    assert gap < 0.5, f"handoff took {gap:.3f} s"
    assert got[0][1].fencing_token > holder.fencing_token
    assert got[0][1].release() is True


def test_blocking_acquire_releases_the_gil(server: RedisServer) -> None:
    client = lockgate.Client(server.url)
    held = client.lock("gil").acquire(timeout=1)
    other = lockgate.Client(server.url).lock("gil")
    ticks = 0
    stop = threading.Event()

    def spin() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1

    t = threading.Thread(target=spin)
    t.start()
    try:
        with pytest.raises(lockgate.LockTimeoutError):
            other.acquire(timeout=0.3)
    finally:
        stop.set()
        t.join()
    # A GIL-holding wait would have starved the spinner for the whole 0.3 s.
    assert ticks > 10_000, ticks
    held.release()


def test_ctrl_c_interrupts_a_wait_and_leaves_no_queue_entry(server: RedisServer) -> None:
    raw = server.raw()
    client = lockgate.Client(server.url)
    held = client.lock("intr").acquire(timeout=1)
    waiter = lockgate.Client(server.url).lock("intr")
    interrupted_at: list[float] = []

    def interrupt_when_queued() -> None:
        wait_until(lambda: queue_len(raw, "intr") == 1, what="the waiter to queue")
        interrupted_at.append(time.monotonic())
        _thread.interrupt_main()  # what Ctrl-C does

    t = threading.Thread(target=interrupt_when_queued)
    # Under a runner started in the background SIGINT is ignored and interrupt_main() does
    # nothing; install Python's default handler, as an interactive session has it.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    t.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            waiter.acquire(timeout=30)
    finally:
        signal.signal(signal.SIGINT, previous)
    reacted = time.monotonic() - interrupted_at[0]
    t.join()
    assert reacted < 0.5, f"Ctrl-C took {reacted:.3f} s to take effect"
    wait_until(lambda: queue_len(raw, "intr") == 0, what="the abandoned queue entry to go")
    assert held.release() is True
    assert not raw.exists(lock_key("intr")), "the abandoned waiter was not granted the lock"


def test_close_releases_and_refuses_further_use(server: RedisServer) -> None:
    raw = server.raw()
    client = lockgate.Client(server.url)
    lock = client.lock("closing")
    lease = lock.acquire(timeout=1)
    client.close()
    assert not raw.exists(lock_key("closing")), "close released the lease"
    with pytest.raises(lockgate.ClientClosedError) as ei:
        lock.acquire(timeout=1)
    assert ei.value.code == "CLOSED"
    assert not lease.is_held


def test_garbage_collected_lease_is_kept_by_its_handle_or_released(server: RedisServer) -> None:
    raw = server.raw()
    client = lockgate.Client(server.url)
    lock = client.lock("gc")
    lease = lock.acquire(timeout=1)
    del lease
    gc.collect()
    # The handle keeps the lease it took (redis-py's habit of ignoring it stays safe) ...
    time.sleep(0.1)
    assert raw.exists(lock_key("gc")), "a lease collected while its handle lives was released"
    assert lock.release() is True
    assert not raw.exists(lock_key("gc"))
    # ... and a lease no handle keeps (leadership) is released in the background when
    # collected: the next candidate is served once that release lands.
    leadership = client.election("gc-e").campaign("a", timeout=1)
    del leadership
    gc.collect()
    assert client.election("gc-e").campaign("b", timeout=5).release() is True


def test_key_prefix_is_used(server: RedisServer) -> None:
    raw = server.raw()
    client = lockgate.Client(server.url, key_prefix="app1:")
    assert client.key_prefix == "app1:"
    with client.lock("p").acquire(timeout=1):
        assert raw.exists(lock_key("p", prefix="app1:"))
        assert not raw.exists(lock_key("p"))


def test_loss_callback_may_use_the_blocking_api(server: RedisServer) -> None:
    raw = server.raw()
    client = lockgate.Client(server.url)
    lease = client.lock("cb", 0.6, renew=True).acquire(timeout=1)
    done = threading.Event()
    seen: list[object] = []

    def cb(reason: lockgate.LockError) -> None:
        # Re-acquire from inside the callback: it runs off the runtime's workers.
        again = client.lock("cb").acquire(timeout=5)
        seen.append(again.release())
        done.set()

    lease.on_lost(cb)
    raw.delete(lock_key("cb"))
    assert done.wait(5)
    assert seen == [True]

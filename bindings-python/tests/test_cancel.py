"""`lock.cancel()` ends a blocked sync `acquire` from another thread, at once, and leaves
nothing queued on the server."""

from __future__ import annotations

import threading
import time
from typing import Optional

import lockgate
from conftest import RedisServer, lock_key, queue_len, wait_until


def test_cancel_ends_a_blocked_acquire_from_another_thread(server: RedisServer) -> None:
    raw = server.raw()
    holder = lockgate.Client(server.url).lock("cancel").acquire(timeout=1)
    lock = lockgate.Client(server.url).lock("cancel")
    caught: list[lockgate.LockError] = []
    ended_at: list[float] = []

    def wait(use_with: bool) -> None:
        try:
            if use_with:
                with lock:
                    pass
            else:
                lock.acquire(timeout=30)
        except lockgate.LockError as e:
            caught.append(e)
        ended_at.append(time.monotonic())

    for use_with in (False, True):
        caught.clear()
        ended_at.clear()
        t = threading.Thread(target=wait, args=(use_with,))
        t.start()
        wait_until(lambda: queue_len(raw, "cancel") == 1, what="the waiter to queue")
        cancelled_at = time.monotonic()
        lock.cancel()
        t.join(5)
        assert not t.is_alive(), "the cancelled acquire kept waiting"
        assert ended_at[0] - cancelled_at < 0.5, "cancel took too long to take effect"
        assert len(caught) == 1 and isinstance(caught[0], lockgate.LockCancelledError)
        assert caught[0].code == "CANCELLED" and caught[0].retryable is False
        wait_until(lambda: queue_len(raw, "cancel") == 0, what="the cancelled entry to go")
    assert holder.release() is True
    time.sleep(0.1)
    assert not raw.exists(lock_key("cancel")), "a cancelled waiter was granted the lock"
    assert not lock.owned()
    # A cancel ends only the waits in progress: the handle works afterwards.
    lease: Optional[lockgate.Lease] = lock.acquire(timeout=1)
    assert lease is not None and lease.release() is True


def test_cancel_without_a_wait_is_harmless(server: RedisServer) -> None:
    lock = lockgate.Client(server.url).lock("cancel-idle")
    lock.cancel()
    assert lock.acquire(timeout=1).release() is True

"""Several processes: mutual exclusion, fork safety, a real Ctrl-C."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import lockgate
from _workers import counter_worker
from conftest import RedisServer, lock_key, queue_len, wait_until


def test_processes_lose_no_updates_on_a_shared_counter(server: RedisServer) -> None:
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as pool:
        results = pool.starmap(counter_worker, [(server.url, 25)] * 4)
    raw = server.raw()
    assert int(raw.get("counter") or 0) == 100, "an update was lost: two holders overlapped"
    for tokens in results:
        assert tokens == sorted(tokens), "a process's tokens increase"
    assert len({t for ts in results for t in ts}) == 100, "every grant has its own token"
    for suffix in ("", ":queue", ":waiters"):
        assert not raw.exists(lock_key("counter") + suffix), f"{suffix} left behind"


def _child_after_fork(url: str, parent_lock: lockgate.Lock, q: "multiprocessing.Queue[str]") -> None:
    try:
        parent_lock.acquire(timeout=1)
        q.put("parent handle worked in the child")
    except lockgate.ClientClosedError:
        q.put("refused")
    client = lockgate.Client(url)
    with client.lock("forked").acquire(timeout=5) as lease:
        q.put(f"held {lease.fencing_token}")


@pytest.mark.skipif(sys.platform != "linux", reason="fork() is the Linux default")
def test_forked_child_gets_its_own_runtime(server: RedisServer) -> None:
    client = lockgate.Client(server.url)  # starts the runtime in the parent
    lock = client.lock("forked")
    lock.acquire(timeout=1).release()
    ctx = multiprocessing.get_context("fork")
    q: multiprocessing.Queue[str] = ctx.Queue()
    p = ctx.Process(target=_child_after_fork, args=(server.url, lock, q))
    p.start()
    p.join(30)
    assert p.exitcode == 0
    assert q.get(timeout=1) == "refused", "a handle from before the fork must not hang"
    assert q.get(timeout=1).startswith("held ")
    assert lock.acquire(timeout=1).release() is True, "the parent's client still works"


def test_sigint_to_a_blocked_process_leaves_no_queue_entry(server: RedisServer) -> None:
    raw = server.raw()
    client = lockgate.Client(server.url)
    held = client.lock("sigint").acquire(timeout=1)
    script = textwrap.dedent(
        f"""
        import signal
        # A shell that starts us in the background (as CI may) leaves SIGINT ignored; a person's
        # Ctrl-C in a terminal is what this test is about, so restore the default handler.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        import lockgate
        lock = lockgate.Client({server.url!r}).lock("sigint")
        try:
            lock.acquire(timeout=60)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            raise SystemExit(3)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: queue_len(raw, "sigint") == 1, timeout=10, what="the child to queue")
        sent = time.monotonic()
        os.kill(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=10)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3 and "interrupted" in out
    assert took < 2, f"Ctrl-C took {took:.2f} s"
    wait_until(lambda: queue_len(raw, "sigint") == 0, what="the abandoned entry to go")
    assert held.release() is True
    assert not raw.exists(lock_key("sigint"))


def test_a_process_exiting_with_a_held_lease_frees_it_at_once(server: RedisServer) -> None:
    raw = server.raw()
    # The lease is still referenced at exit (a module global): the exit hook releases it
    # instead of leaving the lock held for its 30 s lease. Several runs: exit order varies.
    script = textwrap.dedent(
        f"""
        import lockgate
        client = lockgate.Client({server.url!r})
        lease = client.lock("exiting").acquire(timeout=5)
        print(lease.fencing_token, flush=True)
        """
    )
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             timeout=30, check=True)
        assert int(out.stdout) > 0
        assert not raw.exists(lock_key("exiting")), "the lock outlived its holder's process"

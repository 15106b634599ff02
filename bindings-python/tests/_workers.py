"""Functions run in child processes by the tests (importable by multiprocessing's spawn)."""

from __future__ import annotations

import time

import redis

import lockgate


def counter_worker(url: str, rounds: int) -> list[int]:
    """Increments `counter` with a non-atomic GET/SET inside the lock `rounds` times."""
    client = lockgate.Client(url)
    raw = redis.Redis.from_url(url)
    lock = client.lock("counter")
    tokens = []
    for _ in range(rounds):
        with lock.acquire(timeout=30) as lease:
            tokens.append(lease.fencing_token)
            v = int(raw.get("counter") or 0)
            time.sleep(0.001)  # widen the race window a lock must close
            raw.set("counter", v + 1)
    client.close()
    return tokens


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


def semaphore_worker(url: str, permits: int, rounds: int) -> list[int]:
    """Holds a permit of semaphore `pool` `rounds` times; inside, counts the holders with an
    atomic INCR/DECR on `active` and returns the counts it saw on entering."""
    client = lockgate.Client(url)
    raw = redis.Redis.from_url(url)
    sem = client.semaphore("pool", permits)
    seen = []
    for _ in range(rounds):
        with sem.acquire(timeout=30):
            seen.append(int(raw.incr("active")))
            time.sleep(0.003)  # let others try to enter meanwhile
            raw.decr("active")
    client.close()
    return seen

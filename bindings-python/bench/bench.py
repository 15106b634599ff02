"""lockgate (Python) vs redis-py's Lock and python-redis-lock, on one redis-server, in one run.

1. Uncontended acquire+release pairs per second (sync and asyncio), one client, one lock name.
   The libraries run in interleaved rounds (A B C..., A B C...), so a burst of load from
   elsewhere on the (shared) machine hits every row alike; each row shows its best round (the
   least disturbed) and its median round.
2. Contended handoff with 4 processes: each loops acquire → hold 1 ms → release → 1 ms outside.
   A handoff is the time from one process starting its release to another process's acquire
   returning (CLOCK_MONOTONIC is system-wide, so the processes' stamps compare).

Every library runs with its defaults apart from a 30 s lease: lockgate's default lock (30 s
lease renewed by a watchdog, FIFO grants pushed to the next waiter), redis-py
``Lock(timeout=30)`` (a blocked acquire polls every 0.1 s, its default ``sleep``),
python-redis-lock ``Lock(expire=30)`` (a blocked acquire waits in BLPOP on a signal list).

3. Telemetry off vs on (OpenTelemetry, DEBUG logging) against floors that record the same, in
   a child process alone on CPU 0 with the server on the last CPU (`taskset`) where it can be.

Usage: python bench.py --out python.md [--pairs N] [--rounds R] [--handoffs-per-process K]
                       [--telemetry-rounds T]
It starts (and stops, by pid) its own redis-server on a free loopback port.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import multiprocessing
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from typing import Any, Callable, NamedTuple

import redis
import redis.asyncio
import redis_lock

import lockgate
import lockgate.aio

LEASE = 30  # seconds, for every library


# ------------------------------------------------------------------------------- the server


class Server:
    def __init__(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.dir = tempfile.mkdtemp(prefix="lockgate-bench-")
        self.proc = subprocess.Popen(
            [os.environ.get("LOCKGATE_REDIS_SERVER", "redis-server"), "--port", str(self.port),
             "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", self.dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis(port=self.port).ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        self.url = f"redis://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


# ---------------------------------------------------------------------- 1. uncontended pairs


class Pairs(NamedTuple):
    """A row's round: pairs per second, and this process's CPU time per pair (every thread's:
    the client's driver and telemetry threads and the SDK's too, not the server's)."""

    per_s: float
    cpu_s: float


class Stopwatch:
    """Wall-clock and process CPU time from its making to [`pairs`]."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def pairs(self, n: int) -> Pairs:
        return Pairs(n / (time.perf_counter() - self.wall), (time.process_time() - self.cpu) / n)


def pairs_lockgate_sync(url: str, n: int) -> Pairs:
    with lockgate.Client(url) as client:
        lock = client.lock("bench-u-lg")
        lock.acquire(timeout=5).release()  # warm: connection, subscription, scripts
        watch = Stopwatch()
        for _ in range(n):
            lock.acquire(timeout=5).release()
        return watch.pairs(n)


def pairs_lockgate_aio(url: str, n: int) -> Pairs:
    async def main() -> Pairs:
        async with lockgate.aio.Client(url) as client:
            lock = client.lock("bench-u-lga")
            await (await lock.acquire(timeout=5)).release()
            watch = Stopwatch()
            for _ in range(n):
                lease = await lock.acquire(timeout=5)
                await lease.release()
            return watch.pairs(n)

    return asyncio.run(main())


def pairs_redis_py(url: str, n: int) -> Pairs:
    r = redis.Redis.from_url(url)
    lock = r.lock("bench-u-rp", timeout=LEASE)
    lock.acquire(blocking_timeout=5)
    lock.release()
    watch = Stopwatch()
    for _ in range(n):
        lock.acquire(blocking_timeout=5)
        lock.release()
    rate = watch.pairs(n)
    r.close()
    return rate


def pairs_redis_py_aio(url: str, n: int) -> Pairs:
    async def main() -> Pairs:
        r = redis.asyncio.Redis.from_url(url)
        lock = r.lock("bench-u-rpa", timeout=LEASE)
        await lock.acquire(blocking_timeout=5)
        await lock.release()
        watch = Stopwatch()
        for _ in range(n):
            await lock.acquire(blocking_timeout=5)
            await lock.release()
        rate = watch.pairs(n)
        await r.aclose()
        return rate

    return asyncio.run(main())


def pairs_python_redis_lock(url: str, n: int) -> Pairs:
    r = redis.Redis.from_url(url)
    lock = redis_lock.Lock(r, "bench-u-prl", expire=LEASE)
    lock.acquire()
    lock.release()
    watch = Stopwatch()
    for _ in range(n):
        lock.acquire()
        lock.release()
    rate = watch.pairs(n)
    r.close()
    return rate


class _DebugTo:
    """Logger ``name`` at DEBUG with a handler formatting every record (to /dev/null) while
    entered, as an application turning telemetry on would have it."""

    def __init__(self, name: str) -> None:
        self.logger = logging.getLogger(name)

    def __enter__(self) -> logging.Logger:
        self.sink = open(os.devnull, "w")
        self.handler = logging.StreamHandler(self.sink)
        self.handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s %(lockgate_event)s"))
        self.before = (self.logger.level, self.logger.propagate)
        self.logger.addHandler(self.handler)
        self.logger.setLevel(logging.DEBUG)
        self.logger.propagate = False
        return self.logger

    def __exit__(self, *_: object) -> None:
        self.logger.removeHandler(self.handler)
        self.logger.setLevel(self.before[0])
        self.logger.propagate = self.before[1]
        self.sink.close()


def pairs_lockgate_telemetry_on(url: str, n: int) -> Pairs:
    """lockgate's sync pairs with its telemetry fully on: logger ``lockgate`` at DEBUG with a
    handler that formats every record (to /dev/null)."""
    with _DebugTo("lockgate"):
        return pairs_lockgate_sync(url, n)


def pairs_lockgate_own_records(url: str, n: int) -> Pairs:
    """The floor of DEBUG logging: lockgate's sync pairs with telemetry off, and the records
    lockgate makes per pair with it on (acquire started, granted, lease released: message,
    the same ``extra`` fields, no caller location) made by the application itself the way
    lockgate makes them (the logger asked whether DEBUG is on, ``makeRecord``, ``handle``)
    through a logger of its own with the same handler. What Python's ``logging`` costs for
    those records, whoever makes them. (``log.debug`` would also search the stack for the
    caller, which lockgate's records skip: a floor that did would be about 4 µs a record
    dearer and flatter lockgate.)"""
    with _DebugTo("bench.records") as log, lockgate.Client(url) as client:
        lock = client.lock("bench-u-lgr")
        base = {"lockgate_backend": "redis", "lockgate_primitive": "mutex"}
        started = {**base, "lockgate_event": "acquire.started"}
        released = {**base, "lockgate_event": "lease.released"}
        name, debug, nowhere, nofunc = log.name, logging.DEBUG, "(unknown file)", "(unknown function)"

        def record(msg: str, extra: dict[str, Any]) -> None:
            if log.isEnabledFor(debug):
                log.handle(log.makeRecord(name, debug, nowhere, 0, msg, (), None, nofunc, extra))

        lock.acquire(timeout=5).release()
        watch = Stopwatch()
        for _ in range(n):
            t0 = time.perf_counter()
            record("acquire started", started)
            lease = lock.acquire(timeout=5)
            waited = time.perf_counter() - t0
            record("acquire granted", {**base, "lockgate_event": "acquire.granted", "lockgate_wait_s": waited, "lockgate_queued": False})
            lease.release()
            record("lease released", {**released, "lockgate_held_s": time.perf_counter() - t0 - waited})
        return watch.pairs(n)


def pairs_lockgate_otel_on(url: str, n: int) -> Pairs:
    """lockgate's sync pairs with every metric and span recorded through the OpenTelemetry SDK
    (``lockgate.otel.instrument()``: an in-memory metric reader, a batch span processor into an
    in-memory exporter, as an application exporting them would have)."""
    import lockgate.otel
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    reader = InMemoryMetricReader()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(InMemorySpanExporter()))
    lockgate.otel.instrument(meter_provider=MeterProvider(metric_readers=[reader]), tracer_provider=tracer_provider)
    try:
        return pairs_lockgate_sync(url, n)
    finally:
        lockgate.otel.uninstrument()
        reader.get_metrics_data()
        tracer_provider.shutdown()


def pairs_lockgate_own_otel(url: str, n: int) -> Pairs:
    """The floor of OpenTelemetry: lockgate's sync pairs with telemetry off, and what lockgate
    records per pair with it on (a wait and a hold histogram sample, one ``lockgate.acquire``
    span with its attributes; its counters are summed natively and read at collection) recorded
    by the application itself through the same SDK set-up."""
    from opentelemetry.context import Context
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    reader = InMemoryMetricReader()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(InMemorySpanExporter()))
    meter = MeterProvider(metric_readers=[reader]).get_meter("bench")
    tracer = tracer_provider.get_tracer("bench")
    wait, held = meter.create_histogram("bench.wait", unit="s"), meter.create_histogram("bench.held", unit="s")
    attrs = {"lockgate.backend": "redis", "lockgate.primitive": "mutex"}
    # Made once, as an application recording the same series would keep them.
    span_attrs = wait_attrs = {**attrs, "lockgate.outcome": "granted"}
    try:
        with lockgate.Client(url) as client:
            lock = client.lock("bench-u-lgo")
            lock.acquire(timeout=5).release()
            watch = Stopwatch()
            for _ in range(n):
                t0, start_ns = time.perf_counter(), time.time_ns()
                lease = lock.acquire(timeout=5)
                waited = time.perf_counter() - t0
                wait.record(waited, wait_attrs)
                tracer.start_span("lockgate.acquire", context=Context(), start_time=start_ns, attributes=span_attrs).end()
                lease.release()
                held.record(time.perf_counter() - t0 - waited, attrs)
            return watch.pairs(n)
    finally:
        reader.get_metrics_data()
        tracer_provider.shutdown()


UNCONTENDED: list[tuple[str, str, Callable[[str, int], Pairs]]] = [
    ("lockgate", "sync", pairs_lockgate_sync),
    ("redis-py `Lock`", "sync", pairs_redis_py),
    ("python-redis-lock", "sync", pairs_python_redis_lock),
    ("lockgate", "asyncio", pairs_lockgate_aio),
    ("redis-py `redis.asyncio` `Lock`", "asyncio", pairs_redis_py_aio),
]


# The telemetry rows (issue 27): off, each way of turning it on, and each one's floor. They run
# in a process of their own (`--telemetry-child`), alone on CPU 0 with the redis-server on the
# last CPU where `taskset` and a second CPU allow: unpinned on a shared 2-core machine, where
# the caller, the client's driver, the telemetry thread and the server land from round to round
# moved a round's rate by a third either way, several times what is being measured.
TELEMETRY: list[tuple[str, Callable[[str, int], Pairs]]] = [
    ("off", pairs_lockgate_sync),
    ("OpenTelemetry on", pairs_lockgate_otel_on),
    ("OpenTelemetry floor", pairs_lockgate_own_otel),
    ("DEBUG logging", pairs_lockgate_telemetry_on),
    ("DEBUG logging floor", pairs_lockgate_own_records),
]


def telemetry_rounds(url: str, pairs: int, rounds: int) -> dict[str, list[Pairs]]:
    """Every telemetry row, `rounds` interleaved rounds, each round starting one row later."""
    out: dict[str, list[Pairs]] = {name: [] for name, _ in TELEMETRY}
    for rnd in range(rounds):
        k = rnd % len(TELEMETRY)
        for name, fn in TELEMETRY[k:] + TELEMETRY[:k]:
            gc.collect()  # what the row before left (spans, providers), collected now
            out[name].append(fn(url, pairs))
    return out


def telemetry_pinned(server: Server, pairs: int, rounds: int) -> tuple[dict[str, list[Pairs]], str]:
    """The telemetry rows in a child process on CPU 0 with the server on the last CPU, or here,
    unpinned, where that cannot be done; and where they ran."""
    cpus = os.cpu_count() or 1
    if cpus >= 2 and shutil.which("taskset"):
        everywhere = os.sched_getaffinity(server.proc.pid)
        try:
            os.sched_setaffinity(server.proc.pid, {cpus - 1})
            child = subprocess.run(
                ["taskset", "-c", "0", sys.executable, os.path.abspath(__file__), "--telemetry-child",
                 server.url, str(pairs), str(rounds)],
                stdout=subprocess.PIPE, text=True, check=False,
            )
        finally:
            os.sched_setaffinity(server.proc.pid, everywhere)
        if child.returncode == 0:
            got = json.loads(child.stdout)
            return ({k: [Pairs(*p) for p in v] for k, v in got.items()},
                    f"this benchmark's child process alone on CPU 0 and the redis-server on CPU {cpus - 1} (`taskset`)")
    return telemetry_rounds(server.url, pairs, rounds), "unpinned: `taskset` or a second CPU was not available"


# -------------------------------------------------------------------- 2. contended handoff

HOLD = 0.001
OUTSIDE = 0.001


def _hold_loop(acquire: Callable[[], Any], release: Callable[[Any], Any], k: int,
               start_at: float) -> list[tuple[int, int]]:
    """Returns (acquired_ns, release_started_ns) per turn."""
    while time.monotonic() < start_at:
        time.sleep(0.001)
    out = []
    for _ in range(k):
        held = acquire()
        got = time.monotonic_ns()
        time.sleep(HOLD)
        rel = time.monotonic_ns()
        release(held)
        out.append((got, rel))
        time.sleep(OUTSIDE)
    return out


def contend_lockgate(url: str, k: int, start_at: float) -> list[tuple[int, int]]:
    client = lockgate.Client(url)
    lock = client.lock("bench-c-lg")
    warm = lock.try_acquire()  # warm up the connection and subscription
    if warm is not None:
        warm.release()  # the handle keeps a lease until it is released
    r = _hold_loop(lambda: lock.acquire(timeout=60), lambda lease: lease.release(), k, start_at)
    client.close()
    return r


def contend_redis_py(url: str, k: int, start_at: float) -> list[tuple[int, int]]:
    conn = redis.Redis.from_url(url)
    lock = conn.lock("bench-c-rp", timeout=LEASE)
    conn.ping()

    def acquire() -> None:
        assert lock.acquire(blocking_timeout=60)

    return _hold_loop(acquire, lambda _: lock.release(), k, start_at)


def contend_python_redis_lock(url: str, k: int, start_at: float) -> list[tuple[int, int]]:
    conn = redis.Redis.from_url(url)
    lock = redis_lock.Lock(conn, "bench-c-prl", expire=LEASE)
    conn.ping()

    def acquire() -> None:
        assert lock.acquire(timeout=LEASE)  # it refuses a wait longer than the lease

    return _hold_loop(acquire, lambda _: lock.release(), k, start_at)


CONTENDED: list[tuple[str, Callable[[str, int, float], list[tuple[int, int]]]]] = [
    ("lockgate", contend_lockgate),
    ("redis-py `Lock`", contend_redis_py),
    ("python-redis-lock", contend_python_redis_lock),
]


def handoffs(per_process: list[list[tuple[int, int]]]) -> tuple[list[float], int]:
    """Handoff latencies in ms between different processes, and the number of turns."""
    turns = sorted((got, rel, p) for p, recs in enumerate(per_process) for got, rel in recs)
    out = []
    for (_, prev_rel, prev_p), (got, _, p) in zip(turns, turns[1:]):
        if got < prev_rel:
            raise AssertionError("two processes held the lock at once")
        if p != prev_p:
            out.append((got - prev_rel) / 1e6)
    return out, len(turns)


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


# ------------------------------------------------------------------------------------ main


def telemetry_section(tel: dict[str, list[Pairs]], placement: str, pairs: int, rounds: int) -> list[str]:
    """The telemetry rows' table and lockgate's own share of each way of turning it on."""
    rates = {k: [p.per_s for p in v] for k, v in tel.items()}
    cpus = {k: [p.cpu_s for p in v] for k, v in tel.items()}
    best = {k: max(v) for k, v in rates.items()}
    med = {k: statistics.median(v) for k, v in rates.items()}
    cpu = {k: statistics.median(v) for k, v in cpus.items()}
    lines = [
        "",
        f"**Telemetry off vs on** (issue 27): uncontended sync pairs, {rounds} interleaved rounds of "
        f"{pairs} pairs per row, each row on a client of its own; {placement}. On: every metric "
        "and acquire span through the OpenTelemetry SDK (`lockgate.otel.instrument()`; an "
        "in-memory metric reader and a batch span processor), or logger `lockgate` at DEBUG with "
        "a handler formatting every record (to /dev/null); off: the default (WARNING: no DEBUG "
        "record is made, nothing recorded). Target: at most 3 % slower. CPU µs a pair: the "
        "process's CPU time (every thread's: the caller's, the client's driver and telemetry "
        "threads, the SDK's span processor; not the server's) over the round's pairs, the median "
        "round; it counts the caller's short spin before it parks for a reply.",
        "",
        "| telemetry | pairs/s, best | pairs/s, median | cost (best) | cost (median) | CPU µs a pair, median | CPU cost (median) |",
        "|---|---:|---:|---:|---:|---:|---:|",
        f"| off (default) | {best['off']:,.0f} | {med['off']:,.0f} | | | {cpu['off'] * 1e6:.1f} | |",
    ]
    labels = {
        "OpenTelemetry on": "OpenTelemetry metrics and spans",
        "OpenTelemetry floor": "floor: the same samples and span recorded by the application (telemetry off)",
        "DEBUG logging": "DEBUG logging",
        "DEBUG logging floor": "floor: the same 3 DEBUG records a pair made by the application as lockgate makes them (telemetry off)",
    }
    for row, label in labels.items():
        lines.append(
            f"| {label} | {best[row]:,.0f} | {med[row]:,.0f} | {(best['off'] / best[row] - 1) * 100:+.1f} % | "
            f"{(med['off'] / med[row] - 1) * 100:+.1f} % | {cpu[row] * 1e6:.1f} | {(cpu[row] / cpu['off'] - 1) * 100:+.1f} % |"
        )

    def share(on: str, floor: str) -> str:
        # Per round: the rows ran seconds apart, so a round's own share is free of the drift
        # between rounds that best-against-best and median-against-median carry.
        rounds_ = sorted(o / a - o / f for o, a, f in zip(rates["off"], rates[on], rates[floor]))
        # CPU time a pair is not slowed by other processes as a pair's wall-clock time is.
        by_cpu = sorted((a - f) / c for c, a, f in zip(cpus["off"], cpus[on], cpus[floor]))
        return (
            f"{statistics.median(rounds_) * 100:+.1f} % of a pair, the median of the rounds' own "
            f"shares (range {rounds_[0] * 100:+.1f} to {rounds_[-1] * 100:+.1f}); best against best "
            f"{(best['off'] / best[on] - best['off'] / best[floor]) * 100:+.1f} %, median against median "
            f"{(med['off'] / med[on] - med['off'] / med[floor]) * 100:+.1f} %; by CPU time, "
            f"{statistics.median(by_cpu) * 100:+.1f} % of an off pair's CPU time, the median of the rounds "
            f"(range {by_cpu[0] * 100:+.1f} to {by_cpu[-1] * 100:+.1f}; {(cpu[on] - cpu[floor]) * 1e6:.1f} µs a pair)"
        )

    return lines + [
        "",
        "Each floor row is what the SDK or Python's `logging` costs for what lockgate records, "
        "whoever records it; lockgate's own share is its cost less the floor's (target: at most "
        f"3 %). OpenTelemetry: {share('OpenTelemetry on', 'OpenTelemetry floor')}. "
        f"DEBUG logging: {share('DEBUG logging', 'DEBUG logging floor')}.",
    ]


def version(pkg: str) -> str:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--pairs", type=int, default=1000, help="pairs per round (default 1000)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--handoffs-per-process", type=int, default=100)
    ap.add_argument("--telemetry-rounds", type=int, default=41, help="rounds of the telemetry rows (default 41)")
    ap.add_argument("--command", default="bindings-python/ci.sh bench")
    if sys.argv[1:2] == ["--telemetry-child"]:
        url, pairs, rounds = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        json.dump({k: [tuple(p) for p in v] for k, v in telemetry_rounds(url, pairs, rounds).items()}, sys.stdout)
        return
    args = ap.parse_args()

    server = Server()
    try:
        rates: dict[tuple[str, str], list[float]] = {(n, a): [] for n, a, _ in UNCONTENDED}
        for rnd in range(args.rounds):
            # Each round starts one row later, so no row always follows the same one (a row run
            # right after another that left threads or garbage behind pays for it).
            k = rnd % len(UNCONTENDED)
            for name, api, fn in UNCONTENDED[k:] + UNCONTENDED[:k]:
                # What the row before left for the collector (the OpenTelemetry rows' spans and
                # providers) is collected now, not during this row's pairs.
                gc.collect()
                got = fn(server.url, args.pairs)
                rates[(name, api)].append(got.per_s)
                print(f"round {rnd + 1}: {name} ({api}): {got.per_s:,.0f} pairs/s, "
                      f"{got.cpu_s * 1e6:.1f} µs CPU a pair", file=sys.stderr)

        ctx = multiprocessing.get_context("spawn")
        contended = {}
        with ctx.Pool(4) as pool:
            for name, contend in CONTENDED:
                start_at = time.monotonic() + 1.0  # every process is up and connected by then
                recs = pool.starmap(contend, [(server.url, args.handoffs_per_process, start_at)] * 4)
                lat, turns = handoffs(recs)
                contended[name] = (lat, turns)
                print(f"contended {name}: {len(lat)} handoffs of {turns} turns, "
                      f"p50 {percentile(lat, 0.5):.2f} ms, p99 {percentile(lat, 0.99):.2f} ms",
                      file=sys.stderr)
        tel, placement = telemetry_pinned(server, args.pairs, args.telemetry_rounds)
        redis_version = redis.Redis(port=server.port).info()["redis_version"]
    finally:
        server.stop()

    best = {k: max(v) for k, v in rates.items()}
    med = {k: statistics.median(v) for k, v in rates.items()}
    lines = [
        "## Python binding: lockgate vs redis-py `Lock` and python-redis-lock",
        "",
        f"Command: `{args.command}` (runs `python bindings-python/bench/bench.py --pairs {args.pairs} "
        f"--rounds {args.rounds} --handoffs-per-process {args.handoffs_per_process} "
        f"--telemetry-rounds {args.telemetry_rounds}`), "
        f"on {time.strftime('%Y-%m-%d', time.gmtime())}: CPython {platform.python_version()}, "
        f"{os.cpu_count()} cores, redis-server {redis_version} on loopback (started by the "
        f"benchmark), lockgate {lockgate.__version__}, redis-py {version('redis')}, "
        f"python-redis-lock {version('python-redis-lock')}. Every library keeps a 30 s lease: "
        "lockgate's default lock (renewed by its watchdog), `redis.lock.Lock(timeout=30)`, "
        "`redis_lock.Lock(expire=30)`; everything else is each library's default.",
        "",
        f"**Uncontended acquire + release**, one client, one process; {args.rounds} interleaved "
        f"rounds of {args.pairs} pairs per library: the best round (least disturbed by the rest "
        "of the shared machine) and the median round (higher is better).",
        "",
        "| library | API | pairs/s, best | lockgate is (best) | pairs/s, median | lockgate is (median) |",
        "|---|---|---:|---:|---:|---:|",
    ]

    def rel(ours: float, theirs: float) -> str:
        return f"{ours / theirs:.2f}× faster" if ours >= theirs else f"{theirs / ours:.2f}× slower"

    for name, api, _ in UNCONTENDED:
        if name == "lockgate":
            lines.append(f"| {name} | {api} | {best[(name, api)]:,.0f} | — | {med[(name, api)]:,.0f} | — |")
        else:
            lines.append(
                f"| {name} | {api} | {best[(name, api)]:,.0f} | "
                f"{rel(best[('lockgate', api)], best[(name, api)])} | {med[(name, api)]:,.0f} | "
                f"{rel(med[('lockgate', api)], med[(name, api)])} |"
            )
    lines += telemetry_section(tel, placement, args.pairs, args.telemetry_rounds)
    lines += [
        "",
        f"**Contended handoff**, 4 processes × {args.handoffs_per_process} turns on one lock, "
        f"each turn holding {HOLD * 1000:.0f} ms then {OUTSIDE * 1000:.0f} ms outside: time from "
        "one process starting its release to another process's acquire returning (lower is "
        "better). A turn taken again by the process that just released is not a handoff; the "
        "count of real handoffs shows how fairly each library passes the lock on.",
        "",
        "| library | handoffs / turns | p50 ms | p99 ms |",
        "|---|---:|---:|---:|",
    ]
    for name, _ in CONTENDED:
        lat, turns = contended[name]
        if lat:
            lines.append(f"| {name} | {len(lat)} / {turns} | {percentile(lat, 0.5):.2f} | "
                         f"{percentile(lat, 0.99):.2f} |")
        else:
            lines.append(f"| {name} | 0 / {turns} | — | — |")
    lines += [
        "",
        "How each waits: lockgate queues waiters in arrival order and the release grants the lock "
        "to the next one and wakes only it (a RESP3 push); redis-py retries `SET NX` every 0.1 s "
        "(its default `sleep`); python-redis-lock blocks in `BLPOP` on a signal list that the "
        "release pushes to, then retries `SET NX`.",
        "",
    ]
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()

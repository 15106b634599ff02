"""lockgate (Python) on memcached vs the seed's naive add/delete loop and tooz's memcached lock,
in one run on one memcached server (issue 29).

1. Uncontended acquire+release pairs per second, one client, one lock, interleaved rounds
   (A B C, A B C, ...): the best and the median round; and the commands the server counted per
   pair (``stats``: gets + sets/adds/cas + deletes + touches, over 200 pairs; lockgate's one
   ``stats`` per grant is added, memcached does not count it).
2. Contended: 4 and 16 processes, one client each, loop acquire → hold ~1 ms → release →
   acquire again at once, for ``--seconds`` after 0.5 s of warm-up: acquisitions per second,
   handoff p50/p99 (one holder starting its release → the next holder's acquire returning;
   CLOCK_MONOTONIC is system-wide), Jain's index over the processes' acquisition counts, and
   commands per acquisition (as above, over the window).

The three locks:
- lockgate: ``lockgate.Client(url, max_lease=2)`` (a short deployment max lease, so the fresh
  server grants after ~5 s; the lease defaults to it, renewed by the watchdog), ``lock.acquire``.
- naive: seed 004's recipe on pymemcache: ``add(key, token, expire=30)`` until it is stored,
  1 ms between tries (as the SQL bench's naive lock), ``delete(key)`` to release (no owner check).
- tooz: ``tooz.coordination.get_coordinator('memcached://...')``, ``coord.get_lock(name)``,
  its defaults (``acquire(blocking=True)`` retries ``add`` with tenacity's exponential wait
  capped at 1 s; release reads the value and ``delete``\\ s: not atomic).

Usage: python bench_memcached.py --out python-memcached.md [--pairs N] [--rounds R] [--seconds S]
The memcached server comes from the project's launcher (target/release/test-servers memcached,
or $LOCKGATE_TEST_SERVERS) and is stopped through it.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
import uuid
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

from pymemcache.client.base import Client as MemcacheClient
from tooz import coordination

import lockgate

LAUNCHER = os.environ.get("LOCKGATE_TEST_SERVERS") or str(
    Path(__file__).resolve().parents[2] / "target/release/test-servers")
HOLD = 0.001
WORKERS = (4, 16)
MAX_LEASE = 2.0
NAIVE_RETRY = 0.001


class Memcached:
    """One memcached server of the launcher; closing the launcher's stdin stops it."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([LAUNCHER, "memcached"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            raise RuntimeError(f"test-servers memcached did not start (exit status {self.proc.returncode})")
        self.info: dict[str, Any] = json.loads(line)
        self.url = str(self.info["url"])
        self.port = int(self.info["nodes"][0]["port"])

    def stats(self) -> dict[str, str]:
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            s.sendall(b"stats\r\n")
            data = b""
            while not data.endswith(b"END\r\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        out = {}
        for line in data.decode().splitlines():
            parts = line.split(" ")
            if len(parts) == 3 and parts[0] == "STAT":
                out[parts[1]] = parts[2]
        return out

    def commands(self) -> int:
        """Commands the server counts: gets, stores (set/add/cas), deletes, touches."""
        s = self.stats()
        return sum(int(s.get(k, 0)) for k in ("cmd_get", "cmd_set", "delete_hits", "delete_misses", "cmd_touch"))

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(timeout=30)


# ------------------------------------------------------------------------- the three locks


class LockgateLocker:
    #: lockgate sends one `stats` per grant, which memcached does not count.
    uncounted_per_grant = 1

    def __init__(self, url: str, port: int, name: str) -> None:
        self.client = lockgate.Client(url, max_lease=MAX_LEASE)
        self.lock = self.client.lock(name)
        self.lease: Any = None

    def acquire(self) -> None:
        self.lease = self.lock.acquire(timeout=60)

    def release(self) -> None:
        self.lease.release()

    def close(self) -> None:
        self.client.close()


class NaiveLocker:
    uncounted_per_grant = 0

    def __init__(self, url: str, port: int, name: str) -> None:
        self.mc = MemcacheClient(("127.0.0.1", port))
        self.key = f"naive:{name}"
        self.token = uuid.uuid4().hex

    def acquire(self) -> None:
        while not self.mc.add(self.key, self.token, expire=30, noreply=False):
            time.sleep(NAIVE_RETRY)

    def release(self) -> None:
        self.mc.delete(self.key, noreply=False)

    def close(self) -> None:
        self.mc.close()


class ToozLocker:
    uncounted_per_grant = 0

    def __init__(self, url: str, port: int, name: str) -> None:
        self.coord = coordination.get_coordinator(f"memcached://127.0.0.1:{port}", uuid.uuid4().hex.encode())
        self.coord.start()
        self.lock = self.coord.get_lock(name.encode())

    def acquire(self) -> None:
        if not self.lock.acquire(blocking=True):
            raise RuntimeError("tooz did not acquire")

    def release(self) -> None:
        self.lock.release()

    def close(self) -> None:
        self.coord.stop()


LIBS: dict[str, Callable[[str, int, str], Any]] = {
    "lockgate": LockgateLocker,
    "naive `add`/`delete` loop": NaiveLocker,
    "tooz `MemcachedLock`": ToozLocker,
}


# ------------------------------------------------------------------------------ uncontended


def uncontended(lib: str, mc: Memcached, name: str, pairs: int) -> float:
    locker = LIBS[lib](mc.url, mc.port, name)
    try:
        for _ in range(50):
            locker.acquire()
            locker.release()
        t = time.perf_counter()
        for _ in range(pairs):
            locker.acquire()
            locker.release()
        return pairs / (time.perf_counter() - t)
    finally:
        locker.close()


def commands_per_pair(lib: str, mc: Memcached, name: str, n: int = 200) -> float:
    locker = LIBS[lib](mc.url, mc.port, name)
    try:
        for _ in range(20):
            locker.acquire()
            locker.release()
        before = mc.commands()
        for _ in range(n):
            locker.acquire()
            locker.release()
        return (mc.commands() - before) / n + locker.uncounted_per_grant
    finally:
        locker.close()


# -------------------------------------------------------------------------------- contended


def worker(lib: str, url: str, port: int, name: str, ready: Any, window: Any, wid: int) -> list[tuple[int, int, int]]:
    locker = LIBS[lib](url, port, name)
    try:
        ready.put(wid)
        while "until" not in window:
            time.sleep(0.005)
        start_from, until = float(window["from"]), float(window["until"])
        out = []
        from_ns, until_ns = int(start_from * 1e9), int(until * 1e9)
        while time.monotonic() < until:
            locker.acquire()
            got = time.monotonic_ns()
            time.sleep(HOLD)
            rel = time.monotonic_ns()
            locker.release()
            if from_ns <= got < until_ns:
                out.append((got, rel, wid))
        return out
    finally:
        locker.close()


def percentile(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


def contended(lib: str, mc: Memcached, name: str, workers: int, seconds: float) -> dict[str, float]:
    ctx = multiprocessing.get_context("spawn")
    manager = ctx.Manager()
    ready, window = manager.Queue(), manager.dict()
    with ctx.Pool(workers) as pool:
        res = pool.starmap_async(worker, [(lib, mc.url, mc.port, name, ready, window, w) for w in range(workers)])
        for _ in range(workers):
            ready.get(timeout=120)
        start_from = time.monotonic() + 0.5
        until = start_from + seconds
        window.update({"from": start_from, "until": until})
        time.sleep(max(0.0, start_from - time.monotonic()))
        before = mc.commands()
        time.sleep(max(0.0, until - time.monotonic()))
        after = mc.commands()
        recs = sorted(r for per in res.get(timeout=180) for r in per)
    manager.shutdown()
    gaps, retaken = [], 0
    for (_, prev_rel, prev_w), (got, _, w) in zip(recs, recs[1:]):
        if got < prev_rel:
            raise AssertionError(f"{lib}: two holders at once")
        gaps.append((got - prev_rel) / 1e3)
        retaken += w == prev_w
    counts = [0] * workers
    for _, _, w in recs:
        counts[w] += 1
    sq = sum(c * c for c in counts)
    n = len(recs)
    extra = LIBS[lib].uncounted_per_grant
    return {
        "per_s": n / seconds,
        "p50": percentile(gaps, 0.5),
        "p99": percentile(gaps, 0.99),
        "jain": (sum(counts) ** 2 / (workers * sq)) if sq else float("nan"),
        "commands": (after - before) / n + extra if n else float("nan"),
        "retaken": retaken / (n - 1) if n > 1 else 0.0,
        "n": n,
    }


# ------------------------------------------------------------------------------------ main


def ratio(ours: float, theirs: float, higher_is_better: bool) -> str:
    if not ours or not theirs or ours != ours or theirs != theirs:
        return "—"
    better = ours >= theirs if higher_is_better else ours <= theirs
    r = ours / theirs if higher_is_better else theirs / ours
    if abs(r - 1) < 0.005:
        return "equal"
    return f"{r:.2f}× better" if better else f"{1 / r:.2f}× worse"


def version(pkg: str) -> str:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--pairs", type=int, default=500, help="pairs per round (default 500)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3.0, help="contended window per row (default 3)")
    ap.add_argument("--command", default="bindings-python/ci.sh bench")
    args = ap.parse_args()

    mc = Memcached()
    try:
        # A fresh server grants lockgate nothing for max_lease (plus memcached's uptime slack).
        while int(mc.stats().get("uptime", 0)) < MAX_LEASE + 4:
            time.sleep(0.2)
        commands = {lib: commands_per_pair(lib, mc, f"bench-u-cmd-{i}") for i, lib in enumerate(LIBS)}
        rates: dict[str, list[float]] = {lib: [] for lib in LIBS}
        for rnd in range(args.rounds):
            for i, lib in enumerate(LIBS):
                rate = uncontended(lib, mc, f"bench-u-{i}-{rnd}", args.pairs)
                rates[lib].append(rate)
                print(f"round {rnd + 1}: {lib}: {rate:,.0f} pairs/s", file=sys.stderr)
        cont: dict[tuple[str, int], dict[str, float]] = {}
        names = list(LIBS)
        for workers in WORKERS:
            for run in range(2):
                for lib in (names if run == 0 else names[::-1]):
                    c = contended(lib, mc, f"bench-c-{names.index(lib)}-{workers}-{run}", workers, args.seconds)
                    if (lib, workers) not in cont or c["per_s"] > cont[(lib, workers)]["per_s"]:
                        cont[(lib, workers)] = c
                    print(f"contended {lib}, {workers} processes, run {run + 1}: {c['per_s']:,.0f} acq/s, p50 "
                          f"{c['p50']:.0f} µs, p99 {c['p99']:.0f} µs, Jain {c['jain']:.3f}, {c['commands']:.1f} "
                          "commands/acq", file=sys.stderr)
        server_version = mc.stats().get("version", "?")
    finally:
        mc.close()

    ours = names[0]
    med = {lib: statistics.median(v) for lib, v in rates.items()}
    lines = [
        "## Python binding on memcached: lockgate vs the naive `add`/`delete` loop and tooz",
        "",
        f"Command: `{args.command}` (runs `python bindings-python/bench/bench_memcached.py --pairs {args.pairs} "
        f"--rounds {args.rounds} --seconds {args.seconds:g}`), on {time.strftime('%Y-%m-%d', time.gmtime())}: "
        f"CPython {platform.python_version()}, {os.cpu_count()} cores (shared), one memcached {server_version} on "
        f"loopback from the project's launcher, lockgate {lockgate.__version__} (`max_lease={MAX_LEASE:g}` s, its "
        f"default lease), pymemcache {version('pymemcache')} for the naive loop (seed 004: `add` until stored, "
        f"{NAIVE_RETRY * 1000:g} ms between tries, `delete` to release), tooz {version('tooz')} "
        "(`get_coordinator('memcached://…')`, `get_lock(name)`, defaults). One client per process for each.",
        "",
        f"**Uncontended acquire + release**, one client, one process; {args.rounds} interleaved rounds of "
        f"{args.pairs} pairs per library (after 50 warm-up pairs): best and median round (higher is better). "
        "Commands per pair: what the server counted (`cmd_get` + `cmd_set` + deletes + touches) over 200 pairs, "
        "plus lockgate's one `stats` per grant (memcached does not count it).",
        "",
        "| library | pairs/s, best | pairs/s, median | commands per pair | lockgate is (median) |",
        "|---|---:|---:|---:|---:|",
    ]
    for lib in LIBS:
        lines.append(f"| {lib} | {max(rates[lib]):,.0f} | {med[lib]:,.0f} | {commands[lib]:.1f} | "
                     f"{'—' if lib == ours else ratio(med[ours], med[lib], True)} |")
    lines += [
        "",
        f"**Contended**: one lock, 4 and 16 processes loop acquire → hold ~1 ms → release → acquire again at once, "
        f"measured for {args.seconds:g} s after every process is connected; two runs per row (libraries interleaved "
        "A B C, C B A), the row shows the run with more acquisitions. Handoff = one holder starting its release "
        "→ the next holder's acquire returning. Jain = (Σx)² / (n·Σx²) over the processes' acquisition counts "
        "(1.0 = perfectly even). Commands per acquisition: as above, over the window.",
        "",
        "| processes | library | acquisitions/s | handoff p50 | handoff p99 | Jain | commands per acquisition "
        "| re-taken by releaser |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for workers in WORKERS:
        for lib in LIBS:
            c = cont[(lib, workers)]
            lines.append(f"| {workers} | {lib} | {c['per_s']:,.0f} | {c['p50']:,.0f} µs | {c['p99']:,.0f} µs | "
                         f"{c['jain']:.3f} | {c['commands']:.1f} | {100 * c['retaken']:.1f}% |")
    for theirs in names[1:]:
        parts = [f"uncontended {ratio(med[ours], med[theirs], True)}"]
        for workers in WORKERS:
            a, b = cont[(ours, workers)], cont[(theirs, workers)]
            parts.append(f"{workers} processes: acquisitions/s {ratio(a['per_s'], b['per_s'], True)}, handoff p50 "
                         f"{ratio(a['p50'], b['p50'], False)}, p99 {ratio(a['p99'], b['p99'], False)}, Jain "
                         f"{a['jain']:.3f} vs {b['jain']:.3f}, commands {ratio(a['commands'], b['commands'], False)}")
        lines += ["", f"lockgate against {theirs}, row by row: " + "; ".join(parts) + "."]
    lines.append("")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()

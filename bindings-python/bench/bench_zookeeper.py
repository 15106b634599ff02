"""lockgate (Python) vs kazoo's ``Lock`` on one ZooKeeper server, in one run (issue 15).

1. Uncontended acquire+release pairs per second, one client, one lock path, interleaved rounds
   (A B, A B, ...): the best round and the median round; and the ZooKeeper requests the server
   received per pair (its ``srvr`` "Received" count, over 200 pairs).
2. Contended: 4 and 16 processes, one client (one ZooKeeper session) each, loop acquire →
   hold ~1 ms → release → acquire again at once, for ``--seconds`` after 0.5 s of warm-up:
   acquisitions per second, handoff p50/p99 (one holder starting its release → the next
   holder's acquire returning; CLOCK_MONOTONIC is system-wide, so the processes' stamps
   compare), Jain's index over the processes' acquisition counts, and ZooKeeper requests per
   acquisition (``srvr`` over the window, pings included).

Both libraries run with their defaults: lockgate's default lock (its default session timeout),
kazoo ``KazooClient(hosts=...)`` with ``client.Lock(path)`` reused across acquisitions (as
``with lock:`` does).

Usage: python bench_zookeeper.py --out python-zookeeper.md [--pairs N] [--rounds R] [--seconds S]
The ZooKeeper server comes from the project's launcher (target/release/test-servers zookeeper,
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
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

import kazoo
from kazoo.client import KazooClient

import lockgate

LAUNCHER = os.environ.get("LOCKGATE_TEST_SERVERS") or str(
    Path(__file__).resolve().parents[2] / "target/release/test-servers")
HOLD = 0.001
WORKERS = (4, 16)


class ZooKeeper:
    """One ZooKeeper server of the launcher; closing the launcher's stdin stops it, by pid."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([LAUNCHER, "zookeeper"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            raise RuntimeError(f"test-servers zookeeper did not start (exit status {self.proc.returncode})")
        self.info: dict[str, Any] = json.loads(line)
        self.url = str(self.info["url"])
        rest = self.url.split("://", 1)[1].split("/", 1)[0]
        self.hosts = rest.rsplit("@", 1)[-1]
        self.member = self.hosts.split(",")[0]

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(timeout=30)


def four_letter(member: str, cmd: str) -> str:
    host, port = member.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=5) as s:
            s.sendall(cmd.encode())
            chunks = []
            while True:
                b = s.recv(65536)
                if not b:
                    break
                chunks.append(b)
        return b"".join(chunks).decode()
    except OSError:
        return ""


def received(member: str) -> int:
    """Requests the server received so far (`srvr`), or -1 if it refuses four-letter words."""
    for line in four_letter(member, "srvr").splitlines():
        if line.startswith("Received:"):
            return int(line.split(":", 1)[1])
    return -1


# ------------------------------------------------------------------------- the two libraries


class LockgateLocker:
    def __init__(self, url: str, hosts: str, path: str) -> None:
        self.client = lockgate.Client(url)
        self.lock = self.client.lock(path)
        self.lease: Any = None

    def acquire(self) -> None:
        self.lease = self.lock.acquire(timeout=60)

    def release(self) -> None:
        self.lease.release()

    def close(self) -> None:
        self.client.close()


class KazooLocker:
    def __init__(self, url: str, hosts: str, path: str) -> None:
        self.zk = KazooClient(hosts=hosts)
        self.zk.start(timeout=15)
        self.lock = self.zk.Lock(path)

    def acquire(self) -> None:
        if not self.lock.acquire(timeout=60):
            raise RuntimeError("kazoo did not acquire")

    def release(self) -> None:
        self.lock.release()

    def close(self) -> None:
        self.zk.stop()
        self.zk.close()


LIBS: dict[str, Callable[[str, str, str], Any]] = {
    "lockgate": LockgateLocker,
    "kazoo `Lock`": KazooLocker,
}


# ------------------------------------------------------------------------------ uncontended


def uncontended(lib: str, zk: ZooKeeper, path: str, pairs: int) -> float:
    locker = LIBS[lib](zk.url, zk.hosts, path)
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


def requests_per_pair(lib: str, zk: ZooKeeper, path: str, n: int = 200) -> float:
    locker = LIBS[lib](zk.url, zk.hosts, path)
    try:
        for _ in range(20):
            locker.acquire()
            locker.release()
        before = received(zk.member)
        for _ in range(n):
            locker.acquire()
            locker.release()
        return (received(zk.member) - before - 1) / n  # minus the first srvr itself
    finally:
        locker.close()


# -------------------------------------------------------------------------------- contended


def worker(lib: str, url: str, hosts: str, path: str, ready: Any, window: Any, wid: int) -> list[tuple[int, int, int]]:
    locker = LIBS[lib](url, hosts, path)
    try:
        ready.put(wid)
        while "until" not in window:  # the window opens once every process is connected
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


def contended(lib: str, zk: ZooKeeper, path: str, workers: int, seconds: float) -> dict[str, float]:
    ctx = multiprocessing.get_context("spawn")
    manager = ctx.Manager()
    ready, window = manager.Queue(), manager.dict()
    with ctx.Pool(workers) as pool:
        res = pool.starmap_async(worker, [(lib, zk.url, zk.hosts, path, ready, window, w) for w in range(workers)])
        for _ in range(workers):
            ready.get(timeout=120)
        start_from = time.monotonic() + 0.5  # 0.5 s of contention before the measured window
        until = start_from + seconds
        window.update({"from": start_from, "until": until})
        time.sleep(max(0.0, start_from - time.monotonic()))
        before = received(zk.member)
        time.sleep(max(0.0, until - time.monotonic()))
        after = received(zk.member)
        recs = sorted(r for per in res.get(timeout=120) for r in per)
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
    return {
        "per_s": n / seconds,
        "p50": percentile(gaps, 0.5),
        "p99": percentile(gaps, 0.99),
        "jain": (sum(counts) ** 2 / (workers * sq)) if sq else float("nan"),
        "requests": (after - before - 1) / n if n and before >= 0 else float("nan"),
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
    ap.add_argument("--only", choices=["lockgate", "kazoo"], help="measure one library alone (development)")
    args = ap.parse_args()
    if args.only:
        for lib in list(LIBS):
            if not lib.startswith(args.only):
                del LIBS[lib]

    zk = ZooKeeper()
    try:
        requests = {lib: requests_per_pair(lib, zk, f"/bench-py/u-req-{i}") for i, lib in enumerate(LIBS)}
        rates: dict[str, list[float]] = {lib: [] for lib in LIBS}
        for rnd in range(args.rounds):
            for i, lib in enumerate(LIBS):
                rate = uncontended(lib, zk, f"/bench-py/u-{i}-{rnd}", args.pairs)
                rates[lib].append(rate)
                print(f"round {rnd + 1}: {lib}: {rate:,.0f} pairs/s", file=sys.stderr)
        cont: dict[tuple[str, int], dict[str, float]] = {}
        # Two runs per row, interleaved A B then B A; the row keeps the run with more acquisitions
        # (the one less disturbed by the rest of the shared machine).
        names = list(LIBS)
        for workers in WORKERS:
            for run in range(2):
                for lib in (names if run == 0 else names[::-1]):
                    c = contended(lib, zk, f"/bench-py/c-{names.index(lib)}-{workers}-{run}", workers, args.seconds)
                    if (lib, workers) not in cont or c["per_s"] > cont[(lib, workers)]["per_s"]:
                        cont[(lib, workers)] = c
                    print(f"contended {lib}, {workers} processes, run {run + 1}: {c['per_s']:,.0f} acq/s, p50 "
                          f"{c['p50']:.0f} µs, p99 {c['p99']:.0f} µs, Jain {c['jain']:.3f}, {c['requests']:.1f} "
                          "requests/acq", file=sys.stderr)
        srvr = four_letter(zk.member, "srvr")
    finally:
        zk.close()

    zk_version = "?"
    for line in srvr.splitlines():
        if line.startswith("Zookeeper version:"):
            zk_version = line.split(":", 1)[1].strip().split("-")[0].split(",")[0]
    ours = list(LIBS)[0]
    med = {lib: statistics.median(v) for lib, v in rates.items()}
    lines = [
        "## Python binding on ZooKeeper: lockgate vs kazoo `Lock`",
        "",
        f"Command: `{args.command}` (runs `python bindings-python/bench/bench_zookeeper.py --pairs {args.pairs} "
        f"--rounds {args.rounds} --seconds {args.seconds:g}`), on {time.strftime('%Y-%m-%d', time.gmtime())}: "
        f"CPython {platform.python_version()}, {os.cpu_count()} cores (shared), one ZooKeeper {zk_version} server on "
        f"loopback from the project's launcher, lockgate {lockgate.__version__}, kazoo {version('kazoo')} "
        "(`KazooClient(hosts)` defaults, one `client.Lock(path)` reused). One client (one ZooKeeper session) per "
        "process for both.",
        "",
        f"**Uncontended acquire + release**, one client, one process; {args.rounds} interleaved rounds of "
        f"{args.pairs} pairs per library (after 50 warm-up pairs): best and median round (higher is better). "
        "Requests: what the server received per pair (`srvr`), over 200 pairs.",
        "",
        "| library | pairs/s, best | pairs/s, median | ZooKeeper requests per pair | lockgate is (median) |",
        "|---|---:|---:|---:|---:|",
    ]
    for lib in LIBS:
        lines.append(f"| {lib} | {max(rates[lib]):,.0f} | {med[lib]:,.0f} | {requests[lib]:.1f} | "
                     f"{'—' if lib == ours else ratio(med[ours], med[lib], True)} |")
    lines += [
        "",
        f"**Contended**: one lock, 4 and 16 processes loop acquire → hold ~1 ms → release → acquire again at once, "
        f"measured for {args.seconds:g} s after every process is connected; two runs per row (libraries interleaved "
        "A B, B A), the row shows the run with more acquisitions. Handoff = one holder starting its release "
        "→ the next holder's acquire returning. Jain = (Σx)² / (n·Σx²) over the processes' acquisition counts (1.0 = "
        "perfectly even). Requests per acquisition: what the server received over the window (`srvr`, pings "
        "included) divided by the acquisitions.",
        "",
        "| processes | library | acquisitions/s | handoff p50 | handoff p99 | Jain | ZooKeeper requests per acquisition "
        "| re-taken by releaser |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for workers in WORKERS:
        for lib in LIBS:
            c = cont[(lib, workers)]
            lines.append(f"| {workers} | {lib} | {c['per_s']:,.0f} | {c['p50']:,.0f} µs | {c['p99']:,.0f} µs | "
                         f"{c['jain']:.3f} | {c['requests']:.1f} | {100 * c['retaken']:.1f}% |")
    if len(LIBS) == 2:
        theirs = list(LIBS)[1]
        parts = [f"uncontended {ratio(med[ours], med[theirs], True)}"]
        for workers in WORKERS:
            a, b = cont[(ours, workers)], cont[(theirs, workers)]
            parts.append(f"{workers} processes: acquisitions/s {ratio(a['per_s'], b['per_s'], True)}, handoff p50 "
                         f"{ratio(a['p50'], b['p50'], False)}, p99 {ratio(a['p99'], b['p99'], False)}, requests "
                         f"{ratio(a['requests'], b['requests'], False)}")
        lines += ["", "lockgate against kazoo, row by row: " + "; ".join(parts) + "."]
    lines.append("")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()

"""Issue 26's benchmark: the cost of `lockgate run NAME -- true` (start to exit, wall time) per
backend, against `flock -x` on a local file and `etcdctl lock NAME true`, on servers from the
project's launcher. Prints one Markdown section (scripts/bench_cli.sh).

`lockgate --version` is the floor of starting the binary; "beyond the start" is a run's median
minus that floor: connecting, the grant, starting `true`, the release. Medians of --runs runs
after 3 warm-up runs, uncontended (one name per backend, nothing else holding it)."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def timed(cmd, env=None):
    start = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    took = time.perf_counter() - start
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.decode(errors='replace')}")
    return took


def median_ms(cmd, runs):
    for _ in range(3):
        timed(cmd)
    return statistics.median(timed(cmd) for _ in range(runs)) * 1000


class Servers:
    def __init__(self, launcher, kind):
        self.p = subprocess.Popen([launcher, kind], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.info = json.loads(self.p.stdout.readline())

    def close(self):
        self.p.stdin.close()
        self.p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lockgate", required=True)
    ap.add_argument("--launcher", required=True)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--command", default="scripts/bench_cli.sh")
    a = ap.parse_args()
    runs = a.runs
    floor = median_ms([a.lockgate, "--version"], runs)
    rows = []
    for kind, label in [
        ("single", "Redis"),
        ("zookeeper", "ZooKeeper"),
        ("etcd", "etcd"),
        ("postgres", "PostgreSQL"),
        ("mariadb", "MariaDB"),
        ("memcached", "memcached"),
    ]:
        s = Servers(a.launcher, kind)
        try:
            ms = median_ms([a.lockgate, "run", "bench-cli", "--url", s.info["url"], "--", "true"], runs)
            rows.append((f"`lockgate run bench-cli -- true` on {label}", ms, ms - floor))
            if kind == "etcd":
                endpoints = s.info["endpoints"]
                ms = median_ms(["etcdctl", f"--endpoints={endpoints}", "lock", "bench-cli-etcdctl", "true"], runs)
                rows.append(("`etcdctl lock bench-cli-etcdctl true` (etcd 3.4's own, no kill on loss)", ms, None))
        finally:
            s.close()
    with tempfile.NamedTemporaryFile() as f:
        ms = median_ms(["flock", "-x", f.name, "true"], runs)
        rows.append(("`flock -x FILE true` (one host only)", ms, None))
    out = ["## The `lockgate` command: `lockgate run NAME -- true` (issue 26)\n"]
    out.append(f"Command: `{a.command}`\n")
    out.append(
        f"Wall time from start to exit of one uncontended run, median of {runs} after 3 warm-up runs, one server per backend from the "
        f"project's launcher on loopback, {os.cpu_count()} cores (shared). `lockgate --version` (starting the binary) takes "
        f"{floor:.1f} ms: \"beyond the start\" is the rest (connecting, the grant, starting `true`, the release).\n"
    )
    out.append("| command | median | beyond the start |")
    out.append("|---|---|---|")
    for name, ms, beyond in rows:
        out.append(f"| {name} | {ms:.1f} ms | {'' if beyond is None else f'{beyond:.1f} ms'} |")
    print("\n".join(out))


main()

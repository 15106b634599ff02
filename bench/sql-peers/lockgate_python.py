"""lockgate through its Python binding (bindings-python, installed by its ci.sh) on MariaDB, the
row that compares it with PyPI `PyMySQLLock` in the same language (lockgate-bench bench-sql).

The same modes and output as mysql_pymysqllock.py; the token is the lease's fencing token.
  pairs  --url URL --name NAME --pairs N
  worker --url URL --name NAME --hold-us H --start-ns NS --duration-ms MS
"""
import sys
import time

import lockgate


def parse_args():
    a = {"mode": sys.argv[1] if len(sys.argv) > 1 else ""}
    rest = sys.argv[2:]
    for k, v in zip(rest[::2], rest[1::2]):
        a[k.lstrip("-")] = v
    return a


def pairs(a):
    client = lockgate.Client(a["url"])
    lock = client.lock(a["name"])
    n = int(a["pairs"])
    t = time.perf_counter()
    for i in range(50 + n):
        if i == 50:
            t = time.perf_counter()
        lease = lock.acquire(timeout=5)
        if not lease.release():
            raise SystemExit("an uncontended lease was lost")
    print(f"{n / (time.perf_counter() - t):.1f}")
    client.close()


def worker(a):
    client = lockgate.Client(a["url"])
    lock = client.lock(a["name"])
    hold = int(a["hold-us"]) / 1e6
    start = int(a["start-ns"])
    end = start + int(a["duration-ms"]) * 1_000_000
    ahead = start - time.time_ns()
    if ahead > 2_000_000:
        time.sleep((ahead - 1_000_000) / 1e9)
    while time.time_ns() < start:
        pass
    lines = []
    while time.time_ns() < end:
        wait_start = time.time_ns()
        lease = lock.acquire(timeout=120)
        acquired = time.time_ns()
        spin = time.perf_counter()
        while time.perf_counter() - spin < hold:
            pass
        release_start = time.time_ns()
        lease.release()
        lines.append(f"0 {lease.fencing_token} {wait_start} {acquired} {release_start}")
    client.close()
    sys.stdout.write("".join(line + "\n" for line in lines))


if __name__ == "__main__":
    args = parse_args()
    {"pairs": pairs, "worker": worker}.get(args["mode"], lambda _: sys.exit("usage: pairs | worker"))(args)

"""The MariaDB/MySQL peer of the SQL benchmark (scripts/bench_sql.sh, lockgate-bench bench-sql).

PyPI `PyMySQLLock` 0.2.0 with PyMySQL, the most used GET_LOCK mutex for Python (each acquire
opens a connection of its own and runs GET_LOCK on it; release runs RELEASE_LOCK and closes it),
used as its README shows. Prints what lockgate-bench's own bench worker prints, so one parser reads
both:
  pairs  --url URL --name NAME --pairs N   -> uncontended acquire()+release() pairs per second
                                              (after 50 warm-up pairs), one number
  worker --url URL --name NAME --hold-us H --start-ns NS --duration-ms MS
         -> from wall-clock NS for MS: acquire, hold ~H us (spinning), release, at once again;
            then one line per holding: `0 count wait_start acquired release_start` (ns; the
            library has no fencing token, so the second field is this process's own count).
"""
import sys
import time
from urllib.parse import unquote, urlsplit

from PyMySQLLock import Locker


def parse_args():
    a = {"mode": sys.argv[1] if len(sys.argv) > 1 else ""}
    rest = sys.argv[2:]
    for k, v in zip(rest[::2], rest[1::2]):
        a[k.lstrip("-")] = v
    return a


def locker(url):
    """A Locker from a mysql://user[:password]@host:port/database URL.

    Plaintext like every other row of the bench (ssl_disabled): PyMySQL 1.2 otherwise builds a
    TLS context for every connection (~20-40 ms here), which PyMySQLLock opens per acquire.
    """
    u = urlsplit(url)
    kw = {"host": u.hostname, "port": u.port or 3306, "user": unquote(u.username or "root"), "ssl_disabled": True}
    if u.password:
        kw["password"] = unquote(u.password)
    if u.path.strip("/"):
        kw["database"] = u.path.strip("/")
    return Locker(**kw)


def pairs(a):
    lock = locker(a["url"]).lock(a["name"])
    n = int(a["pairs"])
    t = time.perf_counter()
    for i in range(50 + n):
        if i == 50:
            t = time.perf_counter()
        if not lock.acquire(timeout=5):
            raise SystemExit("an uncontended acquire timed out")
        lock.release()
    print(f"{n / (time.perf_counter() - t):.1f}")


def worker(a):
    lock = locker(a["url"]).lock(a["name"])
    hold = int(a["hold-us"]) / 1e6
    start = int(a["start-ns"])
    end = start + int(a["duration-ms"]) * 1_000_000
    ahead = start - time.time_ns()
    if ahead > 2_000_000:
        time.sleep((ahead - 1_000_000) / 1e9)
    while time.time_ns() < start:
        pass
    lines = []
    count = 0
    while time.time_ns() < end:
        wait_start = time.time_ns()
        if not lock.acquire(timeout=120):
            raise SystemExit("acquire timed out after 120 s")
        acquired = time.time_ns()
        spin = time.perf_counter()
        while time.perf_counter() - spin < hold:
            pass
        release_start = time.time_ns()
        lock.release()
        count += 1
        lines.append(f"0 {count} {wait_start} {acquired} {release_start}")
    sys.stdout.write("".join(line + "\n" for line in lines))


if __name__ == "__main__":
    args = parse_args()
    {"pairs": pairs, "worker": worker}.get(args["mode"], lambda _: sys.exit("usage: pairs | worker"))(args)

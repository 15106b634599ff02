"""The report half of scripts/bench-compare.sh: reads the Markdown each benchmark harness wrote
(<run-dir>/<side>-r<round>/<part>.md), takes the uncontended and contended rows of lockgate,
and prints a "Before/after" section of BENCHMARKS.md. Also splices that section into
BENCHMARKS.md (--splice: it replaces the section of the same base and head, and keeps the other
comparisons' sections) and reads them all back out (--extract, for ./run bench, which rewrites
the rest of the file).

The row patterns follow the tables the harnesses print (cli/src/bench.rs, bench.py, bench.js,
JvmBench.java); a harness whose table changes shape shows up here as a row with no figures.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Optional

HEADING = "## Before/after:"
BAND = 1.10  # a row is flagged when the head is more than 10 % slower than the base

NUM = r"([\d,]+(?:\.\d+)?)"
DUR = r"([\d.]+ (?:ns|µs|ms|s))"


def number(text: str) -> float:
    return float(text.replace(",", ""))


def micros(text: str) -> float:
    value, unit = text.split()
    return float(value) * {"ns": 1e-3, "µs": 1.0, "ms": 1e3, "s": 1e6}[unit]


class Row:
    """One figure: which file, a regex over its lines, which group, and how to read it."""

    def __init__(self, part: str, label: str, pattern: str, group: int, unit: str,
                 higher_better: bool, reference: bool = False,
                 parse: Callable[[str], float] = number, after: Optional[str] = None) -> None:
        self.part, self.label, self.unit = part, label, unit
        self.regex = re.compile(pattern)
        self.group, self.higher_better, self.reference = group, higher_better, reference
        self.parse, self.after = parse, after

    def read(self, text: str) -> Optional[float]:
        lines = text.splitlines()
        if self.after is not None:  # only lines after the heading that starts with `after`
            starts = [i for i, line in enumerate(lines) if line.startswith(self.after)]
            lines = lines[starts[0] + 1:] if starts else []
        for line in lines:
            m = self.regex.match(line)
            if m:
                return self.parse(m.group(self.group))
        return None


def contended_core(workers: int) -> list[Row]:
    pat = rf"^\| {workers} \| {NUM} \| {DUR} \| {DUR} \|"
    after = "### Contended"
    return [
        Row("core", f"contended, {workers} workers: acquisitions/s", pat, 1, "/s", True, after=after),
        Row("core", f"contended, {workers} workers: handoff p50", pat, 2, "µs", False, parse=micros, after=after),
        Row("core", f"contended, {workers} workers: handoff p99", pat, 3, "µs", False, parse=micros, after=after),
    ]


ROWS: list[Row] = [
    Row("core", "uncontended `try_acquire` + `release` pairs/s",
        rf"^\| lockgate `try_acquire` \+ `release` \| {NUM} \|", 1, "/s", True),
    *contended_core(4),
    *contended_core(16),
    Row("core", "raw floor pairs/s (redis-rs, not lockgate)", rf"^\| raw floor[^|]*\| {NUM} \|", 1, "/s",
        True, reference=True),
    Row("python", "uncontended sync pairs/s (median round)",
        rf"^\| lockgate \| sync \| {NUM} \| [^|]* \| {NUM} \|", 2, "/s", True),
    Row("python", "uncontended asyncio pairs/s (median round)",
        rf"^\| lockgate \| asyncio \| {NUM} \| [^|]* \| {NUM} \|", 2, "/s", True),
    Row("python", "contended handoff p50",
        rf"^\| lockgate \| \d+ / \d+ \| {NUM} \| {NUM} \|", 1, "ms", False),
    Row("python", "contended handoff p99",
        rf"^\| lockgate \| \d+ / \d+ \| {NUM} \| {NUM} \|", 2, "ms", False),
    Row("python", "redis-py `Lock` sync pairs/s (not lockgate)",
        rf"^\| redis-py `Lock` \| sync \| {NUM} \| [^|]* \| {NUM} \|", 2, "/s", True, reference=True),
    Row("node", "uncontended acquire+release/s",
        rf"^\| lockgate \(this package\) \| {NUM} \|", 1, "/s", True),
    Row("node", "contended handoff p50",
        rf"^\| lockgate \(this package\) \|(?: [^|]* \|){{3}} {NUM} \|", 1, "ms", False),
    Row("node", "contended handoff p99",
        rf"^\| lockgate \(this package\) \|(?: [^|]* \|){{4}} {NUM} \|", 1, "ms", False),
    Row("node", "contended acquisitions/s",
        rf"^\| lockgate \(this package\) \|(?: [^|]* \|){{5}} {NUM} \|", 1, "/s", True),
    Row("node", "redis-semaphore Mutex acquire+release/s (not lockgate)",
        rf"^\| redis-semaphore [^|]* \| {NUM} \|", 1, "/s", True, reference=True),
    Row("jvm", "Java uncontended `acquire` + `close()`/s",
        rf"^\| uncontended `acquire\(5 s\)` \+ `close\(\)` per s \| {NUM} \| {NUM} \|", 1, "/s", True),
    Row("jvm", "Java uncontended `lock()` + `unlock()`/s",
        rf"^\| uncontended `lock\(\)` \+ `unlock\(\)` per s \| {NUM} \| {NUM} \|", 1, "/s", True),
    Row("jvm", "Java contended handoff p50, 4 threads",
        rf"^\| contended handoff p50, \d+ threads \| {DUR} \| {DUR} \|", 1, "µs", False, parse=micros),
    Row("jvm", "Java contended handoff p99, 4 threads",
        rf"^\| contended handoff p99, \d+ threads \| {DUR} \| {DUR} \|", 1, "µs", False, parse=micros),
    Row("jvm", "native Rust (examples/native_bench) uncontended/s",
        rf"^\| uncontended `acquire\(5 s\)` \+ `close\(\)` per s \| {NUM} \| {NUM} \|", 2, "/s", True),
    Row("jvm", "native Rust contended handoff p50",
        rf"^\| contended handoff p50, \d+ threads \| {DUR} \| {DUR} \|", 2, "µs", False, parse=micros),
]


def fmt(value: Optional[float], unit: str) -> str:
    if value is None:
        return "—"
    if unit == "/s":
        return f"{value:,.0f}"
    if unit == "µs":
        return f"{value / 1000:.2f} ms" if value >= 1000 else f"{value:.0f} µs"
    return f"{value:.2f} {unit}"


def figures(run_dir: Path, side: str, rounds: int, row: Row) -> list[Optional[float]]:
    out = []
    for r in range(1, rounds + 1):
        path = run_dir / f"{side}-r{r}" / f"{row.part}.md"
        out.append(row.read(path.read_text()) if path.exists() else None)
    return out


def section(args: argparse.Namespace) -> str:
    run_dir = Path(args.run_dir)
    parts = [p for p in ("core", "python", "node", "jvm")
             if any((run_dir / f"{s}-r{r}" / f"{p}.md").exists()
                    for s in ("base", "head") for r in range(1, args.rounds + 1))]
    try:
        server = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout
        server = re.search(r"v=(\S+)", server).group(1)  # type: ignore[union-attr]
    except (OSError, AttributeError):
        server = "?"
    lines = [
        f"{HEADING} {args.base} vs {args.head}",
        "",
        f"Command: `{args.command}` (or `./run bench-compare` with the same arguments), "
        f"{time.strftime('%Y-%m-%d', time.gmtime())}, {os.cpu_count()} cores, redis-server {server} on "
        f"loopback. Base: commit {args.base}, built in its own worktree (`target/bench-base/`); "
        f"head: {args.head_desc}. {args.rounds} round{'s' if args.rounds != 1 else ''} per side, interleaved (base then head, head "
        "then base, ...); every run is the tree's own benchmark harness, with "
        + ("**shorter settings than `./run bench` (`--quick`): a trial of the script, not a result**"
           if args.quick == "1" else "the settings `./run bench` uses")
        + ", against fresh redis-servers started the same way. A side's figure is the median of its "
        "runs' figures (each run's own figure is what BENCHMARKS.md shows for it: best of 3 for the "
        "core's uncontended pairs, the median round for Python and Node, the better of two for the JVM).",
        "",
        f"Ratio = head / base. **Noise band ±10 %**: *slower?* says yes only when the head's median is "
        f"more than 10 % worse (a rate below base / {BAND:.2f}, a latency above base × {BAND:.2f}). "
        "*rounds* is the range of the per-round head / base ratios, the run's own noise. Rows marked "
        "*ref* are not lockgate (another library, the raw floor) and did not change between the "
        "commits: their ratio shows how much the machine drifted between the sides.",
        "",
        "| part | row | base | head | head / base | rounds | slower? |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    slower = []
    for row in ROWS:
        if row.part not in parts:
            continue
        base = figures(run_dir, "base", args.rounds, row)
        head = figures(run_dir, "head", args.rounds, row)
        bs = [v for v in base if v is not None]
        hs = [v for v in head if v is not None]
        bm = statistics.median(bs) if bs else None
        hm = statistics.median(hs) if hs else None
        paired = [h / b for b, h in zip(base, head) if b and h is not None]
        ratio = f"{hm / bm:.2f}" if bm and hm is not None else "—"
        spread = f"{min(paired):.2f}–{max(paired):.2f}" if paired else "—"
        if row.reference:
            verdict = "ref"
        elif bm is None or hm is None:
            verdict = "no figures"
        else:
            worse = bm / hm if row.higher_better else hm / bm
            verdict = "**yes**" if worse > BAND else "no"
            if worse > BAND:
                slower.append(f"{row.part}: {row.label}")
        lines.append(f"| {row.part} | {row.label} | {fmt(bm, row.unit)} | {fmt(hm, row.unit)} | {ratio} | "
                     f"{spread} | {verdict} |")
    lines.append("")
    lines.append("Slower than the base beyond the noise band: " + ("; ".join(slower) if slower else "none") + ".")
    if args.failed.strip():
        lines.append(f"Runs that failed (left out of the medians): {args.failed.strip()}.")
    lines.append(f"The comparison took {int(args.seconds) // 60} min {int(args.seconds) % 60} s, "
                 f"{int(args.build_seconds) // 60} min {int(args.build_seconds) % 60} s of it building "
                 "both trees; every run's Markdown and log stay under `target/bench-compare/`.")
    lines.append("")
    return "\n".join(lines)


def sections(text: str) -> tuple[str, list[str], str]:
    """(before, the before/after sections in order, after) of BENCHMARKS.md's text: each
    comparison keeps a section of its own (one per base and head). Other sections standing
    between or after them come back in `after`."""
    lines = text.splitlines(keepends=True)
    first = next((i for i, line in enumerate(lines) if line.startswith(HEADING)), None)
    if first is None:
        return text, [], ""
    bounds = [i for i in range(first, len(lines)) if lines[i].startswith("## ")] + [len(lines)]
    found, rest = [], []
    for start, end in zip(bounds, bounds[1:]):
        (found if lines[start].startswith(HEADING) else rest).append("".join(lines[start:end]))
    return "".join(lines[:first]), found, "".join(rest)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--run-dir")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--base")
    ap.add_argument("--head")
    ap.add_argument("--head-desc", default="")
    ap.add_argument("--command", default="scripts/bench-compare.sh")
    ap.add_argument("--quick", default="0")
    ap.add_argument("--seconds", default="0")
    ap.add_argument("--build-seconds", default="0")
    ap.add_argument("--failed", default="")
    ap.add_argument("--splice", help="a section file to put into --into in place of the old one")
    ap.add_argument("--into", help="BENCHMARKS.md")
    ap.add_argument("--extract", help="print the before/after section of this file, if any")
    args = ap.parse_args()
    if args.extract:
        path = Path(args.extract)
        sys.stdout.write("\n".join(x.rstrip("\n") + "\n" for x in sections(path.read_text())[1]) if path.exists() else "")
    elif args.splice:
        into = Path(args.into)
        before, found, after = sections(into.read_text() if into.exists() else "# Benchmarks\n")
        new = Path(args.splice).read_text().rstrip("\n") + "\n"
        heading = new.splitlines()[0]
        # The same comparison (base vs head) again replaces its section; another is added.
        kept = [x.rstrip("\n") + "\n" for x in found if x.splitlines()[0] != heading]
        before = before.rstrip("\n") + "\n\n"
        into.write_text(before + "\n".join(kept + [new]) + ("\n" + after if after else ""))
    else:
        sys.stdout.write(section(args))


if __name__ == "__main__":
    main()

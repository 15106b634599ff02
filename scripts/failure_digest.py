#!/usr/bin/env python3
"""A short digest of what failed in one suite's log, for the end of `./run test`.

CI keeps only the tail of a run, so each failed suite gets a few lines there that name its
failures with their messages: panics (but those a test provokes on purpose, whose message says
"expected by the test"), failed cargo tests, Maven test errors, pytest and node:test failures,
and the conformance orchestrator's `FAIL:` lines. Usage: failure_digest.py LOG [MAX_LINES].
"""

import re
import sys

# A line that names a failure by itself (one line each).
NAMED = re.compile(
    r"^test .* FAILED$"  # cargo: one failed test
    r"|^\[ERROR\]   \S"  # Maven: the summary's failed tests (class.method:line » cause)
    r"|^\[ERROR\] Tests run:.*FAILURE"  # Maven: the class that failed
    r"|^FAILED \S"  # pytest -q's summary
    r"|^not ok "  # node:test (TAP)
    r"|^✖ "  # node:test (spec reporter)
    r"|^(FAIL|UNEXPECTED PASS|NOT RUN)\b.*: .* on \S+ \["  # conformance's closing list
    r"|^error(\[E\d+\])?: "  # a build that failed
)
PANIC = re.compile(r"panicked at (.*)$")
ON_PURPOSE = "expected by the test"


def digest(lines, limit):
    out = []
    i = 0
    while i < len(lines) and len(out) < limit:
        line = lines[i].rstrip("\n")
        m = PANIC.search(line)
        if m:
            # The message is on the lines after "panicked at FILE:LINE:", up to a backtrace note.
            message = []
            j = i + 1
            while j < len(lines) and len(message) < 4:
                nxt = lines[j].rstrip("\n")
                if not nxt or nxt.startswith(("note:", "stack backtrace:", "thread '")):
                    break
                message.append(nxt)
                j += 1
            if not any(ON_PURPOSE in m for m in message):
                out.append(f"panic at {m.group(1)} {' | '.join(message)}"[:400])
            i = j
            continue
        if NAMED.search(line):
            entry = line[:400]
            if entry not in out:
                out.append(entry)
        i += 1
    return out


def main():
    path = sys.argv[1]
    limit = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.readlines()
    found = digest(lines, limit)
    for line in found:
        print("  " + line)
    if not found:
        print("  (no test named a failure: the last lines of the log follow)")
        for line in lines[-8:]:
            print("  " + line.rstrip("\n")[:300])


if __name__ == "__main__":
    main()

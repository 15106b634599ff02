"""The README's per-backend examples run as written (issue 23, item 10): every ```python example
block of bindings-python/README.md runs in a fresh interpreter against real servers from the
project's launcher, with the one substitution the README states: the URL string in the example
is replaced, whole, by the launched server's URL of that backend."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from conftest import LAUNCHER

README = Path(__file__).resolve().parents[1] / "README.md"
#: A URL literal in an example: the scheme up to the closing quote.
URL = re.compile(r"""(["'])((?:redis|rediss|redis\+cluster|redlock|zookeeper|etcd|postgres|postgresql|mysql|mariadb)://[^"']*)\1""")
#: The launcher kind serving each scheme.
KIND = {"redis": "single", "redis+cluster": "cluster", "redlock": "redlock", "zookeeper": "zookeeper", "etcd": "etcd",
        "postgres": "postgres", "mysql": "mariadb"}


def examples() -> list[str]:
    """The blocks fenced as ```python example, in order."""
    return re.findall(r"^```python example\n(.*?)^```$", README.read_text(), flags=re.S | re.M)


def test_every_backend_has_an_example() -> None:
    schemes = sorted({URL.search(code).group(2).split("://")[0] for code in examples()})  # type: ignore[union-attr]
    assert schemes == sorted(KIND), schemes


class Launched:
    """One launcher process; its servers stop when its stdin closes."""

    def __init__(self, kind: str) -> None:
        self.proc = subprocess.Popen([LAUNCHER, kind], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        info = json.loads(self.proc.stdout.readline())
        url = str(info["url"])
        # A Cluster's description names its seed node as redis://host:port.
        self.url = "redis+cluster://" + url.split("://", 1)[1] if kind == "cluster" else url

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, Launched]]:
    started: dict[str, Launched] = {}
    yield started
    for s in started.values():
        s.close()


@pytest.mark.parametrize("index", range(len(examples())))
def test_readme_example_runs(index: int, servers: dict[str, Launched], tmp_path: Path) -> None:
    code = examples()[index]
    found = URL.search(code)
    assert found, f"example {index} names no URL"
    kind = KIND[found.group(2).split("://")[0]]
    if kind not in servers:
        servers[kind] = Launched(kind)
    code = URL.sub(lambda m: m.group(1) + servers[kind].url + m.group(1), code)
    script = tmp_path / "example.py"
    script.write_text(code)
    # The same interpreter and environment as this test: the lockgate under test.
    run = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, f"example {index} ({kind}) failed:\n{code}\n{run.stderr}"
    assert run.stdout.strip(), "the example printed nothing"


def test_the_top_readme_python_example_runs(servers: dict[str, Launched], tmp_path: Path) -> None:
    """The top README's Python section (issue 23, item 11): its snippet, as written, from a clean
    directory, with the same URL substitution."""
    top = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = top[top.index("## Python\n") : top.index("## Node\n")]
    blocks = re.findall(r"^```python\n(.*?)^```$", section, flags=re.S | re.M)
    assert blocks, "the top README's Python section has no example"
    if "single" not in servers:
        servers["single"] = Launched("single")
    for code in blocks:
        script = tmp_path / "top.py"
        script.write_text(URL.sub(lambda m: m.group(1) + servers["single"].url + m.group(1), code))
        run = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, f"{code}\n{run.stderr}"
        assert "fencing token" in run.stdout

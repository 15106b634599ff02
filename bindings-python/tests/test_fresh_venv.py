"""The install lines and first examples run as written for a new user (issue 23, item 11): the
wheel `ci.sh build` left in target/wheels/ is installed into a new virtualenv with the install
line both READMEs give, and from an empty directory that virtualenv's interpreter runs the top
README's Python example and this binding's quick-start against a real redis-server from the
project's launcher (the one substitution the READMEs state: the URL string is replaced, whole,
by the launched server's URL). Nothing of the machine's Python or of this test's environment
reaches the virtualenv (no PYTHONPATH, no system site-packages), so the examples see only what
the install line installed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from conftest import Deployment

HERE = Path(__file__).resolve().parents[1]
ROOT = HERE.parent
#: The line that builds the wheel (ci.sh build runs it, with flags for speed) and the line that
#: installs that wheel elsewhere, which this test runs as written.
BUILD_LINE = "pip install ./bindings-python"
WHEEL_LINE = re.compile(r"^pip install (target/wheels/\S+\.whl)$")
URL = re.compile(r"""(["'])(redis://[^"']*)\1""")


def install_lines(readme: str) -> list[str]:
    """The commands of the first ```sh block of `readme`, comments stripped."""
    block = re.search(r"^```sh\n(.*?)^```$", readme, flags=re.S | re.M)
    assert block, "no ```sh install block"
    return [line.split("#", 1)[0].strip() for line in block.group(1).splitlines() if line.split("#", 1)[0].strip()]


def top_python_section() -> str:
    top = (ROOT / "README.md").read_text()
    return top[top.index("## Python\n") : top.index("## Node\n")]


def test_both_readmes_give_the_same_install_lines_and_ci_builds_with_the_first() -> None:
    binding = install_lines((HERE / "README.md").read_text())
    assert install_lines(top_python_section()) == binding
    assert binding[0] == BUILD_LINE and WHEEL_LINE.match(binding[1]), binding
    # ci.sh build installs the same directory from the clone's root, which leaves the wheel.
    build = (HERE / "ci.sh").read_text().split("cmd_build()", 1)[1].split("\n}\n", 1)[0]
    assert 'cd "$ROOT"' in build and "pip install" in build and "./bindings-python)" in build, build


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtualenv with lockgate installed by the README's wheel line, run from the clone."""
    line = install_lines((HERE / "README.md").read_text())[1]
    assert WHEEL_LINE.match(line), line
    env_dir = tmp_path_factory.mktemp("venv") / "env"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True, timeout=120)
    env = clean_env(env_dir)
    # `pip` of the README is the virtualenv's (first on PATH), the glob expanded by the shell.
    run = subprocess.run(["bash", "-c", line], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, f"{line!r} failed in a new virtualenv:\n{run.stdout}\n{run.stderr}"
    where = subprocess.run([str(env_dir / "bin/python"), "-c", "import lockgate; print(lockgate.__file__)"],
                           cwd=env_dir.parent, env=env, capture_output=True, text=True, timeout=60)
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(env_dir), f"lockgate came from {where.stdout}, not the virtualenv"
    return env_dir


def clean_env(env_dir: Path) -> dict[str, str]:
    """The environment of a shell that activated `env_dir`, without this test's Python paths."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_", "VIRTUAL_ENV"))}
    env["VIRTUAL_ENV"] = str(env_dir)
    env["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    server = Deployment("single")
    yield server.url
    server.close()


def examples() -> list[tuple[str, str]]:
    """(where, code) of the top README's Python example and the binding README's quick-start."""
    top = re.findall(r"^```python\n(.*?)^```$", top_python_section(), flags=re.S | re.M)
    binding = (HERE / "README.md").read_text()
    use = binding[binding.index("## Use\n") : binding.index("### Client\n")]
    quick = re.findall(r"^```python\n(.*?)^```$", use, flags=re.S | re.M)
    assert top and len(quick) == 2, (top, quick)
    return [(f"README.md ## Python #{i}", c) for i, c in enumerate(top)] + \
        [(f"bindings-python/README.md ## Use #{i}", c) for i, c in enumerate(quick)]


@pytest.mark.parametrize("where,code", examples(), ids=lambda v: v if v.startswith(("README", "bindings")) else "")
def test_example_runs_in_the_new_virtualenv(where: str, code: str, venv: Path, redis_url: str, tmp_path: Path) -> None:
    assert URL.search(code), f"{where} names no redis:// URL"
    script = tmp_path / "app.py"
    script.write_text(URL.sub(lambda m: m.group(1) + redis_url + m.group(1), code))
    run = subprocess.run([str(venv / "bin/python"), script.name], cwd=tmp_path, env=clean_env(venv),
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, f"{where} failed:\n{code}\n{run.stderr}"
    assert "fencing token" in run.stdout, run.stdout

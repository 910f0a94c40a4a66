"""A folder named ``ldpsim`` in the directory Python starts from (what ``git clone`` makes next
to a notebook) must not replace the installed package, in the user's interpreter or in the
processes ldpsim starts (the fork-server curator used to import the folder:
``AttributeError: module 'ldpsim' has no attribute 'run'``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """
import ldpsim
res = ldpsim.run("demo", overrides={"data.n": 60, "params.epsilon": 1.0, "repeats": 1,
                                    "protocols": ["ldp_kwiksort_rr"]}, backend="processes")
print("ran", len(res), ldpsim.__file__)
"""


@pytest.fixture
def beside_a_clone(tmp_path: Path) -> Path:
    """A directory holding a folder ``ldpsim`` laid out as the repository is (no
    ``__init__.py`` at its top; packages inside that must never be imported)."""
    clone = tmp_path / "ldpsim"
    for sub in ("simulator", "protocols"):
        (clone / sub).mkdir(parents=True)
        (clone / sub / "__init__.py").write_text("raise ImportError('the clone was imported')\n")
    (clone / "README.md").write_text("a clone\n")
    return tmp_path


def _env() -> dict[str, str]:
    # as a user starts Python: no PYTHONPATH pointing at the repository
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSAFEPATH")}


def test_a_notebook_next_to_a_clone_imports_the_package(beside_a_clone):
    got = subprocess.run([sys.executable, "-c", SCRIPT], cwd=beside_a_clone, env=_env(),
                         capture_output=True, text=True, timeout=120)
    assert got.returncode == 0, got.stderr[-3000:]
    assert got.stdout.startswith("ran 1 ") and str(beside_a_clone) not in got.stdout


def test_the_command_next_to_a_clone_runs_the_package(beside_a_clone):
    exe = Path(sys.executable).with_name("ldpsim")
    if not exe.is_file():
        pytest.skip("the ldpsim command is not installed beside this interpreter")
    got = subprocess.run([str(exe), "run", "demo", "--set", "data.n=60", "--set",
                          "params.epsilon=1.0", "--set", "repeats=1", "--backend", "processes",
                          "--out", str(beside_a_clone / "out"), "--no-progress"],
                         cwd=beside_a_clone, env=_env(), capture_output=True, text=True,
                         timeout=120)
    assert got.returncode == 0, got.stderr[-3000:]
    assert "Traceback" not in got.stderr

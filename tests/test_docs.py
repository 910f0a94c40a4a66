"""The README and the documentation site: the site builds with warnings as errors, and every
fenced code block of ``README.md`` and ``docs/*.md`` runs.

The convention (``docs/contributing-docs.md`` states it for writers):

* ```` ```python ````: the block runs as a script in a fresh interpreter (this environment's
  Python) and must exit with 0.
* ```` ```sh ````, ```` ```bash ````, ```` ```console ````: each command runs with ``bash``, one
  after another, in the page's directory (comments and blank lines skipped, ``\\``
  continuations joined), with this environment's ``ldpsim`` first on the ``PATH``; each must
  exit with 0. A command ending in ``&`` starts in the background (a curator, a pool) and the
  block waits for it after its last command: it too must exit with 0.
* ```` ```toml ````: must parse; a block with a top-level ``protocol`` or ``protocols`` key is a
  scenario and must pass ldpsim's scenario loader.
* ```` ```text ````: output samples, listings, formulas; not run.

Each page gets a fresh temporary directory holding links to the checkout's ``scenarios/`` and
``examples/``, shared by its blocks in order (a block may read what an earlier one wrote). A
block that cannot run here says why in an HTML comment on the line before its fence,
``<!-- not-run: reason -->``; ``<!-- slow: reason -->`` runs it only under ``-m slow``. Any
other fence, or an unmarked block of a language not listed above, fails the test: no block is
skipped silently.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT

DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
BIN = Path(sys.executable).parent
RUN = {"python", "sh", "bash", "console", "toml"}
NOT_RUN = {"text"}
#: seconds one command or one Python block may take
TIMEOUT = 300
#: a slow block's commands (the benchmarks: the audit table alone takes about 10 minutes)
SLOW_TIMEOUT = 3600

FENCE = re.compile(r"^```(\S*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
MARK = re.compile(r"<!--\s*(not-run|slow)\s*:\s*(.+?)\s*-->\s*$")


@dataclass
class Block:
    page: Path
    line: int
    lang: str
    code: str
    mark: str | None  # None, "not-run" or "slow"

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line} ({self.lang or 'no language'})"


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    out = []
    for m in FENCE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        mark = MARK.search(before)
        out.append(Block(page, line, m.group(1).lower(), m.group(2),
                         mark.group(1) if mark else None))
    return out


def commands(code: str) -> list[str]:
    """A shell block's commands: continuations joined, comments and blank lines dropped."""
    out, pending = [], ""
    for raw in code.splitlines():
        line = raw.rstrip()
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        out.append((pending + line).strip())
        pending = ""
    assert not pending, f"a command ends with a continuation: {pending!r}"
    return out


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.pop("PYTHONPATH", None)
    env["MPLBACKEND"] = "Agg"
    return env


def _workdir(tmp: Path) -> Path:
    for name in ("scenarios", "examples"):
        (tmp / name).symlink_to(ROOT / name, target_is_directory=True)
    return tmp


def _check_scenario(raw: dict) -> None:
    """ldpsim's own scenario loader on a scenario block (the one place to follow if it moves)."""
    from ldpsim.simulator.scenario.scenario import load

    load(raw=raw)


def run_block(block: Block, cwd: Path) -> None:
    env = _env()
    timeout = SLOW_TIMEOUT if block.mark == "slow" else TIMEOUT
    if block.lang == "python":
        script = cwd / f"block_{block.line}.py"
        script.write_text(block.code, encoding="utf-8")
        r = subprocess.run([sys.executable, script.name], cwd=cwd, env=env, text=True,
                           capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
        assert r.returncode == 0, f"{block}: exit {r.returncode}\n{r.stdout[-3000:]}\n" \
                                  f"{r.stderr[-3000:]}"
    elif block.lang in ("sh", "bash", "console"):
        background: list[tuple[str, subprocess.Popen]] = []
        try:
            for cmd in commands(block.code):
                if cmd.endswith("&") and not cmd.endswith("&&"):  # waited for at the end
                    background.append((cmd, subprocess.Popen(
                        ["bash", "-c", cmd[:-1]], cwd=cwd, env=env, text=True,
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        stdin=subprocess.DEVNULL)))
                    continue
                r = subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, text=True,
                                   capture_output=True, timeout=timeout,
                                   stdin=subprocess.DEVNULL)
                assert r.returncode == 0, f"{block}: `{cmd}` exited {r.returncode}\n" \
                                          f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
            for cmd, proc in background:
                out, err = proc.communicate(timeout=timeout)
                assert proc.returncode == 0, f"{block}: `{cmd}` exited {proc.returncode}\n" \
                                             f"{out[-3000:]}\n{err[-3000:]}"
        finally:
            for _, proc in background:
                if proc.poll() is None:
                    proc.kill()
                    proc.communicate()
    elif block.lang == "toml":
        raw = tomllib.loads(block.code)
        if "protocol" in raw or "protocols" in raw:
            _check_scenario(raw)
    else:  # pragma: no cover - test_every_block_is_runnable_or_marked rules this out
        raise AssertionError(f"{block}: no way to run a {block.lang!r} block")


ALL = [b for page in PAGES for b in blocks(page)]


def test_every_block_is_runnable_or_marked():
    """No block is skipped silently: each has a language the test runs, is a ``text`` sample,
    or carries a ``not-run`` / ``slow`` mark with a reason."""
    assert len(PAGES) > 10 and ALL
    unknown = [str(b) for b in ALL if b.lang not in RUN | NOT_RUN]
    assert not unknown, f"blocks with a language the docs test cannot run: {unknown}"
    marked_text = [str(b) for b in ALL if b.lang in NOT_RUN and b.mark]
    assert not marked_text, f"text blocks never run; drop the mark: {marked_text}"


def test_the_readme_starts_with_the_two_commands_and_stays_short():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 350
    first = next(b for b in blocks(ROOT / "README.md") if b.lang in RUN)
    assert first.mark == "not-run"  # the suite must not run itself
    assert [c.split("#")[0].strip() for c in commands(first.code)][:2] == ["make demo", "make test"]


def test_the_site_builds_with_warnings_as_errors(tmp_path):
    mkdocs = BIN / "mkdocs"
    if not mkdocs.exists():
        pytest.fail("mkdocs is not installed: pip install -e '.[docs]' (make does)")
    r = subprocess.run([str(mkdocs), "build", "--strict", "--quiet", "--site-dir",
                        str(tmp_path / "site")], cwd=ROOT, env=_env(), text=True,
                       capture_output=True, timeout=TIMEOUT)
    assert r.returncode == 0, f"mkdocs build --strict failed:\n{r.stdout}\n{r.stderr}"
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "api" / "index.html").read_text().count("Protocol") > 5


def _page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def _run_page(page: Path, tmp_path: Path, slow: bool) -> None:
    todo = [b for b in blocks(page) if b.lang in RUN
            and (b.mark == "slow" if slow else b.mark is None)]
    if not todo:
        pytest.skip(f"no {'slow ' if slow else ''}runnable block in {_page_id(page)}")
    cwd = _workdir(tmp_path)
    try:
        for block in todo:
            run_block(block, cwd)
    finally:
        shutil.rmtree(cwd / "results", ignore_errors=True)


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_every_code_block_runs(page, tmp_path):
    _run_page(page, tmp_path, slow=False)


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_every_slow_code_block_runs(page, tmp_path):
    _run_page(page, tmp_path, slow=True)

"""Installing is quiet unless something is wrong: ``pip install`` of a fresh copy of the checkout
prints no warning, and the causes of setuptools' warnings stay fixed (every C extension declared
in setup.py, not in pyproject's experimental ext-modules table; every folder of the installed
packages is itself a listed package).

The install runs in a temporary virtual environment that borrows this environment's pip and
setuptools (no network: ``--no-index --no-build-isolation --no-deps``); the machine's own pip
configuration is left out (its index mirrors are no part of the project)."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sysconfig
import tomllib
import venv
from pathlib import Path

import pytest

from tests.conftest import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]
#: the build requirement's least setuptools (pyproject's [build-system])
LEAST = 77


def _declared_extensions() -> dict[str, list[str]]:
    """setup.py's extensions, read from its source: name -> sources."""
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Extension":
            name, sources = (ast.literal_eval(a) for a in node.args[:2])
            optional = next((ast.literal_eval(k.value) for k in node.keywords
                             if k.arg == "optional"), None)
            assert optional is True, f"{name}: every extension is optional (numpy does its work)"
            out[name] = sources
    return out


def test_every_c_source_is_an_optional_extension_of_setup_py():
    assert "ext-modules" not in SETUPTOOLS, (
        "pyproject.toml: [[tool.setuptools.ext-modules]] is experimental and warns at every "
        "install; declare the extension in setup.py")
    declared = _declared_extensions()
    sources = sorted(str(p.relative_to(ROOT)) for tree in ("protocols", "simulator")
                     for p in (ROOT / tree).rglob("_*.c"))
    assert sorted(s for v in declared.values() for s in v) == sources
    for name, (source,) in declared.items():
        tree, *rest = Path(source).with_suffix("").parts
        assert name == ".".join(("ldpsim", tree, *rest)), (name, source)


def test_every_folder_of_an_installed_package_is_a_listed_package():
    """setuptools warns of a folder inside a package that is no listed package (it would
    ship as data of an ambiguous kind): each is listed, its files as its package data."""
    listed = set(SETUPTOOLS["packages"])
    roots = SETUPTOOLS["package-dir"]
    missing = []
    for package in listed:
        top = next(k for k in sorted(roots, key=len, reverse=True)
                   if package == k or package.startswith(k + "."))
        folder = ROOT / roots[top] / Path(*package[len(top):].split(".")[1:])
        for sub in folder.iterdir():
            if sub.is_dir() and sub.name.isidentifier():
                if f"{package}.{sub.name}" not in listed and any(sub.iterdir()):
                    missing.append(f"{package}.{sub.name}")
    assert not [m for m in missing if not m.endswith("__pycache__")], missing
    assert SETUPTOOLS["package-data"]["ldpsim.scenarios.traces"] == ["*.csv", "*.md"]


def _checkout_copy(dest: Path) -> Path:
    """The checkout's files as a fresh clone has them (tracked and new, not ignored)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=ROOT, capture_output=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: no file list to copy")
    for name in filter(None, listed.stdout.decode().split("\0")):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def _borrowing_venv(path: Path) -> Path:
    """A new virtual environment that imports this one's packages after its own (pip,
    setuptools; not its ldpsim: a path named in a .pth file keeps its own .pth files
    unread). Returns its python."""
    venv.create(path, with_pip=False)
    py = path / "bin" / "python"
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()"
                              "['purelib'])"], capture_output=True, text=True).stdout.strip()
    (Path(purelib) / "borrowed.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return py


@pytest.mark.slow
@pytest.mark.parametrize("editable", [True, False], ids=["editable", "wheel"])
def test_a_fresh_install_prints_no_warning(tmp_path, editable):
    import setuptools

    if int(setuptools.__version__.split(".")[0]) < LEAST:
        pytest.skip(f"setuptools {setuptools.__version__} here, the build needs >= {LEAST} "
                    f"(make installs it)")
    project = _checkout_copy(tmp_path / "clone")
    py = _borrowing_venv(tmp_path / "venv")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON"))}
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    args = [str(py), "-m", "pip", "install", "--no-index", "--no-build-isolation", "--no-deps",
            *(["-e"] if editable else []), str(project)]
    res = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=900)
    printed = res.stdout + res.stderr
    assert res.returncode == 0, printed
    warned = [ln for ln in printed.splitlines() if re.search("warning", ln, re.I)]
    assert not warned, "the install warned:\n" + printed
    # what it installed works: the compiled accelerators, the traces
    modules = sorted(_declared_extensions())
    check = ("import importlib, pathlib, ldpsim.scenarios as s; "
             f"[importlib.import_module(m) for m in {modules!r}]; "
             "print(pathlib.Path(s.__path__[0], 'traces', 'mobile.csv').is_file())")
    ran = subprocess.run([str(py), "-c", check], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=120)
    assert ran.returncode == 0 and ran.stdout.strip() == "True", ran.stderr
    where = subprocess.run([str(py), "-c", "import ldpsim; print(ldpsim.__file__)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True)
    assert where.stdout.startswith(str(project if editable else tmp_path / "venv")), where


def test_make_installs_quietly_and_shows_the_log_only_when_a_step_fails():
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = text.split("$(STAMP): ")[1].split("\n\n")[0]
    installs = [ln for ln in recipe.splitlines() if "pip install" in ln]
    assert installs and all("--quiet" in ln and "$(LOG) 2>&1 || $(SHOW_LOG)" in ln
                            for ln in installs)
    assert re.search(r"^SHOW_LOG = \{ cat \$\(LOG\);.*exit 1; \}$", text, re.M)
    assert "setup.py" in recipe.splitlines()[0]  # a changed extension list reinstalls

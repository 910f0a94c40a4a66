"""The real data sets' catalogue and the one data folder (``protocols.datasets``).

The data files themselves are never copied here: the tests that read them skip when the data
folder lacks them; the rest use an empty folder of ``tmp_path``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from ldpsim.protocols import DATA_KINDS, datasets
from ldpsim.protocols.datasets import DATASETS, MissingData, data_dir, dataset_of, resolve
from ldpsim.simulator.scenario import scenario as sc
from ldpsim.simulator.scenario.tables import ScenarioError

from ldpsim import environment
from tests.conftest import ROOT

FILE_KINDS = {k for k, d in DATA_KINDS.items() if "path" in d.params}
SCENARIOS = sorted((ROOT / "scenarios").glob("*.toml"))


def _data_path(f: Path) -> str | None:
    data = tomllib.loads(f.read_text(encoding="utf-8")).get("data", {})
    return data.get("path") if data.get("kind") in FILE_KINDS else None


#: the shipped scenarios that read a real data set, and the path each names
REAL = {f.stem: p for f in SCENARIOS if (p := _data_path(f)) is not None}


def test_the_folder_is_the_variable_else_shared_data_beside_the_checkout(monkeypatch, tmp_path):
    monkeypatch.delenv(environment.DATA, raising=False)
    assert data_dir() == ROOT.parent / "shared" / "data" == datasets.DEFAULT_DIR
    monkeypatch.setenv(environment.DATA, str(tmp_path))
    assert data_dir() == tmp_path
    (tmp_path / "web").mkdir()
    (tmp_path / "sushi" / "kamishima").mkdir(parents=True)
    (tmp_path / "sushi" / "kamishima" / "x.order").write_text("")
    assert resolve("data:sushi/kamishima/x.order") == tmp_path / "sushi/kamishima/x.order"
    assert resolve("data:web", directory=True) == tmp_path / "web"
    assert resolve("/own/copy.soc") == Path("/own/copy.soc")  # a plain path as it is


def test_a_missing_data_set_is_one_line_naming_it_the_file_the_folder_and_where_to_get_it(
        monkeypatch, tmp_path):
    monkeypatch.setenv(environment.DATA, str(tmp_path))
    for name, ds in DATASETS.items():
        with pytest.raises(MissingData) as e:
            resolve(f"data:{ds.files[0]}")
        line = str(e.value)
        assert "\n" not in line
        for part in (repr(name), ds.files[0], str(tmp_path), environment.DATA, "--data-dir",
                     ds.obtain):
            assert part in line, (part, line)
    with pytest.raises(MissingData, match=r"no web/web_crowd\.txt in the data folder"):
        resolve("data:web", directory=True)


def test_every_scenario_on_real_data_names_a_data_set_of_the_catalogue():
    assert len(REAL) >= 14
    for stem, path in REAL.items():
        ds = dataset_of(path)
        assert ds is not None, f"{stem}: [data] path {path!r} names no data set of the catalogue"
        rel = datasets.named(path)
        assert any(f == rel or f.startswith(rel + "/") for f in ds.files), (stem, path)
    every = {dataset_of(p).name for p in REAL.values()}
    assert every == set(DATASETS), "a data set of the catalogue no scenario reads, or none"


def test_every_entry_says_where_from_its_licence_and_how_to_get_it():
    for ds in DATASETS.values():
        assert ds.files and all(f.startswith(ds.name + "/") for f in ds.files)
        assert ds.source and "http" in ds.obtain and ds.licence and ds.citation
    sushi = DATASETS["sushi"]
    assert "redistribute" in sushi.licence and "kamishima.net/sushi" in sushi.obtain


def test_run_keys_hash_a_named_file_as_the_scenarios_spelled_it_before():
    assert datasets.key_form("data:web") == "../shared/data/web"
    assert datasets.key_form("/own/web") == "/own/web" and datasets.key_form(3) == 3


@pytest.mark.parametrize("stem", sorted(REAL))
def test_a_scenario_on_absent_data_fails_its_check_in_one_line(stem, monkeypatch, tmp_path):
    monkeypatch.setenv(environment.DATA, str(tmp_path))
    specs = sc.load(ROOT / "scenarios" / f"{stem}.toml").runs()  # loads without the data
    with pytest.raises(ScenarioError) as e:
        sc.check_runs(specs[:1])
    assert "\n" not in str(e.value) and "is missing" in str(e.value)
    assert str(tmp_path) in str(e.value) and dataset_of(REAL[stem]).obtain in str(e.value)


@pytest.mark.parametrize("stem", sorted(REAL))
def test_a_scenario_on_real_data_checks_when_the_data_are_present(stem):
    ds = dataset_of(REAL[stem])
    if not datasets.present(ds):
        pytest.skip(f"data set {ds.name} not in {data_dir()}")
    specs = sc.load(ROOT / "scenarios" / f"{stem}.toml").runs()
    sc.check_runs([s for s in specs if s.repeat == 0][:3])


def _ldpsim(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).parent / "ldpsim"), *args],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def test_ldpsim_run_on_absent_data_exits_2_with_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != environment.DATA}
    for how, extra in (("--data-dir", ["--data-dir", str(tmp_path)]),
                       ("variable", [])):
        res = subprocess.run(
            [str(Path(sys.executable).parent / "ldpsim"), "run", "paper000_turkdots", "-q",
             "--out", str(tmp_path / "out"), *extra], capture_output=True, text=True,
            timeout=120, env=env if extra else {**env, environment.DATA: str(tmp_path)},
            cwd=tmp_path)
        assert res.returncode == 2, (how, res.stderr)
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: data set 'turkdots' is missing")
        assert str(tmp_path) in lines[0] and "turkdots/00024-00000001.soc" in lines[0]
        assert not (tmp_path / "out").exists()


def test_ldpsim_data_lists_each_data_set_and_whether_it_is_present(tmp_path):
    res = _ldpsim("data", "--data-dir", str(tmp_path))
    assert res.returncode == 0, res.stderr
    assert f"data folder: {tmp_path}" in res.stdout
    for ds in DATASETS.values():
        assert f"{ds.name} [MISSING]" in res.stdout and ds.obtain in res.stdout
    (tmp_path / "web").mkdir()
    for f in DATASETS["web"].files:
        (tmp_path / f).write_text("")
    res = _ldpsim("data", env={environment.DATA: str(tmp_path)})
    assert "web [present]" in res.stdout and "paper001_fig5_web" in res.stdout


def catalogue_table() -> str:
    """The catalogue as docs/getting-started.md's table shows it (each address a link, which
    the site's stylesheet lets break where its column is narrow)."""
    rows = ["| data set | files (in the data folder) | where it comes from | licence | "
            "how to get it |", "|---|---|---|---|---|"]

    def linked(text: str) -> str:
        return re.sub(r"(https?://[^\s,;()]+)", r"<\1>", text)

    for d in DATASETS.values():
        files = ", ".join(f"`{f}`" for f in d.files)
        rows.append(f"| `{d.name}` | {files} | {linked(d.source)}; cite {d.citation} | "
                    f"{d.licence} | {linked(d.obtain)} |")
    return "\n".join(rows)


def test_the_getting_started_table_is_the_catalogue():
    text = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    shown = text.split("<!-- datasets: begin -->\n")[1].split("\n<!-- datasets: end -->")[0]
    assert shown == catalogue_table(), "docs/getting-started.md: write catalogue_table() there"
    assert "`ldpsim data`" in (ROOT / "README.md").read_text(encoding="utf-8")

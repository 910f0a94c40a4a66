"""``ldpsim reproduce``: a paper's scenarios run into one folder each, resumably, with a report
each, a page per paper and an index; a scenario without its data is skipped, a failing one
stops no other, an unknown paper is refused, and ``ldpsim list`` gives each paper's time."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from ldpsim.simulator import cli
from ldpsim.simulator.scenario.catalogue import papers
from ldpsim.simulator.scenario.measured import duration_text, load_durations
from ldpsim.simulator.sweep import reporting, reproduce

from ldpsim import environment
from tests.conftest import ROOT

#: a quick look at paper002: two games per point, 10 and 50 partners, no figures drawn
QUICK = ["--set", "repeats=2", "--set", "data.n=[10,50]", "--set", "output.plots=false",
         "--no-progress"]


@pytest.fixture(autouse=True)
def _no_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reports without their figures (drawing them is ``ldpsim report``'s tests' business)."""
    def write(out_dir: str | Path, records: Any = None) -> Path:
        target = Path(out_dir) / "report.html"
        target.write_text(reporting.page(out_dir, figures=False, records=records),
                          encoding="utf-8")
        return target

    monkeypatch.setattr(reproduce, "write_report", write)
    # --data-dir sets the data folder for the process: as it was after the test
    old = os.environ.get(environment.DATA)
    monkeypatch.setenv(environment.DATA, old or "unset")
    if old is None:
        monkeypatch.delenv(environment.DATA)


def _links(page: Path) -> list[str]:
    return re.findall(r'href="([^"]+)"', page.read_text(encoding="utf-8"))


def test_a_paper_runs_into_a_folder_per_scenario_with_its_pages_and_resumes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rep"
    assert cli.main(["reproduce", "002", "--out", str(out), *QUICK]) == 0
    names = papers()["paper002"]
    paper = out / "paper002"
    for name in names:
        assert (paper / name / "results.jsonl").is_file()
        assert (paper / name / "report.html").is_file()
    # the paper's page links each scenario's report, and the index the paper's page
    assert sorted(_links(paper / "index.html")) == sorted(
        ["../index.html", *(f"{n}/report.html" for n in names)])
    assert _links(out / "index.html") == ["paper002/index.html"]
    text = (paper / "index.html").read_text(encoding="utf-8")
    assert "printed numbers:" in text and "within 2 SE of ours" in text
    assert "http" not in text and "<script src" not in text  # nothing to fetch
    status = {o["name"]: o for o in json.loads((paper / "reproduce.json").read_text())}
    assert {o["status"] for o in status.values()} == {"done"}
    assert status["paper002_tables3_4"]["published"][0] == 120  # Tables 3 and 4's numbers
    assert status["paper002_estimators"]["published"] is None
    printed = capsys.readouterr()
    assert printed.out.split() == [str(paper / "index.html"), str(out / "index.html")]
    assert "3 scenarios done" in printed.err
    # again: every run is there, none runs anew
    stored = {n: (paper / n / "results.jsonl").read_bytes() for n in names}
    assert cli.main(["reproduce", "paper002", "--out", str(out), *QUICK]) == 0
    assert {n: (paper / n / "results.jsonl").read_bytes() for n in names} == stored
    err = capsys.readouterr().err
    for name in names:
        runs = status[name]["runs"]
        assert f"resuming: {runs} of {runs} runs already in" in err


def test_missing_data_skips_a_scenario_and_a_failing_one_stops_no_other(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    chosen = ["paper000_nope", "paper000_sushi", "paper000_theta"]
    monkeypatch.setattr(reproduce, "papers", lambda: {"paper000": chosen})
    empty = tmp_path / "data"
    empty.mkdir()
    out = tmp_path / "rep"
    code = cli.main(["reproduce", "000", "--out", str(out), "--data-dir", str(empty),
                     "--set", "repeats=1", "--set", "data.n=200", "--set",
                     "output.plots=false", "--no-progress", "-q"])
    assert code == 1  # one failed
    err = capsys.readouterr().err
    assert re.search(r"warning: skipped paper000_sushi: data set 'sushi' is missing: no "
                     r"\S+ in the data folder", err), err
    assert "error: paper000_nope failed: ScenarioError" in err
    status = {o["name"]: o for o in json.loads((out / "paper000" / "reproduce.json").read_text())}
    assert [status[n]["status"] for n in chosen] == ["failed", "skipped", "done"]
    assert not (out / "paper000" / "paper000_sushi").exists()
    assert (out / "paper000" / "paper000_theta" / "report.html").is_file()
    page = (out / "paper000" / "index.html").read_text(encoding="utf-8")
    assert "skipped" in page and "failed" in page and "data set &#x27;sushi&#x27;" in page
    assert _links(out / "paper000" / "index.html") == [
        "../index.html", "paper000_theta/report.html"]
    index = (out / "index.html").read_text(encoding="utf-8")
    assert "1 done, 1 skipped, 1 failed" in index


@pytest.mark.parametrize("argv", [["007"], ["paperX"], []])
def test_an_unknown_paper_or_none_is_refused_with_the_allowed_ones(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    assert cli.main(["reproduce", *argv, "--out", str(tmp_path / "rep")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "allowed: 000, 001, 002, 003, 004" in err
    assert "--all" in err
    assert not (tmp_path / "rep").exists()


def test_list_gives_each_papers_measured_time(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("papers ("))
    measured = load_durations(ROOT / "scenarios")
    for i, paper in enumerate(papers()):
        mine = [v for k, v in measured.items() if k.startswith(paper + "_")]
        assert lines[at + 1 + i].split() == [
            paper, str(len(mine)), "scenarios", str(sum(v["runs"] for v in mine)), "runs",
            *("~" + duration_text(sum(v["seconds"] for v in mine))).split()], lines[at + 1 + i]


def _plot_style(scenario_dir: Path) -> Any:
    stored = json.loads((scenario_dir / "scenario.json").read_text(encoding="utf-8"))
    return stored["plot"]["style"]


@pytest.mark.parametrize("style", [None, "notebook"])
def test_a_paper_is_reproduced_in_the_paper_style_unless_told(tmp_path: Path,
                                                               style: str | None) -> None:
    """``ldpsim reproduce`` draws a paper's figures as a paper prints them (``plot.style =
    "paper"``) unless ``--style notebook`` says otherwise."""
    out = tmp_path / "rep"
    extra = [] if style is None else ["--style", style]
    assert cli.main(["reproduce", "002", "--out", str(out), *QUICK, *extra]) == 0
    for name in papers()["paper002"]:
        assert _plot_style(out / "paper002" / name) == (style or "paper")

"""The report from the records a sweep holds (``ldpsim reproduce``: not read back from a file
of 10^5 runs) is the report from the file, and holds them to the same proof; the paper's
printed numbers are compared over groups of records with one match per group, to the same
means in the same order."""

from __future__ import annotations

import copy
import random
from pathlib import Path

import pytest
from ldpsim.simulator.results import published
from ldpsim.simulator.scenario.identity import ResultsCorruptError, proven_records
from ldpsim.simulator.sweep import reporting


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ldpsim.simulator.cli import main

    out = tmp_path_factory.mktemp("r") / "demo"
    assert main(["run", "demo", "--out", str(out), "-q", "--no-progress", "--set",
                 "runtime.backend=inproc", "--set", "data.n=60", "--set", "repeats=2",
                 "--set", "output.plots=false", "--secret", "seed"]) == 0
    return out


def test_the_report_of_the_records_held_is_the_report_of_the_file(run_dir: Path) -> None:
    held = proven_records(run_dir)
    assert reporting.page(run_dir, figures=False, records=held) == \
        reporting.page(run_dir, figures=False)


def test_attack_a_record_not_of_the_directory_is_refused_from_memory_too(run_dir: Path
                                                                         ) -> None:
    held = copy.deepcopy(proven_records(run_dir))
    held[0]["params_requested"]["epsilon"] = 99.0  # its key no longer follows
    with pytest.raises(ResultsCorruptError, match="not one of this directory's runs"):
        reporting.page(run_dir, figures=False, records=held)


def test_printed_numbers_over_groups_are_those_over_every_record() -> None:
    rng = random.Random(5)
    records = []
    for i in range(600):
        eps, n = rng.choice([0.5, 1.0, 2.0]), rng.choice([10, 100])
        proto = rng.choice(["a", "b"])
        records.append({"key": str(i), "protocol": proto, "point": {"params.epsilon": eps},
                        "params_requested": {"epsilon": eps}, "data": {"n": n},
                        "metrics": {"err": rng.random() * eps + (0.0 if i % 7 else 1e-17)}})
    entries = [{"source": "T1", "metric": "err", "x": "params.epsilon", "at": [0.5, 1.0, 2.0],
                "values": [0.1, 0.2, 0.3], "where": {"protocol": "a", "data.n": 10}},
               {"source": "T2", "metric": "err", "x": "params.epsilon", "at": [0.5, 2.0],
                "values": [0.1, 0.3], "where": {"data.n": 100}, "versus": {"protocol": "b"},
                "form": "difference"}]
    grouped = published.compare(entries, records)
    one_by_one = []
    for e in entries:
        for value in e["at"]:
            ours, se, n = published._mean_se(records, "err", {**e["where"]}, e["x"], value)
            if "versus" in e:
                b, sb, nb = published._mean_se(records, "err", {**e["where"], **e["versus"]},
                                               e["x"], value)
                ours, se = published._gap("difference", ours, se, b, sb)
                n = min(n, nb)
            one_by_one.append((ours, se, n))
    assert [(r["ours"], r["se"], r["repeats"]) for r in grouped] == one_by_one
    assert all(r["repeats"] > 10 for r in grouped)

"""How long each shipped scenario takes, so that choosing a short one is not guesswork.

``ldpsim list`` prints each scenario's run count and its duration from
``scenarios/durations.json``, which this module measures (and, with ``--write``, updates)::

    python -m ldpsim.simulator.bench.durations --write    # every shipped scenario
    python -m ldpsim.simulator.bench.durations demo paper000_fig5_epsilon --sample 40
    python -m ldpsim.simulator.bench.durations --from results/reproduce --jobs 2 --write

The last form takes the papers' scenarios' times, measured whole, from what ``ldpsim reproduce
--all --jobs 2`` wrote (each paper's ``reproduce.json``: the seconds its sweep took, figures
included): those entries say ``"whole": true`` and the ``jobs`` they ran with, and they are
what ``ldpsim list`` and the ETA of ``ldpsim reproduce`` use for those scenarios.

A scenario of a few runs is timed whole; a larger one on an evenly spaced sample of its runs
(every ``len/sample``-th of the sweep's run order, so each axis's range is covered), each
executed as ``ldpsim run`` executes it (same backend, one after another, sharing the ground
truth of a data set as a sweep does), and its total is the sample's mean time times the number
of runs: the time of ``ldpsim run SCENARIO --jobs 1`` on the measuring machine (``--jobs 2``
shortens a sweep of many runs by up to half). The file records the machine's cores and the
sample size beside each figure, and the run count it was measured at: a scenario whose sweep
has changed since shows no duration until it is measured again (a test keeps the file
current).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

from ldpsim.simulator.scenario import scenario as sc
from ldpsim.simulator.scenario.measured import DURATIONS_FILE, duration_text, load_durations

#: runs timed per scenario by default (all of them for a smaller scenario)
SAMPLE = 24
#: the shipped scenarios' directory
SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def spread(n: int, k: int) -> list[int]:
    """``min(n, k)`` indices of ``range(n)``, evenly spaced, first and last included."""
    if n <= k:
        return list(range(n))
    if k == 1:
        return [0]
    return sorted({round(i * (n - 1) / (k - 1)) for i in range(k)})


def measure(path: Path, sample: int = SAMPLE) -> dict[str, Any]:
    """Time ``sample`` runs of the scenario at ``path`` (module docstring); the entry the
    durations file holds for it."""
    from ldpsim.simulator.sweep.execute import TruthCache, execute

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scenario = sc.load(path)
    runs = scenario.runs()
    picked = spread(len(runs), sample)
    truth = TruthCache()
    took = []
    try:
        for i in picked:
            t0 = time.perf_counter()
            execute(runs[i], truth)
            took.append(time.perf_counter() - t0)
    finally:
        truth.close()
    total = sum(took) / len(took) * len(runs)
    return {"runs": len(runs), "seconds": round(total, 1 if total < 100 else None),
            "sampled": len(picked), "cores": os.cpu_count() or 1}


def from_reproduce(out_dir: Path, jobs: int) -> dict[str, dict[str, Any]]:
    """The entries of every scenario ``ldpsim reproduce`` finished into ``out_dir`` (its
    ``paper*/reproduce.json``), timed whole at ``--jobs jobs``: only those that ran at the
    shipped settings (the run count of their scenario file); a scenario resumed over several
    calls counts the sum of their times."""
    out: dict[str, dict[str, Any]] = {}
    for status in sorted(Path(out_dir).glob("paper*/reproduce.json")):
        for o in json.loads(status.read_text(encoding="utf-8")):
            path = SCENARIOS / f"{o['name']}.toml"
            if o.get("status") != "done" or not path.is_file() or not o.get("seconds"):
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                runs = len(sc.load(path).runs())
            if int(o.get("runs") or 0) != runs:
                continue
            total = float(o["seconds"])
            out[o["name"]] = {"runs": runs, "seconds": round(total, 1 if total < 100 else None),
                              "sampled": runs, "cores": os.cpu_count() or 1, "jobs": jobs,
                              "whole": True}
    return out


def _write(out: dict[str, dict[str, Any]]) -> None:
    text = json.dumps(dict(sorted(out.items())), indent=1) + "\n"
    (SCENARIOS / DURATIONS_FILE).write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ldpsim.simulator.bench.durations",
                                 description="measure the shipped scenarios' durations into "
                                             f"scenarios/{DURATIONS_FILE}")
    ap.add_argument("names", nargs="*", help="scenarios to measure (default: all)")
    ap.add_argument("--sample", type=int, default=SAMPLE, help="runs timed per scenario")
    ap.add_argument("--from", dest="source", metavar="DIR",
                    help="take the papers' scenarios' times from DIR, where `ldpsim reproduce` "
                         "wrote (timed whole)")
    ap.add_argument("--jobs", type=int, default=2,
                    help="with --from: the --jobs that reproduce ran with (default 2)")
    ap.add_argument("--write", action="store_true",
                    help=f"store the figures in scenarios/{DURATIONS_FILE} (else only print)")
    args = ap.parse_args(argv)
    if args.source:
        out = {**load_durations(), **from_reproduce(Path(args.source), args.jobs)}
        for name, entry in sorted(from_reproduce(Path(args.source), args.jobs).items()):
            print(f"{name}: {entry['runs']} runs, {duration_text(entry['seconds'])} (whole, "
                  f"--jobs {entry['jobs']})")
        if args.write:
            _write(out)
        return 0
    files = sorted(SCENARIOS.glob("*.toml"))
    if args.names:
        files = [f for f in files if f.stem in set(args.names)]
    out = load_durations()
    for f in files:
        try:
            entry = measure(f, args.sample)
        except Exception as e:  # noqa: BLE001 - a scenario that cannot run here is named
            print(f"{f.stem}: not measured: {e}", file=sys.stderr)
            continue
        out[f.stem] = entry
        print(f"{f.stem}: {entry['runs']} runs, about {duration_text(entry['seconds'])} "
              f"({entry['sampled']} timed)", flush=True)
        if args.write:  # after each: an interrupted measurement keeps what it measured
            _write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

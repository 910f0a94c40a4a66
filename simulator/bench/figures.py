"""The documentation's figures: each family's headline scenario drawn in the paper style, its
headline figure copied to ``docs/img/`` as SVG (``make figures`` runs this module)::

    python -m ldpsim.simulator.bench.figures                  # all five, about 10 min of CPU time
    python -m ldpsim.simulator.bench.figures rank ethics      # some families
    python -m ldpsim.simulator.bench.figures rank --set repeats=2 --out results/figures-quick

Each scenario runs as ``ldpsim run SCENARIO --style paper --set plot.width=W --secret seed
--out OUT/SCENARIO`` (reproducible from the scenario alone, so the figures are the same on
every machine up to matplotlib's version); a directory that holds the runs already is resumed
and its figures kept. The scenarios that read a real data set (SAFARI on SUSHI) need the data
folder (``ldpsim data``).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple


class Headline(NamedTuple):
    """A family's headline figure: its scenario, the figure's file stem, its width (inches:
    3.5 one column, 7 both) and the file it becomes in ``docs/img``."""

    scenario: str
    stem: str
    width: float
    image: str


#: each family's headline figure (``docs/families/*.md`` shows it)
HEADLINES: dict[str, Headline] = {
    "rank": Headline("paper000_fig5_epsilon", "plot_error_rate_vs_params.epsilon", 7.0,
                     "rank_paper000_fig5_error_rate.svg"),
    "truth": Headline("paper001_fig2_epsilon", "plot_mae_change_vs_params.epsilon", 7.0,
                      "truth_paper001_fig2_mae_change.svg"),
    "vote": Headline("paper002_fig4", "plot_correct_vs_params.epsilon", 7.0,
                     "vote_paper002_fig4_correct.svg"),
    "safari": Headline("paper003_fig3_d_sushi", "plot_avd_q1_vs_data.d", 3.5,
                       "safari_paper003_fig3_avd_q1.svg"),
    "ethics": Headline("paper004_fig4_compare", "plot_accuracy_vs_params.epsilon", 3.5,
                       "ethics_paper004_fig4_accuracy.svg"),
}
#: where the figures go
DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"


def command(h: Headline, out: Path, extra: list[str]) -> list[str]:
    """The ``ldpsim run`` that draws ``h``'s figure into ``out/SCENARIO``."""
    return [sys.executable, "-m", "ldpsim", "run", h.scenario, "--style", "paper", "--set",
            f"plot.width={h.width:g}", "--secret", "seed", "--out", str(out / h.scenario),
            "--no-progress", "-q", *extra]


def main(argv: list[str] | None = None) -> int:
    """Draw the families' headline figures (all, or those named) and copy them to
    ``docs/img`` (or ``--img``); 1 when a run fails."""
    p = argparse.ArgumentParser(prog="python -m ldpsim.simulator.bench.figures",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("families", nargs="*", metavar="FAMILY",
                   help=f"among {', '.join(HEADLINES)} (default: all)")
    p.add_argument("--out", default="results/figures", help="the runs' directories")
    p.add_argument("--img", default=str(DOCS_IMG), help="where the SVG files go")
    p.add_argument("--jobs", default="2", help="runs at once (ldpsim run --jobs)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="an override for every scenario (a quick look: repeats=2)")
    args = p.parse_args(argv)
    unknown = [f for f in args.families if f not in HEADLINES]
    if unknown:
        p.error(f"{', '.join(unknown)}: not a family; allowed: {', '.join(HEADLINES)}")
    extra = ["--jobs", args.jobs] + [x for kv in args.set for x in ("--set", kv)]
    for family in args.families or list(HEADLINES):
        h = HEADLINES[family]
        cmd = command(h, Path(args.out), extra)
        print(" ".join(cmd[2:]), flush=True)
        if subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode not in (0, 3):
            print(f"{family}: {h.scenario} failed", file=sys.stderr)
            return 1
        target = Path(args.img) / h.image
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(args.out) / h.scenario / f"{h.stem}.svg", target)
        print(f"  -> {target}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

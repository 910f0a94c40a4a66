"""One figure across the five families on 10^6 phones: the ``deployment_*`` scenarios' round
time, dropouts and utility against the round deadline.

Run the five scenarios, then this script (it reads their results directories; it needs the
``plot`` and ``pandas`` extras)::

    for f in rank vote safari truth ethics; do ldpsim run deployment_$f; done
    python examples/deployment_compare.py --out deployment_compare.png

With ``--curator-out``, also the figure of ``deployment_curator_link`` (run it first): the
virtual run time, the dropout rate and the error rate against the curator's link capacity
(each way), without a deadline and with a 0.2 s one.

Top: the virtual run time and the dropout rate (offline or late) of every family against the
deadline. Bottom: each family's headline metric against the deadline, with its level without
a deadline dashed; bands are 95% confidence intervals over the repeats, stopped at the
metric's declared range as ldpsim's own figures stop them (an accuracy band never above 1 or
below 0).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import ldpsim

#: family -> (results directory name, headline metric)
FAMILIES = {
    "rank: LDP-KwikSort:RR": ("deployment_rank", "error_rate"),
    "vote: DPWeVote (4 rounds)": ("deployment_vote", "sq_err_w"),
    "SAFARI (2 phases)": ("deployment_safari", "avd_q1"),
    "truth: 2-Layer": ("deployment_truth", "mae"),
    "ethics: VLDP": ("deployment_ethics", "accuracy"),
}
DEADLINE = "deployment.round_deadline_s"


def declared_range(results: ldpsim.Results, metric: str) -> tuple[float | None, float | None]:
    """(low, high) of ``metric`` as its protocol declares it (None: open on that side)."""
    meaning = results.metrics().set_index("name")
    if metric not in meaning.index:
        return None, None
    ends = (meaning.loc[metric, "low"], meaning.loc[metric, "high"])
    return tuple(None if v is None or v != v else float(v) for v in ends)  # NaN: none


def band(means: list[float], halves: list[float], low: float | None = None,
         high: float | None = None) -> tuple[list[float], list[float]]:
    """The band ``mean ± half`` of each point, its lower edge raised to ``low`` and its upper
    edge lowered to ``high`` where they are given (the metric's declared range)."""
    lo = [m - h for m, h in zip(means, halves, strict=True)]
    hi = [m + h for m, h in zip(means, halves, strict=True)]
    if low is not None:
        lo = [max(v, low) for v in lo]
    if high is not None:
        hi = [min(v, high) for v in hi]
    return lo, hi


def lines(results_dir: Path, metric: str) -> dict[str, dict]:
    """Per line (protocol and its other swept settings): its points at every finite deadline
    (sorted), their band (``lo``, ``hi``: the 95% interval within the metric's declared range)
    and its row without a deadline."""
    results = ldpsim.load(results_dir)
    summary = results.summary()
    low, high = declared_range(results, metric)
    others = [c for c in summary.columns if c.startswith("params.")]
    out: dict[str, dict] = {}
    for keys, group in summary.groupby(["protocol", *others], dropna=False, sort=False):
        keys = keys if isinstance(keys, tuple) else (keys,)
        label = "".join(f"{c.split('.', 1)[1]}={v:g} " for c, v in zip(others, keys[1:],
                                                                          strict=True))
        free = group[group[DEADLINE].isna()]
        timed = group.dropna(subset=[DEADLINE]).sort_values(DEADLINE)
        half = [1.96 * sd / math.sqrt(r) if r > 1 else 0.0
                for sd, r in zip(timed[f"{metric}_std"], timed["repeats"], strict=True)]
        lo, hi = band(timed[f"{metric}_mean"].tolist(), half, low, high)
        out[label.strip()] = {
            "deadline": timed[DEADLINE].tolist(), "wall": timed["virtual.wall_s"].tolist(),
            "drop": timed["virtual.dropout_rate"].tolist(),
            "metric": timed[f"{metric}_mean"].tolist(), "half": half, "lo": lo, "hi": hi,
            "free": None if free.empty else float(free[f"{metric}_mean"].iloc[0]),
            "free_wall": None if free.empty else float(free["virtual.wall_s"].iloc[0])}
    return out


#: the curator-link scenario's results directory, swept axis, and where its "no limit" is drawn
CURATOR = "deployment_curator_link"
CAPACITY = "deployment.curator_down_mbps"
UNLIMITED_AT = 1e5


def curator_lines(results_dir: Path) -> tuple[dict[str, dict], float]:
    """Per deadline (its label): the capacities (no limit drawn at ``UNLIMITED_AT``) and the
    run time, dropout rate and error rate (mean, 95% band) at each; and the wire bytes the
    curator sends in a round (the mean over the runs of the first round's)."""
    results = ldpsim.load(results_dir)
    summary = results.summary()
    low, high = declared_range(results, "error_rate")
    out: dict[str, dict] = {}
    for deadline, group in summary.groupby(DEADLINE, dropna=False, sort=True):
        group = group.assign(cap=group[CAPACITY].fillna(UNLIMITED_AT)).sort_values("cap")
        half = [1.96 * sd / math.sqrt(r) if r > 1 else 0.0
                for sd, r in zip(group["error_rate_std"], group["repeats"], strict=True)]
        lo, hi = band(group["error_rate_mean"].tolist(), half, low, high)
        label = "no deadline" if deadline != deadline else f"deadline {deadline:g} s"
        out[label] = {"cap": group["cap"].tolist(), "wall": group["virtual.wall_s"].tolist(),
                      "drop": group["virtual.dropout_rate"].tolist(),
                      "metric": group["error_rate_mean"].tolist(), "lo": lo, "hi": hi}
    sent = [r["comm"]["per_round"][0]["wire_bytes_down"] for r in results]
    return out, sum(sent) / len(sent)


def curator_figure(results_dir: Path, out: str) -> None:
    """The curator-link figure (see the module docstring) into ``out``."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, NullLocator

    drawn, sent = curator_lines(results_dir)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
    for j, (label, ln) in enumerate(drawn.items()):
        style = dict(color=f"C{j}", marker="os"[j % 2], label=label)
        axes[0].plot(ln["cap"], ln["wall"], **style)
        axes[1].plot(ln["cap"], ln["drop"], **style)
        axes[2].plot(ln["cap"], ln["metric"], **style)
        axes[2].fill_between(ln["cap"], ln["lo"], ln["hi"], color=f"C{j}", alpha=0.15,
                             linewidth=0)
    caps = sorted({c for ln in drawn.values() for c in ln["cap"] if c < UNLIMITED_AT})
    axes[0].plot(caps, [8e-6 * sent / c for c in caps], color="grey", linestyle=":",
                 label=f"sending a round's {sent / 1e6:.0f} MB of queries")
    ticks = [*caps, UNLIMITED_AT]
    for ax in axes:
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticklabels([f"{t:g}" for t in caps] + ["no limit"])
        ax.set_xlabel("curator's link each way (Mbit/s)")
        ax.grid(True, alpha=0.3)
    axes[0].set_yscale("log")
    axes[0].set_ylabel("virtual run time (s)")
    axes[1].set_ylabel("dropout rate (offline or late)")
    axes[2].set_ylabel("error_rate")
    axes[0].legend(fontsize="small")
    fig.suptitle("10^6 phones of the mobile trace, LDP-KwikSort:RR: when the curator's own "
                 "link binds")
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    print(f"wrote {out}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default="results", help="where the five directories are")
    ap.add_argument("--out", default="deployment_compare.png")
    ap.add_argument("--curator-out", default=None,
                    help=f"also draw {CURATOR}'s figure into this file")
    args = ap.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if args.curator_out:
        curator_figure(Path(args.results) / CURATOR, args.curator_out)

    fig = plt.figure(figsize=(17, 8.5))
    grid = fig.add_gridspec(2, 10)
    top = [fig.add_subplot(grid[0, 0:5]), fig.add_subplot(grid[0, 5:10])]
    bottom = [fig.add_subplot(grid[1, 2 * i:2 * i + 2]) for i in range(5)]
    for i, (family, (name, metric)) in enumerate(FAMILIES.items()):
        path = Path(args.results) / name
        if not path.is_dir():
            print(f"skipped {family}: no {path} (ldpsim run {name})")
            continue
        ax = bottom[i]
        for j, (label, ln) in enumerate(lines(path, metric).items()):
            style = dict(color=f"C{i}", marker="osD^v"[i], linestyle=["-", "--"][j % 2])
            name_ = f"{family}" + (f" ({label})" if label else "")
            top[0].plot(ln["deadline"], ln["wall"], label=name_, **style)
            if ln["free_wall"] is not None:  # without a deadline: a round waits for its last
                top[0].axhline(ln["free_wall"], color=f"C{i}", linestyle=":", linewidth=1)
            top[1].plot(ln["deadline"], ln["drop"], label=name_, **style)
            ax.plot(ln["deadline"], ln["metric"], label=label or None, **style)
            ax.fill_between(ln["deadline"], ln["lo"], ln["hi"], color=f"C{i}", alpha=0.15,
                            linewidth=0)
            if ln["free"] is not None:
                ax.axhline(ln["free"], color=f"C{i}", linestyle=":", linewidth=1)
        ax.set_title(family, fontsize="medium")
        ax.set_ylabel(f"{metric} (dotted: no deadline)")
        if len(ax.get_lines()) > 2:
            ax.legend(fontsize="x-small")
    from matplotlib.ticker import FixedLocator, NullLocator

    ticks = [0.02, 0.05, 0.1, 0.2, 0.5]
    for ax in (*top, *bottom):
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticklabels([f"{t:g}" for t in ticks])
        ax.set_xlabel("round deadline (virtual s)")
        ax.grid(True, alpha=0.3)
    top[0].set_yscale("log")
    top[0].set_ylabel("virtual run time (s; dotted: no deadline)")
    top[1].set_ylabel("dropout rate (offline or late)")
    top[1].legend(fontsize="small", loc="upper right")
    fig.suptitle("10^6 phones of the mobile trace: what a round deadline does, per family")
    fig.tight_layout()
    fig.savefig(args.out, dpi=100)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

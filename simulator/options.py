"""The command line's options: one table per command, read by the command line's parser
(``cli.build_parser``) and by ``start.py``'s early look at ``ldpsim run``, so that the options
are listed once. It imports the standard library only (``start.py`` reads it before numpy).

A row is ``(flags, kwargs)``: what ``argparse``'s ``add_argument`` takes. Two values live in
modules this one does not import: ``BACKEND_NAMES`` and ``EXECUTOR_NAMES`` stand for them, and
the command line's parser fills them in.
"""

from __future__ import annotations

import argparse
from typing import Any

#: an option: its flags (or its positional name) and ``add_argument``'s keyword arguments
Option = tuple[tuple[str, ...], dict[str, Any]]


class Late(str):
    """A value of a table's that the command line's parser fills in."""


#: the backends' names (``simulator.backends.BACKENDS``)
BACKEND_NAMES = Late("backends")
#: the sweep's executors (``session.runconfig.EXECUTORS``)
EXECUTOR_NAMES = Late("executors")


def opt(*flags: str, **kwargs: Any) -> Option:
    """One row of a table: ``add_argument(*flags, **kwargs)``."""
    return flags, kwargs


def _jobs(text: str) -> int | str:
    """argparse type of ``run --jobs``: "auto" or an integer (range checked with the
    scenario, as ``[runtime] jobs``)."""
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected \"auto\" or an integer >= 1"
                                         ) from None


def _batch(text: str) -> int | str:
    """argparse type of ``bench --batch``: what ``_jobs`` reads, an integer at least 1."""
    value = _jobs(text)
    if value != "auto" and value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected \"auto\" or an integer >= 1")
    return value


def _sizes(text: str) -> str:
    """argparse type of ``bench --sizes``: positive integers, comma separated."""
    try:
        if all(int(x) > 0 for x in text.split(",")):
            return text
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"{text!r}: expected positive integers, comma separated, "
                                     "e.g. 100000,1000000")


#: where the named data sets (``data:NAME/FILE``) are read from: ``LDPSIM_DATA`` for this
#: process and every one it starts (``data_dir_of``)
DATA_DIR: Option = opt("--data-dir", metavar="DIR",
                       help="the folder of the real data sets the scenarios name "
                            "(data:NAME/FILE; sets LDPSIM_DATA; default: shared/data beside "
                            "the checkout; `ldpsim data` lists them)")


def data_dir_of(argv: list[str]) -> str | None:
    """The value of ``--data-dir`` in ``argv`` (the last one), None without one: read before
    anything starts a process (``start.py``'s fork server), so that every process has it."""
    value = None
    for i, a in enumerate(argv):
        if a == "--":
            break
        if a == "--data-dir" and i + 1 < len(argv):
            value = argv[i + 1]
        elif a.startswith("--data-dir="):
            value = a.partition("=")[2]
    return value


#: the figures' styles (``plot_spec.STYLES``): a notebook's, or a paper's column
STYLES = ("notebook", "paper")


def _style(what: str) -> Option:
    """``--style``: the figures' style for ``what``."""
    return opt("--style", choices=STYLES,
               help=f"the figures' style for {what}: notebook (a title, the legend beside) or "
                    "paper (vector PDF and SVG at a column's width, [plot] width, default 3.5 "
                    "in; no title, lines told apart by marker and dash)")


#: the options of a command that runs a scenario (``run``, ``curator``)
SCENARIO_RUN: tuple[Option, ...] = (
    opt("scenario", help="scenario TOML file (or a name in scenarios/)"),
    opt("--set", action="append", metavar="KEY=VALUE",
        help="override any key, e.g. params.epsilon=1.0 or data.n=100000"),
    opt("--seed", type=int, help="scenario seed"),
    opt("--out", help="results directory (default results/NAME)"),
    opt("--secret", metavar="FILE|seed",
        help="the experiment's master secret, from which every agent's data "
             "and coins derive: a key file secret.key (of `ldpsim keys`, or of "
             "a results directory, to reproduce its runs), or 'seed' (each "
             "run's seed: reproducible from the scenario alone, no secret from "
             "the curator or the pools). Default: a fresh one per sweep, kept "
             "in the results directory as secret.key (the hosts backend needs "
             "the key file of `ldpsim keys`)"),
    opt("--no-progress", action="store_true", help="no progress bar"),
    opt("--beside", action="store_true",
        help="if the results directory holds runs with other settings, write to "
             "the first free DIR-2, DIR-3, ... instead of refusing"),
    DATA_DIR,
)

#: ``ldpsim run``
RUN: tuple[Option, ...] = (
    *SCENARIO_RUN,
    opt("--backend", choices=BACKEND_NAMES),
    opt("--jobs", type=_jobs, dest="run_jobs", metavar="N",
        help="runs executed at once, each in a worker process (runtime.jobs; "
             "default auto: as many as the cores hold; 1 with the hosts backend)"),
    opt("--executor", choices=EXECUTOR_NAMES,
        help="where the sweep's runs execute: local (this machine, --jobs at once) "
             "or dask (each run a task on the cluster of --dask; runtime.executor)"),
    opt("--dask", metavar="ADDRESS",
        help="the Dask cluster (dask.address) that --executor dask runs the sweep's "
             "runs on, or --backend dask one run's pools: tcp://HOST:PORT, or "
             "local / local:N for a LocalCluster of N workers here. Needs pip "
             "install 'ldpsim[dask]'"),
    _style("the run's figures (plot.style)"),
)

#: ``ldpsim curator``
CURATOR: tuple[Option, ...] = (
    *SCENARIO_RUN,
    opt("--bind", required=True, help="endpoint to bind, e.g. tcp://*:5555"),
    opt("--pools", type=int, help="the number of pools it waits for (runtime.pools)"),
    opt("--token", help="the token pools register with (default: the token file "
                        "beside --secret)"),
    opt("--curve", help="CURVE key directory from `ldpsim keys`: encrypt and accept "
                        "only enrolled pools"),
)

#: ``ldpsim agents``
AGENTS: tuple[Option, ...] = (
    opt("--connect", required=True, help="curator endpoint, e.g. tcp://host:5555"),
    opt("--keys", required=True, metavar="FILE",
        help="this pool's key file (pool-I.keys of `ldpsim keys`): its agents' keys "
             "only, and the key that checks the orchestrator's signatures"),
    opt("--pool", help="I/P: this is pool I of P (checked against --keys)"),
    opt("--token", help="the registration token (default: the token file beside "
                        "--keys): answers the curator's challenge; never sent"),
    opt("--max-epsilon", type=float, metavar="E",
        help="refuse runs whose agents would spend more than E (and protocols "
             "without a local claim)"),
    opt("--protocols", metavar="P,Q",
        help="take part only in these protocols (comma-separated)"),
    opt("--lifetime-epsilon", type=float, metavar="L",
        help="refuse rounds that would take an agent past L on one data set over "
             "this pool's lifetime"),
    opt("--new-lifetime", action="store_true",
        help="start a new lifetime: write an empty state file beside --keys "
             "(pool-I.state; never over an existing one). Without it the pool "
             "reads that file (the runs its agents answered, what they spent) and "
             "refuses to start if it is missing or unreadable"),
    opt("--keep-serving", action="store_true",
        help="stay when the curator ends its sweep (DONE) and wait for the next "
             "curator, up to --idle-timeout (default: exit; the state file keeps "
             "the pool's record either way)"),
    opt("--curve-key", help="CURVE: this pool's secret key file (pool-I.key_secret)"),
    opt("--curve-server", help="CURVE: the curator's public key file (server.key)"),
    opt("--timeout", type=float, default=30.0, help="round timeout (s)"),
    opt("--idle-timeout", type=float, default=600.0,
        help="exit after this long without hearing from the curator (s)"),
    DATA_DIR,
)

#: ``ldpsim audit``
AUDIT: tuple[Option, ...] = (
    opt("scenario", help="scenario TOML file (or a name in scenarios/)"),
    opt("--set", action="append", metavar="KEY=VALUE", help="override any key"),
    opt("--seed", type=int, help="scenario seed"),
    opt("--trials", type=int, default=2000,
        help="runs per neighbouring row (and for the inference attacks)"),
    opt("--target", type=int, help="agent to attack (default: first honest one)"),
    opt("--path", choices=("auto", "batch", "full"), default="auto",
        help="batch: the target's copies as one block (the curator colludes); "
             "full: one protocol run per trial; auto: batch where it reproduces "
             "the full runs exactly (default)"),
    opt("--coins", choices=("auto", "per-trial", "fixed"), default="auto",
        help="the coalition's coins: fresh in every trial (per-trial), or trial "
             "0's in every trial, the target's alone fresh (fixed); auto: "
             "per-trial where the batch path allows it, else fixed where it "
             "allows that, else per-trial on the full path (default)"),
    opt("--jobs", type=int, default=1,
        help="processes for the epsilon audit's trials: full-path runs or "
             "batch-path blocks (default 1)"),
    opt("--until-lower", type=float, metavar="EPS",
        help="stop a setting once its epsilon lower bound reaches EPS (looks at "
             "1/8, 1/4, 1/2 and all of --trials; alpha is split over the looks)"),
    opt("--dask", metavar="ADDRESS",
        help="audit the settings as tasks on a Dask cluster (fewer settings "
             "than worker threads: each setting's trial blocks as tasks): "
             "tcp://HOST:PORT, or local / local:N (pip install 'ldpsim[dask]')"),
    opt("--out", help="directory for audit.jsonl (default results/NAME-audit)"),
    opt("--no-progress", action="store_true", help="no progress bar"),
    DATA_DIR,
)

#: ``ldpsim keys``
KEYS: tuple[Option, ...] = (
    opt("dir", help="directory for the key files"),
    opt("--pools", type=int, default=2, help="number of pools"),
    opt("--agents", required=True, metavar="N[,N...]",
        help="the data sets' sizes (data.n): each pool gets the keys of its block "
             "of agents for each"),
)

#: ``ldpsim summary``
SUMMARY: tuple[Option, ...] = (
    opt("out", help="results directory"),
    opt("--plots", action="store_true", help="also redraw the plots"),
    opt("--include-degraded", action="store_true",
        help="keep degraded runs (that lost agents) in the table, CSV and plots"),
    opt("--rows", type=int, metavar="N",
        help="show at most N rows of the table (default: all)"),
    _style("--plots (default: the sweep's [plot] style)"),
)

#: ``ldpsim report``
REPORT: tuple[Option, ...] = (
    opt("out", help="results directory"),
    opt("--html", metavar="FILE", help="where to write it (default DIR/report.html)"),
    _style("the report's figures (default: the sweep's [plot] style)"),
)

#: ``ldpsim verify``
VERIFY: tuple[Option, ...] = (
    opt("out", help="results directory"),
    opt("--sample", type=float, default=1.0, metavar="FRACTION",
        help="re-execute this fraction of the stored runs, drawn afresh each time "
             "(default: all)"),
    opt("--sample-seed", type=int, metavar="N",
        help="draw the sample with this seed (the one a previous verify printed): "
             "the same runs again"),
    opt("--jobs", type=int, default=1, metavar="N",
        help="runs re-executed at once (worker processes)"),
    opt("--backend", choices=["inproc", "processes"],
        help="where to re-execute (default: the sweep's own when local, else "
             "processes; the results are the same on every backend)"),
    opt("--secret", metavar="FILE|seed",
        help="the secret the runs were executed with (default: the one each stored "
             "sweep names, or the directory's own secret.key)"),
    opt("--no-progress", action="store_true", help="no progress bar"),
    DATA_DIR,
)

#: ``ldpsim reproduce``
REPRODUCE: tuple[Option, ...] = (
    opt("papers", nargs="*", metavar="PAPER",
        help="the papers: 000 to 004 (or paper000 ...); `ldpsim list` gives each one's time"),
    opt("--all", action="store_true", help="every paper"),
    opt("--out", default="results/reproduce", metavar="DIR",
        help="where to write: DIR/paperNNN/NAME per scenario, DIR/paperNNN/index.html per "
             "paper, DIR/index.html (default results/reproduce)"),
    opt("--set", action="append", metavar="KEY=VALUE",
        help="override a key of every scenario, e.g. repeats=2 for a quick look"),
    opt("--jobs", type=_jobs, dest="run_jobs", metavar="N",
        help="runs executed at once (runtime.jobs; default: each scenario's)"),
    opt("--style", choices=STYLES, default="paper",
        help="the figures' style (plot.style of every scenario): paper (default: vector PDF "
             "and SVG at a column's width, as a paper prints them) or notebook"),
    opt("--no-progress", action="store_true", help="no progress bar"),
    DATA_DIR,
)

#: ``ldpsim data``
DATA: tuple[Option, ...] = (DATA_DIR,)

#: ``ldpsim bench``
BENCH: tuple[Option, ...] = (
    opt("--sizes", default="100000,1000000", type=_sizes,
        help="agent counts, comma separated"),
    opt("--pools", type=int, default=2),
    opt("--batch", type=_batch, default="auto",
        help='agents per query batch of every processes run: "auto" (the runtime '
             "default) or a number"),
    opt("--quick", action="store_true", help="small sizes (smoke test)"),
    opt("--no-scenarios", action="store_true",
        help="skip the protocol benchmarks (scenarios/bench_*.toml)"),
    opt("--audit-trials", type=int, default=10**6, metavar="N",
        help="privacy audit benchmark: N trials per audit setting, and the GRR "
             "audit next to ldp-audit's (0: skip; default 1000000)"),
    opt("--kernels", type=int, default=None, metavar="N",
        help="each local protocol's rounds on the processes backend against its own "
             "kernel in one process, at N agents (0: skip; default 1000000; "
             "--quick: 2000)"),
    opt("--peers", type=int, default=None, metavar="N",
        help="GRR, OLH and Hadamard against multi-freq-ldpy and pure-ldp (pip "
             "install 'ldpsim[bench]') at N users (0: skip; default 1000000; "
             "--quick: 2000)"),
    opt("--peer-users", type=int, default=None, metavar="M",
        help="users each peer is timed on, its time scaled linearly to N (default "
             "100000; --quick: 200)"),
    opt("--sweeps", type=int, default=None, metavar="N",
        help="the same sweep of N small inproc runs (and N/5 at n = 100000) with "
             "--jobs 1, --jobs 2 and on a 2-worker Dask LocalCluster, as speed-ups "
             "(0: skip; default 200; --quick: 12)"),
    opt("--dask-agents", type=int, default=None, metavar="N",
        help="the dask backend (2 pools on 2 workers) against the processes backend "
             "at N agents (0: skip; default 1000000; --quick: 20000)"),
    opt("--headline", action="store_true",
        help="only the first table: the audit's trials/s, a --jobs 2 sweep's "
             "speed-up and a 10-agent run's start, each beside its peer"),
    opt("--engines-only", action="store_true",
        help="only the --sweeps and --dask-agents tables"),
    opt("--calibrate", action="store_true",
        help="only the compute-cost model of [deployment]: each protocol's "
             "randomizer per agent and round (--write stores it in "
             "scenarios/compute_costs.json)"),
    opt("--write", action="store_true",
        help="with --calibrate: write scenarios/compute_costs.json"),
    opt("--deployment", type=int, default=None, metavar="N",
        help="what the deployment model costs in a run of N agents (0: skip; "
             "default 1000000; --quick: 20000)"),
    opt("--deployment-only", action="store_true",
        help="only the --deployment table"),
)

#: every command's, after its own
COMMON: tuple[Option, ...] = (
    opt("-v", "--verbose", action="store_true", help="debug logs too"),
    opt("-q", "--quiet", action="store_true",
        help="only warnings and errors on stderr"),
)

#: the commands in the order ``ldpsim --help`` lists them: each one's name, the keyword
#: arguments of its parser (``add_parser``'s) and its options (``COMMON`` follows them)
COMMANDS: tuple[tuple[str, dict[str, str], tuple[Option, ...]], ...] = (
    ("run", {"help": "run a scenario or sweep (resumes an interrupted one)",
             "epilog": "exit codes: 0 all runs complete; 1 a run failed; 2 invalid scenario or "
                       "options; 3 some runs degraded (lost agents: dead, silent or unregistered "
                       "pools), left out of the summary and redone when the same command is run "
                       "again; 130 interrupted"}, RUN),
    ("curator", {"help": "hosts backend: bind, wait for pools, run the scenario"}, CURATOR),
    ("agents", {"help": "hosts backend: serve one agent pool"}, AGENTS),
    ("audit", {"help": "attacks of the semi-honest coalition and an empirical "
                       "epsilon audit (inproc)"}, AUDIT),
    ("keys", {"help": "create a deployment's keys: the master secret, a token, "
                      "each pool's agent keys, CURVE keys"}, KEYS),
    ("list", {"help": "protocols, data kinds and scenarios"}, ()),
    ("data", {"help": "the real data sets the scenarios name: where each comes from, its "
                      "licence, how to get it, and whether the data folder holds it"}, DATA),
    ("reproduce", {"help": "run every scenario of a paper at its settings (resumably) and "
                           "write a report per scenario, a page per paper and an index"},
     REPRODUCE),
    ("summary", {"help": "reload a results directory: table, CSV and plots"}, SUMMARY),
    ("report", {"help": "one self-contained HTML page of a results directory: "
                        "scenario, figures, table, costs, leakage, paper"}, REPORT),
    ("verify", {"help": "re-execute a results directory's runs and check its "
                        "records, tables and report against them; name each "
                        "problem (exit code 1) and what is not checked"}, VERIFY),
    ("bench", {"help": "benchmarks: transport ceiling vs full runs"}, BENCH),
)

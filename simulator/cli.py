"""The ``ldpsim`` command line (also ``python -m simulator``)."""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import tomllib
import warnings
from pathlib import Path
from typing import Any

from ldpsim.protocols import registry
from ldpsim.protocols.base import ParamError
from ldpsim.simulator import __version__, options
from ldpsim.simulator.backends import BACKENDS
from ldpsim.simulator.backends.alloc import tune_if_requested
from ldpsim.simulator.backends.curve import CurveError, make_keys
from ldpsim.simulator.backends.poolloop import pool_loop
from ldpsim.simulator.session import Limits, RunFailed
from ldpsim.simulator.session.common import block_of, counted
from ldpsim.simulator.session.keyfiles import (
    SECRET_FILE,
    KeyFileError,
    read_pool_keys,
    registration_key,
    secret_kind,
    token_of,
    write_host_keys,
)
from ldpsim.simulator.session.policy import AgentPolicy
from ldpsim.simulator.session.poolstate import PoolState, StateFileError, lock, state_path
from ldpsim.simulator.session.runconfig import EXECUTORS

from ldpsim import environment


def _scenario_files() -> list[Path]:
    from ldpsim.simulator.scenario.scenario import SCENARIO_DIRS

    seen: dict[str, Path] = {}
    for d in SCENARIO_DIRS:
        if d.is_dir():
            for f in sorted(d.glob("*.toml")):
                seen.setdefault(f.name, f)
    return list(seen.values())


def _err(*a, **k) -> None:
    """Errors and warnings the user must see (also with -q)."""
    print(*a, file=sys.stderr, **{x: y for x, y in k.items() if x != "file"})


log = logging.getLogger("ldpsim")


def _info(*a, **k) -> None:
    """Progress and context lines on stderr (hidden by -q)."""
    log.info(" ".join(str(x) for x in a))


class _Format(logging.Formatter):
    """The CLI's own lines as they are; anything else as ``level: logger: message``."""

    def format(self, record: logging.LogRecord) -> str:
        if record.name == "ldpsim" and record.levelno == logging.INFO:
            return record.getMessage()
        return f"{record.levelname.lower()}: {record.name}: {record.getMessage()}"


def _setup_logging(verbose: bool, quiet: bool) -> None:
    """-q: warnings and errors only; default: the CLI's progress lines; -v: debug logs too."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Format())
    log.handlers[:] = [handler]
    log.setLevel(logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO)
    log.propagate = False


def cmd_list(args: argparse.Namespace) -> int:
    families, kinds = registry.protocols(), registry.data_kinds()  # every family

    print("protocols:")
    for name, p in sorted(families.items()):
        params = ", ".join(f"{k}={s.default!r}" for k, s in p.params.items()) or "-"
        print(f"  {name:18s} {p.summary}\n  {'':18s} params: {params}")
    print("\ndata kinds:")
    for name, d in sorted(kinds.items()):
        args_ = ", ".join(f"{k}{'*' if s.required else ''}" for k, s in d.params.items())
        print(f"  {name:18s} {d.summary}\n  {'':18s} args: {args_}  (* required)")
    print("\nscenarios (runs; time of `ldpsim run`, figures included: -j2 measured whole with "
          "--jobs 2 by `ldpsim reproduce`, else with --jobs 1 on a sample of runs; python -m "
          "ldpsim.simulator.bench.durations):")
    for f, runs, took, first in _scenario_rows():
        name = str(f.relative_to(f.parents[1])) if len(f.parents) > 1 else str(f)
        print(f"  {name}\n  {'':4s}{runs:>7} runs  {took:>9}  {first}")
    from ldpsim.simulator.scenario.datasets import presence_lines
    from ldpsim.simulator.scenario.measured import paper_lines

    print("\n" + "\n".join(paper_lines()) + "\n\n" + "\n".join(presence_lines()))
    return 0


def cmd_data(args: argparse.Namespace) -> int:
    """``ldpsim data``: the real data sets, where each comes from and whether it is here."""
    from ldpsim.simulator.scenario.datasets import catalogue_lines

    print("\n".join(catalogue_lines()))
    return 0


def _scenario_rows() -> list[tuple[Path, str, str, str]]:
    """Each scenario file with its run count, its measured duration (``scenarios/
    durations.json``, when measured at the file's current run count) and its description."""
    from ldpsim.simulator.scenario import scenario as sc
    from ldpsim.simulator.scenario.measured import duration_text, load_durations

    measured: dict[Path, dict] = {}
    rows = []
    for f in _scenario_files():
        if f.parent not in measured:
            measured[f.parent] = load_durations(f.parent)
        entry = measured[f.parent].get(f.stem)
        try:
            first = str(tomllib.loads(f.read_text(encoding="utf-8")).get("description", ""))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError):
            first = "(not a valid TOML file)"
        if entry is not None:
            runs, took = str(entry["runs"]), "~" + duration_text(entry["seconds"])
            if entry.get("whole"):
                took += f" -j{entry.get('jobs', 1)}"
        else:  # a scenario of one's own: counted here, never measured
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    runs = str(len(sc.load(f).runs()))
            except (sc.ScenarioError, ParamError):
                runs = "?"
            took = "unmeasured"
        rows.append((f, runs, took, first))
    return rows


#: each option that sets one scenario key, and the key (``--set KEY=VALUE`` sets any)
OPTION_KEYS = (("backend", "runtime.backend"), ("pools", "runtime.pools"), ("seed", "seed"),
               ("bind", "runtime.endpoint"), ("token", "runtime.token"),
               ("curve", "runtime.curve"), ("secret", "runtime.secret"),
               ("run_jobs", "runtime.jobs"), ("executor", "runtime.executor"),
               ("dask", "dask.address"), ("style", "plot.style"))


def _load(args: argparse.Namespace, options: tuple[tuple[str, str], ...] = OPTION_KEYS):
    from ldpsim.simulator.scenario import scenario as sc

    overrides = list(args.set or [])
    for opt, key in options:
        val = getattr(args, opt, None)
        if val is not None:
            overrides.append(f"{key}={val!r}" if isinstance(val, str) else f"{key}={val}")
    return sc.load(sc.find(args.scenario), overrides)


def cmd_run(args: argparse.Namespace) -> int:
    from ldpsim.simulator.results.store import PER_ROUND_FILE, ResultsCorruptError
    from ldpsim.simulator.scenario.scenario import ScenarioError
    from ldpsim.simulator.sweep.runner import print_summary, run_scenario

    try:
        scenario = _load(args)
        out = args.out or scenario.output["dir"] or f"results/{scenario.name}"
        if args.beside:
            from ldpsim.simulator.scenario.identity import beside

            out = str(beside(out, scenario))
        taken = next((d for d in (Path(out), *Path(out).parents) if d.exists()), None)
        if taken is not None and not taken.is_dir():
            where = "--out" if args.out else "[output] dir"
            _err(f"error: {where} {out}: {taken} is a file; allowed: a directory (new, or "
                 "the results directory of earlier runs of this scenario)")
            return 2
        n_runs = len(scenario.runs())
        rt, jobs = scenario.runtime, scenario.runtime["jobs"]
        where = (f", on Dask at {rt['dask_address'] or 'local'}" if rt["executor"] == "dask"
                 else ", jobs auto" if jobs == "auto" else f", {jobs} jobs" if jobs > 1 else "")
        _info(f"scenario {scenario.name}: {counted(n_runs, 'run')}, backend {rt['backend']}, "
              f"{counted(rt['pools'], 'pool')}{where} -> {out}")
        from ldpsim.simulator.sweep.interrupt import remembered

        with remembered():  # a Ctrl-C swallowed by a finaliser still stops the sweep
            records, summary = run_scenario(scenario, out, show_progress=not args.no_progress,
                                            echo=_info)
    # ImportError, ConnectionError: no Dask installed, no scheduler answering
    except (ScenarioError, ParamError, CurveError, KeyFileError, ImportError,
            ConnectionError, ResultsCorruptError) as e:
        _err(f"error: {e}")
        return 2
    except RunFailed as e:
        _err(f"run failed: {e}")
        return 1
    except KeyboardInterrupt:
        _err("interrupted: finished runs are saved; run the same command again to resume")
        return 130
    print_summary(records)
    rounds = summary.with_name(PER_ROUND_FILE)
    print(f"\nsecret:  {secret_line(scenario.runtime, out)}"
          f"\nresults: {Path(out) / 'results.jsonl'}\nsummary: {summary}"
          + (f"\nper round: {rounds}" if rounds.is_file() else ""))
    return _warn_degraded(records, out)


def secret_line(runtime: dict, out: str | Path) -> str:
    """What ``ldpsim run`` says of the sweep's secret: where it is, or that it is the seed's."""
    kind = secret_kind(runtime, out)
    if kind == "seed":
        return "the seed's (--secret seed): reproducible from the scenario, secret from nobody"
    if kind == "fresh":
        return (f"{Path(out) / SECRET_FILE} (fresh for this directory, owner-only: keep it "
                "private; --secret with a copy of it reproduces these runs elsewhere)")
    return f"{runtime['secret']} (given)"


def _warn_degraded(records: list[dict], out: str) -> int:
    """Warn about the sweep's degraded runs; the exit code of ``run`` (3 if any, else 0)."""
    from ldpsim.simulator.results.store import is_degraded

    bad = [r for r in records if is_degraded(r)]
    if not bad:
        return 0
    lost = sum(int(r.get("lost_agents") or 0) for r in bad)
    _err(f"warning: {len(bad)} of {counted(len(records), 'run')} degraded "
         f"({counted(lost, 'agent')} lost to dead, "
         f"silent or unregistered pools); they are excluded from the summary (ldpsim summary "
         f"{out} --include-degraded shows them); re-running the same command redoes them")
    return 3


def cmd_audit(args: argparse.Namespace) -> int:
    from ldpsim.simulator.audit.audit_harness import AUDIT_COLUMNS, AUDIT_FILE, audit_scenario
    from ldpsim.simulator.results.table import format_table
    from ldpsim.simulator.scenario.scenario import ScenarioError

    if args.trials < 20:
        _err(f"error: --trials: got {args.trials}; allowed: an integer >= 20")
        return 2
    if args.jobs < 1:
        _err(f"error: --jobs: got {args.jobs}; allowed: an integer >= 1")
        return 2
    if args.until_lower is not None and not args.until_lower > 0:
        _err(f"error: --until-lower: got {args.until_lower}; allowed: a number > 0")
        return 2
    try:
        # --dask: the audit's settings as tasks on the cluster (not a scenario key)
        scenario = _load(args, tuple(o for o in OPTION_KEYS if o[0] != "dask"))
        out = args.out or f"results/{scenario.name}-audit"
        n = len([s for s in scenario.runs() if s.repeat == 0])
        _info(f"audit {scenario.name}: {counted(n, 'setting')} x "
              f"{counted(args.trials, 'trial')} (path {args.path}) -> {out}")
        if args.dask is not None:  # the settings as tasks on a Dask cluster
            from ldpsim.simulator.audit.audit_dask import audit_on_dask
            from ldpsim.simulator.scenario.tables import check_dask_address

            records = audit_on_dask(scenario, out, check_dask_address(args.dask), echo=_info,
                                    trials=args.trials, target=args.target, path=args.path,
                                    jobs=args.jobs, until_lower=args.until_lower,
                                    coins=args.coins)
        else:
            records = audit_scenario(scenario, out, args.trials, target=args.target,
                                     show_progress=not args.no_progress, echo=_info,
                                     path=args.path, jobs=args.jobs,
                                     until_lower=args.until_lower, coins=args.coins)
    # ImportError, ConnectionError: no Dask installed, no scheduler answering
    except (ScenarioError, ParamError, ValueError, ImportError, ConnectionError) as e:
        _err(f"error: {e}")
        return 2
    except KeyboardInterrupt:
        _err("interrupted: finished settings are saved; run the same command again to resume")
        return 130
    axes = sorted({k for r in records for k in r.get("point", {})})
    rows = [{**r, **r.get("point", {})} for r in records]
    print(format_table(AUDIT_COLUMNS[:1] + axes + AUDIT_COLUMNS[1:], rows))
    flagged = [r for r in records if r["flagged"]]
    levels = sorted({f"{100 * r['confidence']:g}%" for r in records if r.get("confidence")})
    print(f"\n{len(flagged)} of {counted(len(records), 'claim')} refuted (epsilon_lower > "
          f"epsilon_claimed; lower bounds at {', '.join(levels) or '95%'} confidence)")
    print(f"audit: {Path(out) / AUDIT_FILE}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from ldpsim.simulator.results.store import ResultsCorruptError
    from ldpsim.simulator.sweep.reporting import write_report

    try:
        path = write_report(args.out, args.html, style=args.style)
    except (FileNotFoundError, ResultsCorruptError) as e:
        _err(f"error: {e}")
        return 1
    print(path)
    return 0


def cmd_summary(args: argparse.Namespace) -> int:
    from ldpsim.simulator.results.plots import plot, styled
    from ldpsim.simulator.results.store import RESULTS_FILE, ResultsCorruptError, usable
    from ldpsim.simulator.results.summary import write_per_round, write_summary
    from ldpsim.simulator.scenario.identity import proven_records, stored_order, stored_plot
    from ldpsim.simulator.sweep.runner import in_run_order, print_summary

    if not (Path(args.out) / RESULTS_FILE).is_file():  # and never create the directory
        _err(f"error: no results in {args.out}: not a results directory (no {RESULTS_FILE})")
        return 1
    try:
        # in the sweep's run order, as ``ldpsim run`` writes the summary (not arrival order)
        records = in_run_order(proven_records(args.out), stored_order(args.out))
    except ResultsCorruptError as e:
        _err(f"error: {e}")
        return 1
    if not records:
        _err(f"error: no results in {args.out}: its {RESULTS_FILE} holds no record")
        return 1
    shown = usable(records, args.include_degraded)
    print_summary(shown, include_degraded=True, max_rows=args.rows)
    write_summary(args.out, shown)
    write_per_round(args.out, shown)
    if args.plots:
        for p in plot(args.out, shown, styled(stored_plot(args.out), args.style), note=_err):
            print(p)
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from ldpsim.simulator.results.store import ResultsCorruptError
    from ldpsim.simulator.scenario.scenario import ScenarioError
    from ldpsim.simulator.sweep.verify import verify

    try:
        report = verify(args.out, args.sample, args.jobs, args.backend,
                        show_progress=not args.no_progress, sample_seed=args.sample_seed,
                        secret=args.secret)
    except (FileNotFoundError, ScenarioError, ResultsCorruptError, KeyFileError) as e:
        _err(f"error: {e}")
        return 2
    except KeyboardInterrupt:
        _err("interrupted: nothing was written")
        return 130
    for line in verify_lines(report, args.sample):
        print(line)
    return 0 if report.ok else 1


def verify_lines(report: Any, sample: float) -> list[str]:
    """What ``ldpsim verify`` prints of its ``report``: each problem, one a line, then what
    was checked and how, and what was not."""
    from ldpsim.simulator.results.store import RESULTS_FILE
    from ldpsim.simulator.sweep.verify import NOT_CHECKED

    out = [f"differs: {d}" for d in report.differing]
    out += [f"failed: run {key}: {why}" for key, why in report.failed]
    out += [f"unverifiable: run {key}: {why}" for key, why in report.unverifiable]
    out += [f"missing: run {key}: a run of the stored sweeps without a record in "
            f"{RESULTS_FILE}" for key in report.missing]
    out += [f"differs: {name}: {why}" for name, why in report.files]
    what = (f"{report.checked} of {counted(report.total, 'run')} re-executed"
            + (f" (a sample of {sample:g}, drawn with --sample-seed {report.sample_seed})"
               if report.sample_seed is not None else "")
            + (f", {report.replayed} more to replay the agents' lifetime odometer"
               if report.replayed else "")
            + (f" ({report.degraded} degraded among them)" if report.degraded else ""))
    if report.ok:
        out.append(f"verify: {what}: every one identical to its record; every record's "
                   "point, seed and privacy claim are its run's, every run has a record, and "
                   "the tables and report written are the records'")
    else:
        n = len(report.differing)
        problems = [f"{n} of them differ{'s' if n == 1 else ''} from "
                    f"{'its record' if n == 1 else 'their records'}" if n else "",
                    f"{len(report.failed)} could not be re-executed" if report.failed else "",
                    f"{len(report.unverifiable)} unverifiable" if report.unverifiable else "",
                    f"{counted(len(report.missing), 'run')} missing" if report.missing else "",
                    f"{counted(len(report.files), 'file')} not the records'"
                    if report.files else ""]
        out.append(f"verify: {what}: " + ", ".join(p for p in problems if p))
    out.append(f"not checked: {NOT_CHECKED}")
    return out


def cmd_curator(args: argparse.Namespace) -> int:
    args.backend = "hosts"
    return cmd_run(args)


def cmd_agents(args: argparse.Namespace) -> int:
    if not re.fullmatch(r"(tcp://[^:/]+:\d+|ipc://.+)", args.connect):
        _err(f"error: --connect {args.connect!r}: expected tcp://HOST:PORT (or ipc://PATH)")
        return 2
    try:
        keys, salt = read_pool_keys(args.keys)
        auth = registration_key(token_of(args.token, args.keys), salt)
    except KeyFileError as e:
        _err(f"error: {e}")
        return 2
    i, p = keys.pool, keys.pools
    if args.pool is not None and args.pool != f"{i}/{p}":
        _err(f"error: --pool {args.pool!r}: {args.keys} holds the keys of pool {i}/{p}")
        return 2
    if bool(args.curve_key) != bool(args.curve_server):
        _err("error: --curve-key and --curve-server go together (this pool's .key_secret and "
             "the curator's server.key)")
        return 2
    try:
        policy = AgentPolicy(args.max_epsilon, None if args.protocols is None else
                             tuple(x for x in args.protocols.split(",") if x),
                             args.lifetime_epsilon)
    except ValueError as e:  # "max_epsilon: got ...": the option's name first
        name, _, why = str(e).partition(":")
        _err(f"error: --{name.replace('_', '-')}:{why}")
        return 2
    # the pool's memory: what its agents answered and spent, kept across restarts; one
    # process per state file, for the pool's life
    try:
        held = lock(state_path(args.keys))
    except StateFileError as e:
        _err(f"error: {e}")
        return 2
    try:
        return _serve_pool(args, keys, auth, policy, held)
    finally:
        os.close(held)  # the state file's lock (the process's end would drop it too)


def _serve_pool(args: argparse.Namespace, keys: Any, auth: bytes, policy: Any,
                held: int) -> int:
    """``ldpsim agents`` once its state file's lock is ``held``: read (or, with
    ``--new-lifetime``, create) the state file, then serve until the pool ends."""
    i, p = keys.pool, keys.pools
    try:
        open_state = PoolState.create if args.new_lifetime else PoolState.read
        state = open_state(state_path(args.keys), i, p, keys.policy)
        state.save()  # writable here: found now, not when the first report is due
    except StateFileError as e:
        _err(f"error: {e}")
        return 2
    except OSError as e:
        _err(f"error: state file {state_path(args.keys)}: cannot write it: {e.strerror}")
        return 2
    curve = (args.curve_key, args.curve_server) if args.curve_key else None
    limits = Limits(timeout_s=args.timeout)
    try:
        return pool_loop(args.connect, i, p, auth, limits, keys=keys, policy=policy,
                         idle_timeout_s=args.idle_timeout, curve=curve, echo=_err,
                         state=state, exit_on_done=not args.keep_serving)
    except CurveError as e:
        _err(f"error: {e}")
        return 2
    except RunFailed as e:
        _err(f"pool {i}/{p} failed: {e}")
        return 1


def cmd_keys(args: argparse.Namespace) -> int:
    if args.pools < 1:
        _err(f"error: --pools {args.pools}: allowed: an integer >= 1")
        return 2
    sizes = _agent_counts(args.agents)
    if sizes is None:
        _err(f"error: --agents {args.agents!r}: expected the data sets' sizes, e.g. 2000 or "
             "1000,10000 (each pool gets the keys of its block for each of them)")
        return 2
    ranges = [[block_of(i, args.pools, n) for n in sizes] for i in range(args.pools)]
    try:
        keyfiles = write_host_keys(args.dir, args.pools, ranges)
        files = list(keyfiles.values()) + make_keys(args.dir, args.pools)
    except CurveError as e:
        _err(f"error: {e}")
        return 2
    except OSError as e:
        _err(f"error: {args.dir}: cannot write keys there: {e.strerror}")
        return 2
    for f in files:
        print(f)
    print(f"\ncurator: ldpsim curator --secret {args.dir}/secret.key [--curve {args.dir}] ...\n"
          f"pool I:  ldpsim agents --keys pool-I.keys [--curve-key pool-I.key_secret "
          f"--curve-server server.key] ...\n"
          f"copy pool-I.keys, pool-I.state and token (and pool-I.key_secret, server.key) to "
          f"pool I's machine only; secret.key stays with the curator's orchestrator")
    return 0


def _agent_counts(text: str) -> list[int] | None:
    """``--agents``: comma-separated positive integers (the data sets' sizes), or None."""
    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        return None
    return sizes if sizes and all(1 <= n <= 10**8 for n in sizes) else None


def cmd_reproduce(args: argparse.Namespace) -> int:
    from ldpsim.simulator.sweep.reproduce import main as reproduce_main

    return reproduce_main(args, echo=_info, err=_err)


def cmd_bench(args: argparse.Namespace) -> int:
    from ldpsim.simulator.bench import main as bench_main

    return bench_main(args)


#: each command's function
HANDLERS = {"run": cmd_run, "curator": cmd_curator, "agents": cmd_agents, "audit": cmd_audit,
            "keys": cmd_keys, "list": cmd_list, "data": cmd_data, "summary": cmd_summary,
            "report": cmd_report, "verify": cmd_verify, "bench": cmd_bench,
            "reproduce": cmd_reproduce}


def build_parser() -> argparse.ArgumentParser:
    """The command line's parser: the commands and options of ``options.COMMANDS``."""
    ap = argparse.ArgumentParser(prog="ldpsim", description=(
        "Simulate privacy-preserving data collection: an untrusted curator and many agents as "
        "real processes over ZeroMQ."))
    ap.add_argument("--version", action="version", version=f"ldpsim {__version__}")
    sub = ap.add_subparsers(dest="cmd", required=True)
    late = {options.BACKEND_NAMES: tuple(BACKENDS), options.EXECUTOR_NAMES: EXECUTORS}
    for name, kwargs, table in options.COMMANDS:
        p = sub.add_parser(name, **kwargs)
        for flags, spec in (*table, *options.COMMON):
            p.add_argument(*flags, **{k: late[v] if isinstance(v, options.Late) else v
                                      for k, v in spec.items()})
        p.set_defaults(func=HANDLERS[name])
    return ap


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning as one line, ``warning: MESSAGE`` (a renamed or an unread scenario setting,
    a plugin skipped), not Python's file, line and source."""
    _err(f"warning: {message}")


#: options the command line no longer has, and what does the same
RETIRED = {
    ("run", "--pools"): "--set runtime.pools=N",
    ("run", "--rows"): "ldpsim summary DIR --rows N after the run",
    ("run", "--include-degraded"): "ldpsim summary DIR --include-degraded after the run",
    ("curator", "--rows"): "ldpsim summary DIR --rows N after the run",
    ("curator", "--include-degraded"): "ldpsim summary DIR --include-degraded after the run",
}


def _retired(argv: list[str]) -> str | None:
    """The one-line error for an option of ``RETIRED`` in ``argv``, else None."""
    if not argv:
        return None
    for (cmd, flag), instead in RETIRED.items():
        if argv[0] == cmd and any(a == flag or a.startswith(flag + "=") for a in argv[1:]):
            return f"error: ldpsim {cmd} {flag}: no longer an option; use {instead}"
    return None


def main(argv: list[str] | None = None) -> int:
    retired = _retired(sys.argv[1:] if argv is None else list(argv))
    if retired:
        _err(retired)
        return 2
    try:
        args = build_parser().parse_args(argv)
    except SystemExit:  # --help (or a usage error): its text may meet a closed pipe
        _flush_stdout()
        raise
    _setup_logging(getattr(args, "verbose", False), getattr(args, "quiet", False))
    if getattr(args, "data_dir", None):  # for this process and every one it starts
        os.environ[environment.DATA] = str(Path(args.data_dir).expanduser().resolve())
    tune_if_requested()  # opt-in (LDPSIM_TUNE_MALLOC=1); ``bench`` turns it on itself
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        try:
            return args.func(args)
        except BrokenPipeError:  # ``ldpsim list | head``: the reader has all it wanted
            _drop_stdout()
            return 0


def _drop_stdout() -> None:
    """Point stdout at nothing: its buffer cannot be flushed to a closed pipe."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _flush_stdout() -> None:
    """Flush stdout now; a reader that stopped early (``ldpsim run --help | head -1``) gets
    no ``BrokenPipeError`` at the interpreter's exit."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _drop_stdout()


if __name__ == "__main__":
    sys.exit(main())

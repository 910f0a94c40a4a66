"""Result identity: which scenario a results directory holds, so runs never mix silently.

A run's key (``runs.run_key``) identifies its output: protocol, parameters, data, repetition,
seed, collusion and faults. The settings that change a record without changing that key — the
backend, pools, agent mode, batch size, the experiment's secret, the agents' limits, what a
record keeps, the version of the key derivation — and the values of every non-swept setting
make the scenario's *fingerprint*, stored next to the results as ``scenario.json``. Of the
secret it stores only a MAC under a salt of the directory's own (``signing.fingerprint_mac``):
nothing a reader of the directory could test a guess against; and which kind of secret the
sweep used (``secret``: ``fresh``, kept beside as ``secret.key``; a ``file``; or the ``seed``,
``keyfiles.secret_kind``). Resuming into a directory whose
fingerprint disagrees (``data.n`` 2000 there, 300 here; ``processes`` there, ``hosts`` here) is
refused with the differing keys named; a sweep that only adds values (more ε, a new protocol,
more repeats, an axis that includes the old value) extends it.

Every record must prove it belongs (``check_records``): its key, recomputed from its own
settings, must be its ``key`` and one of the runs of the sweeps written to the directory (their
run keys are stored beside the fingerprint, with each sweep's validated tables, from which
``simulator.sweep.verify`` re-executes them). A foreign record, one whose settings were edited, or a
line that is no record is refused with the file and line named, never averaged in. A record
whose *output* was edited keeps its settings and its key: only a re-execution finds it
(``ldpsim verify``).
"""

from __future__ import annotations

import json
import os
import secrets as _random
from dataclasses import is_dataclass, replace
from pathlib import Path
from typing import Any

from ldpsim.protocols.datasets import key_form
from ldpsim.simulator.results.plot_spec import PlotSpec
from ldpsim.simulator.results.store import (
    FINGERPRINT_FILE,
    RESULTS_FILE,
    ResultsCorruptError,
    ResultStore,
    latest,
)
from ldpsim.simulator.scenario.deployment import NUMBERS as deployment_numbers
from ldpsim.simulator.scenario.runs import Scenario, run_key
from ldpsim.simulator.scenario.tables import ScenarioError
from ldpsim.simulator.session.keyfiles import (
    SECRET_FILE,
    SEED_ONLY,
    secret_kind,
    secrets_of,
    sweep_secret,
)
from ldpsim.simulator.session.signing import fingerprint_mac

#: runtime settings that change a record (timing, bytes, the backend field)
RUNTIME_KEYS = ("backend", "pools", "agent_mode", "batch", "faults")
#: how agents' keys are derived (``protocols.keys``): records of another derivation hold other
#: data and coins, and never mix with these
KEYS = "prf-1"
#: the same, for runs with a secret of their own (fresh or a key file), whose seeds are keyed by
#: it first (``Secrets.run_seed``): records a key file gave before that hold other data and
#: coins than it gives now (the seed-only secret's are unchanged: ``KEYS``)
KEYS_KEYED = "prf-1+keyed-seed"
#: added to either for a sweep with colluders: the coins of a run with colluders are those of
#: the same run without (a coalition is an analysis of one execution); records of such runs
#: written before hold coins keyed by their coalition, and never mix with these
KEYS_SHARED = "+shared-coins"


class FingerprintMismatch(ScenarioError):
    """A results directory holds runs of a scenario with other settings."""


def with_secret(scenario: Any, out_dir: str | Path) -> Any:
    """``scenario`` as a sweep into ``out_dir`` runs it: with no secret given, its
    ``[runtime] secret`` the directory's own ``secret.key`` (``keyfiles.sweep_secret``; which
    ``keyfiles.keep_secret`` reads or writes); a copy, ``scenario`` is left as it is."""
    runtime = sweep_secret(scenario.runtime, out_dir)
    if runtime is scenario.runtime:
        return scenario
    return replace(scenario, runtime=runtime) if is_dataclass(scenario) else scenario


def fingerprint(scenario: Any, salt: bytes = b"") -> dict[str, list[Any]]:
    """Every record-changing setting of ``scenario`` mapped to the list of values it takes
    (one value unless it is a sweep axis). Protocols and repeats are left out: adding them
    extends a sweep. ``salt``: the directory's, for the MAC of the secret."""
    secret = secrets_of(scenario.runtime)  # never the secret itself: a salted MAC of it
    keys = (KEYS if secret is None else KEYS_KEYED) + (KEYS_SHARED if _colludes(scenario)
                                                          else "")
    out: dict[str, list[Any]] = {"seed": [scenario.seed], "keys": [keys]}
    for k, v in scenario.data.items():  # a named data file as run keys hash it
        out[f"data.{k}"] = _values([key_form(x) for x in v] if isinstance(v, list)
                                   else key_form(v))
    for k, v in scenario.params.items():
        out[f"params.{k}"] = _values(v)
    for k in RUNTIME_KEYS:
        out[f"runtime.{k}"] = [_plain(scenario.runtime.get(k))]
    out["runtime.secret"] = ["" if secret is None else fingerprint_mac(secret, salt)]
    agents = getattr(scenario, "agents", None)
    if agents:  # only when set: older directories stay resumable
        out["agents"] = [_plain(agents)]
    for k in ("colluders", "curator"):
        out[f"collusion.{k}"] = _values(scenario.collusion.get(k))
    if scenario.runtime.get("data_first"):  # only when on: older directories stay resumable
        out["runtime.data_first"] = [True]
    if scenario.collusion.get("sweep"):  # a list of colluders, held as ``sweep`` (as ever)
        out["collusion.colluders"] = _values(scenario.collusion["sweep"])
    if getattr(scenario, "paired", None):  # only when set: older directories stay resumable
        out["sweep.paired"] = [_plain(scenario.paired)]
    if scenario.collusion.get("attacks"):  # only when on: older directories stay resumable
        for k in ("attacks", "attack_targets"):
            out[f"collusion.{k}"] = _values(scenario.collusion.get(k))
    out["output.per_round"] = [scenario.output.get("per_round", True)]
    for k, v in (getattr(scenario, "deployment", None) or {}).items():  # only when set
        out[f"deployment.{k}"] = _values(v) if k in deployment_numbers else [_plain(v)]
    return out


def _colludes(scenario: Any) -> bool:
    """Whether any run of ``scenario`` has colluding agents."""
    c = scenario.collusion
    values = c.get("sweep") or [c.get("colluders")]
    return any(v for v in values)


def _plain(v: Any) -> Any:
    return json.loads(json.dumps(v, default=str))


def _values(v: Any) -> list[Any]:
    return [_plain(x) for x in v] if isinstance(v, list) else [_plain(v)]


def _show(values: list[Any]) -> str:
    return json.dumps(values[0]) if len(values) == 1 else json.dumps(values)


def differences(stored: dict[str, list[Any]], current: dict[str, list[Any]]) -> list[str]:
    """Non-swept settings that differ between ``stored`` and ``current`` (one value on both
    sides, not the same; a setting given on one side only counts as unset on the other), each
    as a readable line. A sweep axis on either side extends the directory instead: its records
    carry the axis value and the summary keeps them apart."""
    out = []
    for key in sorted(set(stored) | set(current)):
        old, new = stored.get(key, ["(unset)"]), current.get(key, ["(unset)"])
        if len(old) == 1 and len(new) == 1 and old != new:
            out.append(f"{key}: {_show(old)} there, {_show(new)} here")
    return out


def check(out_dir: str | Path, scenario: Any, has_records: bool,
          order: list[str] | None = None) -> None:
    """Refuse (FingerprintMismatch) to add ``scenario``'s runs to ``out_dir`` when its stored
    fingerprint disagrees; otherwise store the union of both fingerprints (atomically), and
    the sweep's run order (``order``: run keys, after those stored earlier) for ``ldpsim
    summary``."""
    path = Path(out_dir) / FINGERPRINT_FILE
    stored: dict[str, list[Any]] = {}
    salt = _random.token_bytes(16)
    if path.is_file():
        try:
            doc = json.loads(path.read_text())
            stored = doc["fingerprint"]
            salt = bytes.fromhex(doc.get("salt", salt.hex()))
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise FingerprintMismatch(f"{path}: unreadable ({e}); move it away to reuse "
                                      f"{out_dir}") from None
    current = fingerprint(scenario, salt)
    if stored:
        if has_records:
            diff = differences(stored, current)
            if diff:
                raise FingerprintMismatch(
                    f"{out_dir} holds runs of the scenario with other settings, which would "
                    "mix with these in its summary:\n  " + "\n  ".join(diff)
                    + "\nuse another --out, or --beside to write next to it")
    merged = {k: list(stored.get(k, [])) for k in stored} if has_records else {}
    for k, vals in current.items():
        have = merged.setdefault(k, [])
        have.extend(v for v in vals if v not in have)
    stored_doc: dict[str, Any] = {"fingerprint": merged, "salt": salt.hex()}
    if order is not None:
        before = _stored_order(path) if has_records else []
        known = set(before)
        stored_doc["order"] = before + [k for k in order if k not in known]
    kind = secret_kind(scenario.runtime, out_dir)
    stored_doc["secret"] = {"kind": kind, "file": SECRET_FILE if kind == "fresh" else None}
    tables = _tables(scenario, kind)
    if tables is not None:  # what ``ldpsim verify`` re-executes
        sweeps = _stored(path, "scenarios") if has_records else []
        stored_doc["scenarios"] = sweeps + ([tables] if tables not in sweeps else [])
    plot = getattr(scenario, "plot", None)
    if plot is not None:  # what `ldpsim summary DIR --plots` redraws
        stored_doc["plot"] = plot.as_table()
    report = getattr(scenario, "report", None)
    if report is not None:  # the figures `ldpsim report DIR` shows
        stored_doc["report"] = report.as_table()
    written = _written(scenario) if isinstance(scenario, Scenario) else {}
    if written:  # the scenario as its file and command line wrote it, for `ldpsim report`
        stored_doc["written"] = written
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(stored_doc, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def _stored_order(path: Path) -> list[str]:
    return [k for k in _stored(path, "order") if isinstance(k, str)]


def _stored(path: Path, name: str) -> list[Any]:
    """The list ``name`` of the stored document ``path`` (empty: none, or unreadable)."""
    return _listed(_document(path), name)


def _document(path: Path) -> dict[str, Any]:
    """The stored document ``path`` (empty: none, or unreadable)."""
    try:
        doc = json.loads(path.read_text())
        return doc if isinstance(doc, dict) else {}
    except (OSError, ValueError):
        return {}


def _listed(doc: dict[str, Any], name: str) -> list[Any]:
    got = doc.get(name)
    return got if isinstance(got, list) else []


#: the tables of a validated scenario that define its runs (``Scenario.runs``)
_TABLES = ("name", "protocols", "repeats", "seed", "data", "params", "runtime", "collusion",
           "output", "agents")


#: runtime settings never stored (a typed token is a secret; the key file's path is not)
_UNSTORED = ("token",)


def _tables(scenario: Any, kind: str = "file") -> dict[str, Any] | None:
    """The tables of ``scenario`` as stored (``kind``: of its secret; the directory's own,
    ``fresh``, is stored as none given, so the directory reads its own wherever it is)."""
    if not isinstance(scenario, Scenario):  # a test's stand-in
        return None
    out = {k: _plain(getattr(scenario, k)) for k in _TABLES}
    out["runtime"] = {k: (None if k in _UNSTORED else v) for k, v in out["runtime"].items()}
    if kind == "fresh":
        out["runtime"]["secret"] = ""
    if scenario.paired:  # only when set: the tables of older directories stay as they were
        out["paired"] = _plain(scenario.paired)
    if scenario.deployment:  # likewise
        out["deployment"] = _plain(scenario.deployment)
    for k in _SHOWN:  # likewise: what ``ldpsim report`` shows of the sweep, as it was run
        if scenario.raw.get(k):
            out[k] = _plain(scenario.raw[k])
    return out


#: what the report shows of a scenario as written leaves out: what it shows elsewhere (the
#: description, the printed numbers, the figures' tables)
_NOT_WRITTEN = ("description", "published", "plot", "report")


def _written(scenario: Scenario) -> dict[str, Any]:
    """The scenario as its file says, with the command line's ``--set`` (and options) applied
    (``tables``) and the keys those set (``set``), for ``ldpsim report``; never a typed
    token. Empty for a scenario of no file or table (a stored sweep's)."""
    tables = {k: v for k, v in scenario.raw.items() if k not in _NOT_WRITTEN}
    if not tables:
        return {}
    if isinstance(tables.get("runtime"), dict):
        tables["runtime"] = {k: v for k, v in tables["runtime"].items() if k not in _UNSTORED}
    return {"tables": _plain(tables), "set": list(scenario.overridden)}


#: what ``ldpsim report`` shows of a stored sweep beside its settings: its description, and
#: the numbers a paper printed (``[[published]]``) that its runs reproduce
_SHOWN = ("description", "published")


def stored_written(out_dir: str | Path) -> dict[str, Any]:
    """The last sweep written to ``out_dir`` as its file and command line wrote it
    (``tables``, and the keys the command line ``set``); empty: not stored."""
    got = _document(Path(out_dir) / FINGERPRINT_FILE).get("written")
    return got if isinstance(got, dict) else {}


def stored_tables(out_dir: str | Path) -> list[dict[str, Any]]:
    """The tables of the sweeps written to ``out_dir``, as stored (empty: none)."""
    return [t for t in _stored(Path(out_dir) / FINGERPRINT_FILE, "scenarios")
            if isinstance(t, dict)]


def stored_secret(out_dir: str | Path, stored: str | None, given: str | None = None) -> str:
    """The ``[runtime] secret`` that re-executes a stored sweep of ``out_dir`` whose tables
    hold ``stored``: ``given`` (a key file's path, or ``"seed"``) if any; else the stored
    key file or ``"seed"``; else (none stored: the directory's own fresh secret) the path of
    ``out_dir/secret.key`` (missing, it is reported by whoever reads it). A directory
    written before fresh secrets were kept, whose fingerprint records no secret, was run with
    the seed's: ``"seed"``."""
    if given:
        return str(given)
    if stored:
        return str(stored)
    own = Path(out_dir) / SECRET_FILE
    if not own.is_file():
        doc = _document(Path(out_dir) / FINGERPRINT_FILE)
        try:
            macs = doc["fingerprint"]["runtime.secret"]
        except (KeyError, TypeError):
            macs = [""]
        if macs == [""]:
            return SEED_ONLY
    return str(own.resolve())


def stored_scenarios(out_dir: str | Path, secret: str | None = None) -> list[Scenario]:
    """The sweeps written to ``out_dir``, as validated scenarios (their runs are the
    directory's runs), each with the secret that re-executes it (``stored_secret``: ``secret``
    if given, ``"seed"`` or a key file's path); empty for a directory written before they
    were stored."""
    out = []
    for t in _stored(Path(out_dir) / FINGERPRINT_FILE, "scenarios"):
        try:
            runtime = dict(t["runtime"])
            runtime["secret"] = stored_secret(out_dir, runtime.get("secret"), secret)
            out.append(Scenario(t["name"], None, {}, t["protocols"], t["repeats"], t["seed"],
                                t["data"], t["params"], runtime, t["collusion"],
                                t["output"], agents=t["agents"], paired=t.get("paired", []),
                                deployment=t.get("deployment", {})))
        except (KeyError, TypeError) as e:
            raise ScenarioError(f"{Path(out_dir) / FINGERPRINT_FILE}: a stored sweep is "
                                f"unreadable ({e})") from None
    return out


def record_key(rec: dict[str, Any], faults: Any = ()) -> str:
    """The key of the run ``rec`` records, recomputed from its own settings (``runs.run_key``
    of protocol, requested parameters, data, repetition, seed, colluders and faults). Raises
    KeyError or TypeError when a setting is missing."""
    coll = rec["collusion"]
    return run_key(rec["protocol"], rec["params_requested"], rec["data"], rec["repeat"],
                rec["scenario_seed"], {"colluders": coll["spec"], "curator": coll["curator"]},
                list(faults), rec.get("deployment"))


def check_records(out_dir: str | Path, numbered: list[tuple[int, dict[str, Any]]]) -> None:
    """Raise ResultsCorruptError, naming the file and line, at the first record that is not
    one of ``out_dir``'s runs: its key, recomputed from its own settings, differs from its
    ``key``, or is not among the run keys stored in ``scenario.json`` (a directory without
    any is checked for the first condition only)."""
    doc = _document(Path(out_dir) / FINGERPRINT_FILE)
    known = {k for k in _listed(doc, "order") if isinstance(k, str)}
    try:
        faults_of = [f for f in doc["fingerprint"]["runtime.faults"] if isinstance(f, list)]
    except (KeyError, TypeError):
        faults_of = []
    faults_of = faults_of or [[]]
    results = Path(out_dir) / RESULTS_FILE
    for line, rec in numbered:
        try:
            keys = {record_key(rec, f) for f in faults_of}
            why = None
        except (KeyError, TypeError, AttributeError) as e:
            keys, why = set(), f"it lacks the setting {e}" if isinstance(e, KeyError) else \
                f"a setting is malformed ({e})"
        if why is None and rec["key"] not in keys:
            why = f"its settings give key {min(keys)!r}, not its {rec['key']!r}"
        if why is None and known and rec["key"] not in known:
            why = f"no sweep written to {out_dir} has a run of key {rec['key']!r}"
        if why is not None:
            raise ResultsCorruptError(
                f"{results}: line {line}: not one of this directory's runs ({why}); it is not "
                "used: remove the line, or move it to a directory of its own")


def proven_records(out_dir: str | Path, store: ResultStore | None = None
                   ) -> list[dict[str, Any]]:
    """``store.records()`` (default: the directory's store), after every record in the file
    was checked (``check_records``); the file is read once."""
    numbered = (ResultStore(out_dir) if store is None else store).numbered()
    check_records(out_dir, numbered)
    return latest([rec for _, rec in numbered])


def stored_order(out_dir: str | Path) -> list[str]:
    """The run keys of the sweeps written to ``out_dir``, in run order (empty: none stored)."""
    return _stored_order(Path(out_dir) / FINGERPRINT_FILE)


def stored_plot(out_dir: str | Path, name: str = "plot") -> Any:
    """The ``PlotSpec`` stored beside the results in ``out_dir``, or None (none stored, or
    unreadable: the default figures are drawn). ``name="report"``: the report's figures
    (``Scenario.report``), else (a directory written before they were stored) the
    ``[plot]`` figures."""
    try:
        doc = json.loads((Path(out_dir) / FINGERPRINT_FILE).read_text())
        return PlotSpec.from_table(doc[name] if name in doc else doc["plot"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def beside(out_dir: str | Path, scenario: Any) -> Path:
    """The first of ``out_dir``, ``out_dir-2``, ``out_dir-3``, ... this scenario may write to
    (empty, or holding a compatible fingerprint)."""
    base = Path(out_dir)
    for i in range(1, 10_000):
        cand = base if i == 1 else base.with_name(f"{base.name}-{i}")
        fp = cand / FINGERPRINT_FILE
        records = cand / RESULTS_FILE
        if not records.is_file() or records.stat().st_size == 0:
            return cand
        if fp.is_file():
            try:
                doc = json.loads(fp.read_text())
                stored, salt = doc["fingerprint"], bytes.fromhex(doc.get("salt", ""))
            except (OSError, ValueError, KeyError, TypeError):
                continue
            here = with_secret(scenario, cand)
            if secret_kind(here.runtime, cand) == "fresh" \
                    and not (cand / SECRET_FILE).is_file():
                continue  # its runs were run with another secret
            if not differences(stored, fingerprint(here, salt)):
                return cand
    raise FingerprintMismatch(f"no free directory beside {out_dir}")

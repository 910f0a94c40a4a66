"""``ldpsim audit --dask ADDRESS``: the audit's settings spread over a Dask cluster.

Each setting (protocol and parameter point) is one task: on a worker, ``audit_harness.
audit_scenario`` audits that setting alone (``_OneSetting``: the scenario restricted to it)
into a scratch directory that holds the records already in ``OUT/audit.jsonl``, so a setting
audited earlier is found there and not audited again, by the harness's own key. The
orchestrator appends each new record to ``OUT/audit.jsonl`` as it arrives; at the end
``audit_scenario`` over the whole scenario finds every setting done and returns the records in
the scenario's order. The harness itself is unchanged: whatever it puts in a record or its key,
a record from the cluster is the one it would write here.

When the scenario has fewer settings than the cluster has worker threads (e.g. one setting
at 10^6 trials), the settings run here one after another instead, and each setting's ε-audit
trials are spread over the cluster: its blocks of the batch path, or ranges of full-path runs,
one task each (``dask_mapper``, the harness's ``mapper``), joined in order, so the record is
again the one a local audit writes.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ldpsim.simulator.audit.audit_harness import (
    AUDIT_FILE,
    append_audit,
    audit_scenario,
    stored_audits,
)
from ldpsim.simulator.backends.dask_client import DaskConnection
from ldpsim.simulator.session.common import counted


class _OneSetting:
    """``scenario`` with one setting: its runs are ``spec`` alone (the first repetition's)."""

    def __init__(self, scenario: Any, spec: Any) -> None:
        self._scenario = scenario
        self._spec = spec

    def runs(self) -> list[Any]:
        return [self._spec]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._scenario, name)


def audit_task(scenario: Any, spec: Any, done_lines: list[str],
               kwargs: dict[str, Any]) -> list[dict[str, Any]]:
    """On a worker: audit one setting (the stored ``done_lines`` make a done one a lookup)."""
    with tempfile.TemporaryDirectory(prefix="ldpsim-audit-") as scratch:
        (Path(scratch) / AUDIT_FILE).write_text("".join(line + "\n" for line in done_lines))
        return audit_scenario(_OneSetting(scenario, spec), scratch, show_progress=False,
                              echo=lambda *a, **k: None, **kwargs)


def dask_mapper(client: Any) -> Callable[[Callable[[tuple], Any], list[tuple]], Iterator[Any]]:
    """The harness's ``mapper`` on a Dask cluster: one task per element (retried once if its
    worker is lost), the results in order, the rest cancelled if the caller stops early."""

    def mapper(fn: Callable[[tuple], Any], args: list[tuple]) -> Iterator[Any]:
        futures = client.map(fn, args, pure=False, retries=1)
        try:
            for fut in futures:
                yield fut.result()
                fut.release()
        finally:
            client.cancel([f for f in futures if not f.done()])

    return mapper


def audit_on_dask(scenario: Any, out: str | Path, address: str,
                  echo: Callable[..., Any] = print, **kwargs: Any) -> list[dict[str, Any]]:
    """Audit every setting of ``scenario`` as tasks on the cluster at ``address`` (see the
    module); ``kwargs`` are ``audit_scenario``'s (trials, target, path, jobs, ...). Returns
    the records in the scenario's order, as ``audit_scenario`` does."""
    from distributed import as_completed

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    done = stored_audits(out)  # a torn last line is not among them: its setting is redone
    done_lines = [json.dumps(rec) for rec in done.values()]
    known = set(done)
    specs = [s for s in scenario.runs() if s.repeat == 0]
    with DaskConnection(address) as conn:
        client = conn.client
        threads = conn.threads()
        if len(specs) < threads:  # too few settings to fill the cluster: spread the trials
            echo(f"audit on Dask at {client.scheduler.address}: "
                 f"{counted(len(specs), 'setting')}, their trials in blocks over "
                 f"{counted(threads, 'worker thread')}")
            return audit_scenario(scenario, out, show_progress=False, echo=echo,
                                  mapper=dask_mapper(client), **kwargs)
        echo(f"audit on Dask at {client.scheduler.address}: "
             f"{counted(len(specs), 'setting')}, {counted(threads, 'worker thread')}")
        futures = [client.submit(audit_task, scenario, spec, done_lines, kwargs, pure=False,
                                 retries=1) for spec in specs]
        try:
            for fut in as_completed(futures, loop=client.loop):
                for rec in fut.result():
                    if rec.get("key") in known:
                        continue
                    known.add(rec.get("key"))
                    append_audit(out, rec)
                fut.release()
        finally:
            client.cancel([f for f in futures if not f.done()])
    # every setting is stored now: the harness reads them back in the scenario's order
    return audit_scenario(scenario, out, show_progress=False, echo=echo, **kwargs)

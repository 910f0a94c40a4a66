"""The report's scenario: as its file and command line wrote it, in TOML, every value in the
file's own syntax (a string quoted, a list of colluders a list), the keys the command line set
marked; each stored sweep's every setting beneath it; and its description and printed numbers
as they were when the sweeps ran (``_shown``).
"""

from __future__ import annotations

import html
import json
import math
import re
from typing import Any

from ldpsim.simulator.results.published import check_published
from ldpsim.simulator.results.store import FINGERPRINT_FILE

#: a TOML key that needs no quotes
_BARE = re.compile(r"^[A-Za-z0-9_-]+$")
#: what a key the command line set is marked with
SET_MARK = "# set on the command line"


def _e(v: Any) -> str:
    return html.escape(str(v), quote=True)


def toml_value(v: Any) -> str:
    """``v`` as TOML writes it: a string quoted, true/false, a number as Python prints it
    (inf, nan), a list in brackets, a table inline."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else "inf" if v > 0 else "-inf"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{toml_key(k)} = {toml_value(x)}" for k, x in v.items()) + " }"
    return json.dumps(str(v))


def toml_key(k: str) -> str:
    """A TOML key: bare when it may be, else quoted."""
    return k if _BARE.match(k) else json.dumps(k)


def toml_text(tables: dict[str, Any], marked: list[str] = ()) -> str:
    """``tables`` (a scenario's raw tables) as a TOML document: the top-level keys, then each
    table, its sub-tables and arrays of tables in the order written; each dotted key of
    ``marked`` followed by ``SET_MARK``."""
    lines: list[str] = []

    def entry(path: list[str], k: str, v: Any) -> None:
        mark = f"  {SET_MARK}" if ".".join([*path, k]) in marked else ""
        lines.append(f"{toml_key(k)} = {toml_value(v)}{mark}")

    def table(path: list[str], t: dict[str, Any], header: str | None) -> None:
        if header is not None:
            lines.extend(["", header])
        for k, v in t.items():
            if not isinstance(v, dict) and not _tables_list(v):
                entry(path, k, v)
        for k, v in t.items():
            sub = [*path, k]
            if isinstance(v, dict):
                table(sub, v, f"[{'.'.join(toml_key(p) for p in sub)}]")
            elif _tables_list(v):
                for item in v:
                    table(sub, item, f"[[{'.'.join(toml_key(p) for p in sub)}]]")

    table([], tables, None)
    return "\n".join(lines).strip("\n")


def _tables_list(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)


def stored_as_written(t: dict[str, Any]) -> dict[str, Any]:
    """A stored sweep's tables in the file's own form, for a directory that kept no written
    scenario: its protocols, repeats and seed, its data, parameters and coalition (a list of
    colluders as ``colluders``, as a file writes it), its deployment and pairing."""
    out: dict[str, Any] = {k: t[k] for k in ("protocols", "repeats", "seed") if k in t}
    for section in ("data", "params", "collusion", "deployment"):
        table = dict(t.get(section) or {})
        if section == "collusion" and table.get("sweep"):
            table["colluders"] = table.pop("sweep")
        if table:
            out[section] = table
    if t.get("paired"):
        out["sweep"] = {"paired": t["paired"]}
    return out


def _shown(tables: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """The description and the printed numbers (``[[published]]``) of the stored sweeps'
    ``tables``: as they were when the sweeps ran, never those of a scenario file that has
    their name today (a sweep named after a paper's scenario is not that paper's)."""
    description = next((str(t["description"]) for t in tables if t.get("description")), "")
    published: list[dict[str, Any]] = []
    for t in tables:
        got = t.get("published")
        for entry in got if isinstance(got, list) else []:
            if isinstance(entry, dict) and entry not in published:
                published.append(entry)
    return description, [e for e in published if not check_published([e])]


def _ran_on(t: dict[str, Any]) -> str:
    rt = t.get("runtime") or {}
    return ", ".join(f"{k} = {rt[k]}" for k in ("backend", "pools", "executor", "jobs")
                     if k in rt)


def scenario_section(name: str, tables: list[dict[str, Any]], written: dict[str, Any]
                     ) -> tuple[str, str, str, list[dict[str, Any]]]:
    """The page's title, the scenario's description, the scenario section and the printed
    numbers stored with the sweeps ``tables`` (``_shown``). ``written``: the last sweep as
    its file and command line wrote it (``identity.stored_written``: ``tables`` and the keys
    ``set``), else each stored sweep in the file's form (``stored_as_written``)."""
    description, published = _shown(tables)
    body = []
    if written.get("tables"):
        text = toml_text({k: v for k, v in written["tables"].items() if k != "name"},
                         list(written.get("set") or []))
        many = (f" The last of the {len(tables)} sweeps written to this directory; each "
                "one's settings below." if len(tables) > 1 else "")
        body.append(f'<p class="note">As written: the scenario file, with what the command '
                    f"line set ({_e(SET_MARK)}).{many}</p>"
                    f'<pre class="toml">{_e(text)}</pre>')
    else:
        for i, t in enumerate(tables):
            what = f"Sweep {i + 1} of {len(tables)}" if len(tables) > 1 else "The sweep"
            body.append(f'<p class="note">{what}, in the scenario file\'s form:</p>'
                        f'<pre class="toml">{_e(toml_text(stored_as_written(t)))}</pre>')
    for i, t in enumerate(tables):
        which = f" (sweep {i + 1} of {len(tables)})" if len(tables) > 1 else ""
        body.append(f'<p class="note">Ran on: {_e(_ran_on(t))}{which}.</p>'
                    f"<details><summary>every setting{which}, as stored in {FINGERPRINT_FILE}"
                    f"</summary><pre>{_e(json.dumps(t, indent=1, sort_keys=True))}</pre>"
                    "</details>")
    return name, description, "\n".join(body), published

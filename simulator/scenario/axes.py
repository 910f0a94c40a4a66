"""How a scenario's swept settings combine into points: the grid of every list, in which the
keys of a ``[sweep] paired`` group vary together, position by position.

``check_sweep`` checks the ``[sweep]`` table against the scenario's settings (before any
process starts); ``points`` expands one protocol's axes into its points
(``runs.Scenario.runs``).
"""

from __future__ import annotations

import itertools
from typing import Any

from ldpsim.simulator.results.hint import hint

#: ``[sweep] paired`` as an error shows what is allowed
PAIRED = ('a list of groups, each a list of two or more swept settings, e.g. '
          '[["params.epsilon", "data.n"]]')


def check_sweep(table: dict[str, Any], settings: dict[str, Any]) -> list[str]:
    """Every problem of a ``[sweep]`` table, each one line naming the key and what is allowed
    (empty: none).

    Parameters
    ----------
    table : dict
        The raw ``[sweep]`` table: ``paired``, a list of groups of setting names.
    settings : dict
        Every setting a group may name (``params.*``, ``data.*``, ``collusion.colluders``),
        with its value: a list when it is swept.
    """
    problems = [f"[sweep] {k}: unknown key; allowed: paired{hint(k, ['paired'])}"
                for k in table if k != "paired"]
    groups = table.get("paired", [])
    if not isinstance(groups, list) or not all(isinstance(g, list) for g in groups):
        return problems + [f"[sweep] paired: got {groups!r}; allowed: {PAIRED}"]
    seen: set[str] = set()
    for group in groups:
        problems += _group_problems(group, settings, seen)
    return problems


def _group_problems(group: list[Any], settings: dict[str, Any], seen: set[str]) -> list[str]:
    """The problems of one group: too short, a name that is no swept setting or that an earlier
    group has (added to ``seen``), lists of unequal length."""
    if len(group) < 2 or not all(isinstance(k, str) for k in group):
        return [f"[sweep] paired: got {group!r}; allowed: a group of two or more swept "
                "settings (names such as \"params.epsilon\")"]
    swept = [k for k, v in settings.items() if isinstance(v, list)]
    shown = ", ".join(swept) or "(none)"
    out = []
    for k in group:
        if k in seen:
            out.append(f"[sweep] paired: {k} is in two groups; allowed: each key in one group, "
                       "once")
        elif k not in settings:
            out.append(f"[sweep] paired: {k} is not a swept setting of this scenario; allowed: "
                       f"{shown}{hint(k, swept)}")
        elif k not in swept:
            out.append(f"[sweep] paired: {k} is not a list (one value); allowed: swept settings "
                       f"(a list of values) of this scenario: {shown}")
        seen.add(k)
    if out:
        return out
    first, n = group[0], len(settings[group[0]])
    other = next((k for k in group if len(settings[k]) != n), None)
    if other is None:
        return []
    return [f"[sweep] paired: {first} has {n} values, {other} has {len(settings[other])}; "
            "allowed: lists of equal length (one point per position)"]


def points(axes: dict[str, list[Any]], paired: list[list[str]]) -> list[dict[str, Any]]:
    """Every point of the grid of ``axes`` (each swept key's values, in loop order), the last
    axis varying fastest. The keys of a ``paired`` group take their values together, position
    by position: the group is one axis, in the place of its first key (members ``axes`` lacks,
    such as a parameter a protocol does not take, are left out of it)."""
    group_of = {k: g for g in paired for k in g}
    columns: list[list[dict[str, Any]]] = []
    placed: set[str] = set()
    for key in axes:
        if key in placed:
            continue
        members = [k for k in group_of.get(key, [key]) if k in axes]
        placed.update(members)
        columns.append([dict(zip(members, vals, strict=True))
                        for vals in zip(*(axes[k] for k in members), strict=True)])
    return [{k: v for part in combo for k, v in part.items()}
            for combo in itertools.product(*columns)]


"""Every metric a sweep shows, with what it means: the protocols' own (``Protocol.metrics``),
the costs every run measures and what a coalition learned (``[collusion] attacks``).

One :class:`~ldpsim.protocols.metrics.Metric` per name: the summary's legend, the plots' labels
and bands, the report and the documentation's tables read it here. A name two protocols share
(every rank aggregation protocol's ``error_rate``) means one thing.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from ldpsim.protocols.base import ParamError
from ldpsim.protocols.metrics import Metric, fraction, plain
from ldpsim.protocols.registry import get_protocol
from ldpsim.protocols.registry import protocols as all_protocols

#: the costs of ``summary.csv`` (means over repeats): lower is better for each
COSTS: tuple[Metric, ...] = (
    Metric("comm.bytes_up_per_agent_mean", "wire bytes up per agent", unit="B", low=0.0,
           better="lower", about="the msgpack envelopes an agent sent, every round and the "
                                 "envelopes' framing counted (what the simulator moved)"),
    Metric("comm.bytes_down_per_agent_mean", "wire bytes down per agent", unit="B", low=0.0,
           better="lower", about="the envelopes an agent received: its queries and the run's "
                                 "set-up"),
    Metric("comm.report_bits_per_agent_mean", "report bits per agent", unit="bits", low=0.0,
           better="lower", about="the information-theoretic size of an agent's reports, "
                                 "summed over the rounds (GRR over k values: log2 k, e.g. "
                                 "log2 d! for a ranking of d items): "
                                 "the cost the papers count, without the envelopes' framing"),
    Metric("timing.agent_cpu_s_mean", "mean CPU per agent, batch", unit="s", low=0.0,
           better="lower", about="the randomizer's CPU time over every agent it answered, "
                                 "each batch's time shared by its agents (the vectorised "
                                 "kernel's cost per agent, not what one phone spends; "
                                 "timing.agent_alone_cpu_s_mean and _std: agents timed "
                                 "alone)"),
    Metric("timing.wall_s", "run wall time", unit="s", low=0.0, better="lower",
           about="the whole run, from the curator's set-up to its output"),
    Metric("virtual.wall_s", "virtual run time", unit="s", low=0.0, better="lower",
           about="the run's rounds on the [deployment]'s devices and links, in virtual time "
                 "(computed, not slept)"),
    fraction("virtual.dropout_rate", "dropout rate", "lower",
             "the asked agents of every round that were offline or answered after the "
             "round's end ([deployment])"),
)

#: what the coalition learned (``leakage.*``): 0.5 is guessing; lower is better for privacy
LEAKAGE: tuple[Metric, ...] = (
    fraction("leakage.report_accuracy", "coalition's accuracy from the reports", "lower",
             "the single-report attack: telling a target's row from a decoy by the "
             "likelihood of its reports (0.5: guessing; at most e^ε/(1+e^ε) under ε-LDP)"),
    fraction("leakage.differencing_accuracy", "coalition's accuracy by differencing",
             "lower", "the released aggregate minus the coalition's own rows, compared with "
                      "the target's and the decoy's contributions (0.5: guessing)"),
    fraction("leakage.report_bound", "LDP bound on the report attack", None,
             "e^ε/(1+e^ε): no test on an ε-LDP agent's reports does better"),
)

#: the level of a guess between two equally likely rows
CHANCE = 0.5
_MEMO: dict[tuple, Mapping[str, Metric]] = {}


def registry(protocols: list[str] | tuple[str, ...] | None = None) -> Mapping[str, Metric]:
    """Every described metric: of ``protocols`` (names; None: every registered protocol),
    the costs and the leakage, by name (read-only: built once, shared by every caller)."""
    protos = _protocols(protocols)  # named ones: their families alone imported
    memo = (None if protocols is None else tuple(protocols), tuple(map(id, protos)))
    if memo in _MEMO:  # the figures ask for labels often; a new family changes the key
        return _MEMO[memo]
    out: dict[str, Metric] = {}
    for proto in protos:
        for m in proto.metrics:
            if isinstance(m, Metric):
                out.setdefault(str(m), m)
    for m in (*COSTS, *LEAKAGE):
        out[str(m)] = m
    _MEMO[memo] = MappingProxyType(out)
    return _MEMO[memo]


def _protocols(names: list[str] | tuple[str, ...] | None) -> list:
    """The registered protocols of ``names`` (None: all; a name no longer registered, e.g. a
    plugin's in an old results directory, is left out)."""
    if names is None:
        return list(all_protocols().values())
    out = []
    for name in dict.fromkeys(names):
        try:
            out.append(get_protocol(name))
        except ParamError:  # an unknown name describes nothing
            continue
    return out


def describe(name: str, protocols: list[str] | tuple[str, ...] | None = None) -> Metric:
    """The :class:`Metric` of ``name`` (a metric, cost or ``leakage.*`` column); a name
    nobody described gets its own words as its label."""
    return registry(protocols).get(name) or plain(name.split(".", 1)[-1]
                                                  if name.startswith("metrics.") else name)


def legend(names: list[str], protocols: list[str] | tuple[str, ...] | None = None) -> list[str]:
    """One line per metric of ``names`` that has a meaning: ``name: label (range, lower is
    better)``, what a table prints under itself."""
    reg = registry(protocols)
    lines = []
    for name in names:
        m = reg.get(name)
        if m is None:
            continue
        extra = ", ".join(t for t in (m.unit and f"in {m.unit}", m.range_text, m.direction)
                          if t)
        lines.append(f"{name}: {m.label}" + (f" ({extra})" if extra else ""))
    return lines


def markdown_table(protocols: list[str] | tuple[str, ...]) -> str:
    """The documentation's table of the metrics of ``protocols``: name, what it is, range and
    which direction is better (``docs/families/*.md`` hold it; a test keeps it current)."""
    rows = ["| metric | what it is | range | better |", "|---|---|---|---|"]
    seen: set[str] = set()
    for proto in _protocols(protocols):
        for m in proto.metrics:
            if str(m) in seen or not isinstance(m, Metric):
                continue
            seen.add(str(m))
            about = f"{m.label}: {m.about}" if m.about else m.label
            rows.append(f"| `{m}` | {about} | {m.range_text or '–'} | "
                        f"{m.better or '–'} |")
    return "\n".join(rows)

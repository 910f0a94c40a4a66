"""``protocols.metrics.Metric``: a metric's name with its meaning, checked where it is built;
the documentation's per-family tables and the README's demo table agree with the declarations."""

from __future__ import annotations

import pickle
import re

import pytest
from ldpsim.protocols import PROTOCOLS
from ldpsim.protocols.metrics import Metric, describe, fraction, plain
from ldpsim.simulator.results.metrics import COSTS, LEAKAGE, legend, markdown_table, registry

from tests.conftest import ROOT


def test_a_metric_is_its_name_and_keeps_its_meaning_through_pickle():
    m = Metric("sq_err", "squared error", low=0.0, better="lower", about="x")
    assert m == "sq_err" and hash(m) == hash("sq_err") and {m: 1}["sq_err"] == 1
    assert m.name == "sq_err" and m.direction == "lower is better" and m.range_text == "≥ 0"
    back = pickle.loads(pickle.dumps(m))
    assert type(back) is Metric and back.as_dict() == m.as_dict()
    assert fraction("f", "share", "higher").range_text == "[0, 1]"
    assert Metric("u", "unit", unit="B").axis_label == "unit (B)"


@pytest.mark.parametrize("kw, word", [({"better": "smaller"}, "better"),
                                      ({"low": 1.0, "high": 0.0}, "empty")])
def test_a_malformed_metric_is_refused(kw, word):
    with pytest.raises(ValueError, match=word):
        Metric("m", "m", **kw)


def test_an_undescribed_metric_gets_its_own_words():
    assert describe(("a",), "b_c").label == "b c" and plain("x_y").better is None
    assert describe(PROTOCOLS["kwiksort"].metrics, "kendall_tau").better == "lower"


def test_the_registry_holds_the_protocols_costs_and_leakage():
    reg = registry()
    assert {str(m) for m in (*COSTS, *LEAKAGE)} <= set(reg)
    assert all(str(m) in reg for p in PROTOCOLS.values() for m in p.metrics)
    assert reg["kendall_tau"].better == "lower" and reg["correct"].better == "higher"
    assert set(registry(["dpwevote"])) - {str(m) for m in (*COSTS, *LEAKAGE)} == \
        {str(m) for m in PROTOCOLS["dpwevote"].metrics}
    assert registry(["no_such_protocol"]).keys() == {str(m) for m in (*COSTS, *LEAKAGE)}
    assert legend(["kendall_tau", "unknown"], ["kwiksort"]) == [
        "kendall_tau: Kendall tau distance (normalised) ([0, 1], lower is better)"]


@pytest.mark.parametrize("family", ["rank", "truth", "vote", "safari", "ethics"])
def test_each_family_page_shows_its_metrics_as_declared(family):
    names = [n for n, p in PROTOCOLS.items()
             if type(p).__module__.startswith(f"ldpsim.protocols.{family}.")]
    assert names
    table = markdown_table(names)
    page = (ROOT / "docs" / "families" / f"{family}.md").read_text(encoding="utf-8")
    assert table in page, f"docs/families/{family}.md: its metrics table should read\n{table}"


def test_the_readme_demo_table_says_which_direction_is_better():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    reg = registry(["kwiksort", "dp_kwiksort", "ldp_kwiksort_rr"])
    rows = dict(re.findall(r"^\| `(\w+)` \| .*? \| \*\*(lower|higher)\*\*", text, re.M))
    assert {"error_rate", "kendall_tau", "cap_hit"} <= set(rows)
    for name, better in rows.items():
        assert reg[name].better == better, name

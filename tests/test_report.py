"""``ldpsim report DIR``: one self-contained HTML page per results directory, opened in a real
headless browser (Debian's chromium; the browser tests skip, saying so, where none exists)."""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from ldpsim.simulator.results.published import check_published, compare
from ldpsim.simulator.results.report import REPORT_FILE
from ldpsim.simulator.sweep.reporting import write_report

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
needs_browser = pytest.mark.skipif(
    BROWSER is None, reason="no headless browser (Debian: apt-get install chromium; .ci/run "
                            "installs it)")


def _ldpsim(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ldpsim", *args], capture_output=True,
                          text=True, timeout=300, cwd=cwd)


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory) -> Path:
    """The demo's scenario, small, with the coalition's attacks on (a leakage section)."""
    out = tmp_path_factory.mktemp("report") / "demo"
    res = _ldpsim("run", "demo", "--backend", "inproc", "--set", "data.n=300", "--set",
                  "repeats=2", "--set", "collusion.colluders=0.5", "--set",
                  "collusion.attacks=true", "--set", "collusion.attack_targets=20",
                  "--out", str(out), "--no-progress", "-q")
    assert res.returncode == 0, res.stderr
    return out


def _browser(*args: str, page: Path) -> subprocess.CompletedProcess:
    return subprocess.run([BROWSER, "--headless", "--no-sandbox", "--disable-gpu",
                           "--hide-scrollbars", *args, page.as_uri()],
                          capture_output=True, text=True, timeout=120)


def test_the_report_holds_every_section(demo_dir):
    res = _ldpsim("report", str(demo_dir))
    assert res.returncode == 0, res.stderr
    page = demo_dir / REPORT_FILE
    assert res.stdout.strip().endswith(str(page))
    text = page.read_text(encoding="utf-8")
    for title in ("Scenario", "Summary", "Figures", "Cost per round",
                  "What the coalition learned", "Environment"):
        assert f"<h2>{title}</h2>" in text, title
    # a header says what the metric is, its unit and which direction is better
    assert "Kendall tau distance (normalised)" in text and "lower is better ↓" in text
    assert "bytes up per agent (B)" in text
    # every figure is embedded (nothing to fetch): as many as the plots of the directory
    images = re.findall(r'<img [^>]*src="([^"]+)"', text)
    pngs = list(demo_dir.glob("plot_*.png"))
    assert images and len(images) == len(pngs)
    assert all(src.startswith("data:image/png;base64,") for src in images)
    assert not re.search(r'(src|href)="(https?:|file:|/)', text)
    # the leakage table: chance and the LDP bound beside the attacks' accuracies
    assert "chance (guessing)" in text and "LDP bound on the report attack" in text
    assert "numpy" in text and "inproc" in text


def test_a_directory_without_results_is_one_clear_line(tmp_path):
    res = _ldpsim("report", str(tmp_path / "nothing"))
    assert res.returncode == 1 and res.stderr.startswith("error: ") and "Traceback" not in \
        res.stderr
    assert not (tmp_path / "nothing").exists()


@needs_browser
def test_the_report_opens_in_a_browser_with_every_figure_loaded(demo_dir, tmp_path):
    page = write_report(demo_dir, tmp_path / "report.html")
    dom = _browser("--dump-dom", page=page)
    assert dom.returncode == 0, dom.stderr[-2000:]
    total = int(re.search(r'data-images="(\d+)"', dom.stdout).group(1))
    loaded = int(re.search(r'data-images-loaded="(\d+)"', dom.stdout).group(1))
    assert total == len(list(demo_dir.glob("plot_*.png"))) > 0 and loaded == total
    # the screenshot: a page of the asked size with a figure's colours on it, not a blank one
    shot = tmp_path / "shot.png"
    res = _browser(f"--screenshot={shot}", "--window-size=1200,2400", page=page)
    assert shot.is_file(), res.stderr[-2000:]
    from matplotlib.image import imread

    pixels = imread(shot)
    assert pixels.shape[:2] == (2400, 1200)
    rgb = pixels[..., :3].reshape(-1, 3)
    assert rgb.std() > 0.05  # text, tables and plots, not an empty page
    # matplotlib's first colour (the first protocol's line) is on the page: a figure drew
    c0 = np.array([0x1f, 0x77, 0xb4]) / 255
    assert (np.abs(rgb - c0).max(axis=1) < 0.02).sum() > 50


@needs_browser
def test_the_browser_check_sees_a_broken_figure(demo_dir, tmp_path):
    """The page's own count fails when an image does not decode (the test above can fail)."""
    page = write_report(demo_dir, tmp_path / "report.html")
    text = page.read_text(encoding="utf-8")
    page.write_text(text.replace("data:image/png;base64,iVBOR", "data:image/png;base64,AAAA",
                                 1), encoding="utf-8")
    dom = _browser("--dump-dom", page=page).stdout
    total = int(re.search(r'data-images="(\d+)"', dom).group(1))
    loaded = int(re.search(r'data-images-loaded="(\d+)"', dom).group(1))
    assert loaded == total - 1


def test_published_numbers_beside_ours_in_standard_errors():
    recs = [{"protocol": "p", "point": {"protocol": "p", "params.epsilon": e},
             "metrics": {"acc": v}} for e, vals in ((0.5, (0.4, 0.6, 0.5)), (1.0, (0.7, 0.9)))
            for v in vals]
    entry = {"source": "Table 9", "metric": "acc", "where": {"protocol": "p"},
             "x": "params.epsilon", "at": [0.5, 1.0, 2.0], "values": [0.45, 0.8, 0.9]}
    assert check_published([entry]) == []
    rows = compare([entry], recs)
    assert [r["repeats"] for r in rows] == [3, 2, 0]
    se = math.sqrt(0.01 / 3)  # s = 0.1 over 3 repeats
    assert rows[0]["ours"] == pytest.approx(0.5) and rows[0]["se"] == pytest.approx(se)
    assert rows[0]["z"] == pytest.approx(0.05 / se)
    assert rows[1]["z"] == pytest.approx((0.8 - 0.8) / math.sqrt(0.02 / 2), abs=1e-9)
    assert rows[2]["ours"] is None and rows[2]["z"] is None


def test_a_printed_gap_between_two_protocols_beside_ours():
    """``versus`` picks the reference runs b; the default form is (b − a) / b, "a lies x%
    below b", with the delta method's standard error; ``difference`` is a − b."""
    recs = [{"protocol": p, "point": {"protocol": p, "data.m": 15}, "metrics": {"tau": v}}
            for p, vals in (("rr", (0.2, 0.4)), ("lap", (0.4, 0.6))) for v in vals]
    entry = {"source": "Sec. 6.4", "metric": "tau", "where": {"protocol": "rr"},
             "versus": {"protocol": "lap"}, "x": "data.m", "at": [15, 30],
             "values": [0.3, 0.1]}
    assert check_published([entry]) == []
    rows = compare([entry], recs)
    a, b, sa, sb = 0.3, 0.5, 0.1, 0.1  # means and standard errors (s = 0.1414 over 2)
    assert rows[0]["ours"] == pytest.approx((b - a) / b)
    se = math.hypot(sa / b, a * sb / b ** 2)
    assert rows[0]["se"] == pytest.approx(se)
    assert rows[0]["z"] == pytest.approx((0.4 - 0.3) / se)
    assert rows[0]["repeats"] == 2 and "lap" in rows[0]["metric"]
    assert rows[1]["ours"] is None and rows[1]["z"] is None and rows[1]["repeats"] == 0
    diff = compare([{**entry, "form": "difference", "values": [-0.2, 0]}], recs)[0]
    assert diff["ours"] == pytest.approx(a - b)
    assert diff["se"] == pytest.approx(math.hypot(sa, sb))
    assert diff["z"] == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize("bad, word", [
    ([{"source": "T", "metric": "m", "x": "params.epsilon", "at": [1], "values": [1, 2]}],
     "equal length"),
    ([{"source": "T", "metric": "m", "x": "x", "at": [1], "values": [1], "form": "ratio",
       "versus": {"protocol": "b"}}], "form: got 'ratio'"),
    ([{"source": "T", "metric": "m", "x": "x", "at": [1], "values": [1],
       "form": "difference"}], "form: needs versus"),
    ([{"source": "T", "metric": "m", "x": "x", "at": [1], "values": [1], "versus": 3}],
     "versus: got 3"),
    ([{"metric": "m", "x": "x", "at": [], "values": []}], "source: missing"),
    ([{"source": "T", "metric": "m", "x": "x", "at": [1], "values": [1], "colour": 1}],
     "colour: unknown key"),
    ({"source": "T"}, "tables"),
])
def test_a_malformed_published_table_is_named(bad, word):
    assert any(word in e for e in check_published(bad))


def test_dpwevotes_tables_3_and_4_sit_beside_ours(tmp_path):
    """The shipped scenario carries the paper's Tables 3-4: a small run of it puts all 120
    printed numbers in the report, each at its point (here 20 games a point, n = 10 only)."""
    out = tmp_path / "t34"
    res = _ldpsim("run", "paper002_tables3_4", "--set", "repeats=20", "--set", "data.n=10",
                  "--set", "output.plots=false", "--out", str(out), "--no-progress", "-q")
    assert res.returncode == 0, res.stderr
    text = write_report(out).read_text(encoding="utf-8")
    assert "<h2>Beside the paper</h2>" in text
    rows = re.findall(r"<tr[^>]*><td>Table [34]</td>.*?</tr>", text)
    assert len(rows) == 120
    ours = [r for r in rows if "data.n = 10," in r]
    assert len(ours) == 40 and all(r.count("<td") == 8 for r in ours)
    # n = 50 and 100 were not run here: their numbers stand alone
    assert all('<td class="num">0</td>' in r for r in rows if "data.n = 10," not in r)


# -- the report of a collusion sweep: a results section, at 1280 px


@pytest.fixture(scope="module")
def collusion_dir(tmp_path_factory) -> Path:
    """``collusion_leakage`` (a list of colluders, [plot] x = colluders), tiny: one repeat."""
    out = tmp_path_factory.mktemp("report") / "collusion"
    res = _ldpsim("run", "collusion_leakage", "--set", "repeats=1", "--set", "data.n=200",
                  "--set", "collusion.attack_targets=20", "--jobs", "1", "--out", str(out),
                  "--no-progress", "-q")
    assert res.returncode == 0, res.stderr
    res = _ldpsim("report", str(out), "--style", "paper")
    assert res.returncode == 0, res.stderr
    return out


def _sections(text: str) -> list[str]:
    return re.findall(r"<h2>([^<]+)</h2>", text)


def test_a_collusion_sweeps_report_opens_with_its_own_figures(collusion_dir):
    import html
    import tomllib

    text = (collusion_dir / REPORT_FILE).read_text(encoding="utf-8")
    assert _sections(text)[0] == "Figures"
    figures = text.partition("<h2>Figures</h2>")[2].partition("<h2>")[0]
    captions = re.findall(r"<figcaption>([^<]+)</figcaption>", figures)
    # the scenario's [plot]: its three metrics against the colluders, nothing against ε,
    # no cost (it says costs = false)
    assert [html.unescape(c).rpartition(" against ")[0] for c in captions] == [
        "coalition's accuracy from the reports", "coalition's accuracy by differencing",
        "error rate (pairs against the majority)"]
    assert all("against colluding agents" in c for c in captions)
    # one repeat: n/a for the spread, never "± 0"
    summary = text.partition("<h2>Summary</h2>")[2].partition("<h2>")[0]
    assert "± n/a" in summary and not re.search(r"± 0<", summary)
    # the scenario as written: TOML, each value in the file's syntax, colluders a list
    written = html.unescape(re.search(r'<pre class="toml">([^<]+)</pre>', text).group(1))
    doc = tomllib.loads(written)
    assert doc["collusion"]["colluders"] == [0.0, 0.1, 0.3, 0.5, 0.7, 0.9]
    assert "sweep" not in doc["collusion"] and doc["data"]["kind"] == "mallows"
    assert doc["repeats"] == 1 and doc["data"]["n"] == 200
    marked = [ln for ln in written.splitlines() if ln.endswith("# set on the command line")]
    assert sorted(ln.split(" = ")[0] for ln in marked) == ["attack_targets", "jobs", "n",
                                                           "repeats"]


def _overflow(page: Path, tmp_path: Path) -> dict[str, str]:
    """The page at a 1280 px wide viewport in the browser: the document's width and every
    table, pre and figure wider than its box, as a script on the page measures them."""
    probe = """<script>window.addEventListener("load", function () {
      var bad = [], els = document.querySelectorAll("table, pre, div.wide, figure");
      for (var i = 0; i < els.length; i++) {
        var e = els[i], r = e.getBoundingClientRect();
        if (e.scrollWidth > e.clientWidth || r.right > window.innerWidth)
          bad.push(e.tagName + " " + e.scrollWidth + ">" + e.clientWidth);
      }
      document.body.setAttribute("data-page-width", document.documentElement.scrollWidth);
      document.body.setAttribute("data-viewport", window.innerWidth);
      document.body.setAttribute("data-tables", document.querySelectorAll("table").length);
      document.body.setAttribute("data-overflow", bad.join("; "));
    });</script>"""
    copy = tmp_path / page.name
    copy.write_text(page.read_text(encoding="utf-8").replace("</body>", probe + "</body>"),
                    encoding="utf-8")
    dom = _browser("--dump-dom", "--window-size=1280,1000", page=copy)
    assert dom.returncode == 0, dom.stderr[-2000:]
    return {k: re.search(f'data-{k}="([^"]*)"', dom.stdout).group(1)
            for k in ("page-width", "viewport", "tables", "overflow")}


@needs_browser
def test_the_collusion_report_fits_a_1280_px_page(collusion_dir, tmp_path):
    got = _overflow(collusion_dir / REPORT_FILE, tmp_path)
    assert got["viewport"] == "1280" and int(got["tables"]) >= 3
    assert int(got["page-width"]) <= 1280 and got["overflow"] == "", got


@needs_browser
def test_a_report_of_many_columns_fits_a_1280_px_page(demo_dir, tmp_path):
    """The demo with attacks: 6 metrics and 5 costs beside 4 settings, in column groups."""
    page = write_report(demo_dir, tmp_path / "report.html")
    assert page.read_text(encoding="utf-8").count("<caption>metrics") >= 1
    got = _overflow(page, tmp_path)
    assert int(got["page-width"]) <= 1280 and got["overflow"] == "", got

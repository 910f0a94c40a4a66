"""Every table of the documentation site shows whole at 1280 px: the site is built and each page
opened in a headless browser (Debian's chromium) at a 1280×800 window, where no table's content
is wider than its box (the table, each of its cells and any scrolling box around it:
``scrollWidth <= clientWidth + 1``) and no page scrolls sideways.

One browser run measures every page, each in a frame of the window's size, from a page the test
writes beside the built site; a page of its own with a table that cannot wrap shows that the
check sees an overflow. The browser tests skip, saying so, without chromium or MkDocs; the check
of the stylesheet's rules runs everywhere."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

BIN = Path(sys.executable).parent
BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
MKDOCS = BIN / "mkdocs"
#: the window every page is measured in: a laptop's
WIDTH, HEIGHT = 1280, 800
#: the site's own stylesheet (mkdocs.yml ``extra_css``)
CSS = "css/extra.css"
#: the page the check itself must flag: a table whose cells may not wrap
TOO_WIDE = "too-wide-check.html"

HARNESS = """<!doctype html><html><head><meta charset="utf-8"></head><body>
<pre id="result">pending</pre><script>
const pages = PAGES, out = {};
function scrolls(el) {
  const o = getComputedStyle(el).overflowX;
  return o === "auto" || o === "scroll";
}
function measure(doc) {
  const root = doc.documentElement, tables = [];
  doc.querySelectorAll("table").forEach(t => {
    const boxes = [t, ...t.querySelectorAll("th, td")];
    for (let p = t.parentElement; p && p !== doc.body; p = p.parentElement) {
      if (scrolls(p)) boxes.push(p);
    }
    const over = boxes.filter(b => b.scrollWidth > b.clientWidth + 1)
      .map(b => `${b.tagName.toLowerCase()}.${b.className}: ${b.scrollWidth} > ${b.clientWidth}`);
    const head = (t.querySelector("th, td") || t).textContent.trim().slice(0, 40);
    tables.push({head, over});
  });
  return {page: [root.scrollWidth, root.clientWidth], tables};
}
let k = 0;
function next() {
  if (k >= pages.length) {
    document.getElementById("result").textContent = JSON.stringify(out);
    return;
  }
  const f = document.createElement("iframe");
  f.style.cssText = "width: WIDTHpx; height: HEIGHTpx; border: 0";
  f.onload = () => setTimeout(() => {
    try { out[pages[k]] = measure(f.contentDocument); }
    catch (e) { out[pages[k]] = String(e); }
    f.remove(); k++; next();
  }, 50);
  f.src = pages[k];
  document.body.appendChild(f);
}
next();
</script></body></html>
"""

needs_site = pytest.mark.skipif(
    BROWSER is None or not MKDOCS.exists(),
    reason="no headless browser (Debian: apt-get install chromium) or no MkDocs "
           "(pip install -e '.[docs]')")


def pages(site: Path) -> list[str]:
    """The built site's pages (every ``index.html``; not the 404 page), relative to ``site``."""
    return sorted(str(p.relative_to(site)) for p in site.rglob("index.html"))


def measure(site: Path, shown: list[str]) -> dict[str, dict]:
    """Each page of ``shown`` opened at the window's size in one headless browser run: the
    page's (scrollWidth, clientWidth) and, per table, its first cell's text and the boxes
    wider than they show."""
    harness = site / "table-check.html"
    harness.write_text(HARNESS.replace("PAGES", json.dumps(shown))
                       .replace("WIDTH", str(WIDTH)).replace("HEIGHT", str(HEIGHT)),
                       encoding="utf-8")
    argv = [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--allow-file-access-from-files", f"--window-size={WIDTH + 100},{HEIGHT + 100}",
            "--virtual-time-budget=120000", "--dump-dom", harness.as_uri()]
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=150)
    except subprocess.TimeoutExpired:  # a headless browser that hangs at start: once more
        res = subprocess.run(argv, capture_output=True, text=True, timeout=150)
    found = re.search(r'<pre id="result">(.*?)</pre>', res.stdout, re.S)
    assert found and found.group(1) != "pending", f"the check did not finish:\n{res.stderr}"
    got = json.loads(html.unescape(found.group(1)))
    failed = {p: v for p, v in got.items() if not isinstance(v, dict)}
    assert not failed, f"pages the check could not read: {failed}"
    return got


def overflows(got: dict[str, dict]) -> list[str]:
    """Every table wider than its box and every page that scrolls sideways, one line each."""
    out = []
    for page, v in got.items():
        if v["page"][0] > v["page"][1] + 1:
            out.append(f"{page}: the page scrolls sideways ({v['page'][0]} > {v['page'][1]})")
        out += [f"{page}: table '{t['head']}': {'; '.join(t['over'][:3])}"
                for t in v["tables"] if t["over"]]
    return out


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site") / "site"
    r = subprocess.run([str(MKDOCS), "build", "--strict", "--quiet", "--site-dir", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"mkdocs build --strict failed:\n{r.stdout}\n{r.stderr}"
    return out


@needs_site
def test_every_table_of_the_site_shows_whole_at_1280_px(site):
    shown = pages(site)
    assert "index.html" in shown and "writing-a-protocol/index.html" in shown
    # a page the check must flag: the home page with a table whose cells may not wrap
    home = (site / "index.html").read_text(encoding="utf-8")
    cells = "".join(f"<td>{'wide_cell_' * 12}{i}</td>" for i in range(4))
    (site / TOO_WIDE).write_text(home.replace(
        "</h1>", f"</h1><table style='white-space: nowrap'><tr>{cells}</tr></table>", 1),
        encoding="utf-8")
    got = measure(site, [*shown, TOO_WIDE])
    flagged = got.pop(TOO_WIDE)
    assert any(t["over"] for t in flagged["tables"]), flagged
    # the tables are there (the check measured something) and none is cut
    assert len(got["index.html"]["tables"]) >= 2
    assert len(got["writing-a-protocol/index.html"]["tables"]) >= 1
    assert sum(len(v["tables"]) for v in got.values()) > 40
    problems = overflows(got)
    assert not problems, "tables cut at 1280 px:\n" + "\n".join(problems)


def test_the_sites_stylesheet_lets_table_cells_wrap():
    """Without a browser: mkdocs.yml loads the stylesheet, and it undoes the theme's
    one-line cells and lets long code in a cell break."""
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert re.search(rf"^extra_css:\s*\n\s*-\s*{re.escape(CSS)}\s*$", config, re.M)
    css = (ROOT / "docs" / CSS).read_text(encoding="utf-8")
    rules = dict(re.findall(r"([^{}]+)\{([^}]*)\}", re.sub(r"/\*.*?\*/", "", css, flags=re.S)))
    rules = {" ".join(k.split()): v for k, v in rules.items()}
    cells = next(v for k, v in rules.items() if "td" in k and "th" in k)
    assert re.search(r"white-space:\s*normal", cells)
    code = next(v for k, v in rules.items() if "code" in k and "td" in k)
    assert re.search(r"overflow-wrap:\s*anywhere", code)

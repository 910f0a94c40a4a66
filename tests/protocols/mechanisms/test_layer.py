"""The families add no noise and flip no coins themselves: every randomizer goes through
``protocols.mechanisms`` (one object per mechanism, its ε stated once). Checked by inspecting
the source of every family module, so a new module that draws Laplace noise by hand or
compares an agent's uniform against a keep probability fails here."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ldpsim import protocols

ROOT = Path(protocols.__file__).parent
#: Modules that generate the agents' private data (the simulation's ground truth, not a
#: privacy mechanism): drawing answers or rankings from uniforms is their job.
DATA_GENERATORS = {"data.py", "mallows.py"}
#: Coin flips in family modules that are not privacy noise, with why.
NOT_NOISE = {
    ("safari/protocols.py", "phase1_fraction"):
        "the curator's public split of users into SAFARI's two phases (data-independent)",
}
#: Building blocks of noise that only ``protocols.mechanisms`` may use (the exact discrete
#: Laplace's among them, and the forms hand-written float Laplace used to take).
NOISE_CALLS = {"laplace", "laplace_from_uniform", "snap_to_grid", "snapped_laplace",
               "laplace_mechanism", "exponential", "gumbel", "from_noise", "bernoulli_step",
               "bernoulli_rational", "bernoulli_exp", "geometric"}
FAMILY_MODULES = sorted(p for p in ROOT.glob("*/*.py")
                        if p.parent.name != "mechanisms" and p.name not in DATA_GENERATORS)


def _is_uniform(node: ast.AST) -> bool:
    """An agent's uniform by the project's naming: ``u``, ``u_keep``, ``u[:, 0]``, ..."""
    while isinstance(node, ast.Subscript):
        node = node.value
    return isinstance(node, ast.Name) and (node.id == "u" or node.id.startswith("u_"))


def violations(path: Path) -> list[str]:
    """Lines of ``path`` that add noise or flip a coin outside ``protocols.mechanisms``."""
    source = path.read_text()
    lines = source.splitlines()
    rel = path.relative_to(ROOT).as_posix()
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in NOISE_CALLS:
                found.append(f"{rel}:{node.lineno}: calls {name}()")
        elif isinstance(node, ast.Compare) and any(
                isinstance(op, ast.Lt | ast.LtE | ast.Gt | ast.GtE) for op in node.ops):
            if _is_uniform(node.left) or any(_is_uniform(c) for c in node.comparators):
                line = lines[node.lineno - 1]
                if not any(rel == m and key in line for m, key in NOT_NOISE):
                    found.append(f"{rel}:{node.lineno}: compares a uniform: {line.strip()}")
    return found


@pytest.mark.parametrize("path", FAMILY_MODULES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_family_module_adds_no_noise_itself(path):
    assert violations(path) == []


def test_the_check_catches_hand_written_noise(tmp_path):
    """The inspection is not vacuous: the forms the families used to write are caught."""
    fam = tmp_path / "fam"
    fam.mkdir()
    bad = fam / "protocols.py"
    bad.write_text(
        "import numpy as np\n"
        "from protocols.rng import laplace_from_uniform\n"
        "def respond(bits, u, p, g, v, b):\n"
        "    flipped = np.where(u < p, bits, 1 - bits)\n"
        "    other = np.where(u_keep[:, 0] >= p, 1, 0)\n"
        "    noisy = v + g.laplace(0.0, b)\n"
        "    return flipped, other, noisy + laplace_from_uniform(u, b)\n")
    global ROOT
    old, ROOT = ROOT, tmp_path
    try:
        found = violations(bad)
    finally:
        ROOT = old
    lines = sorted(int(f.split(":")[1]) for f in found)
    assert lines == [4, 5, 6, 7], found


def test_every_family_module_is_inspected():
    names = {p.relative_to(ROOT).as_posix() for p in FAMILY_MODULES}
    for fam in ("rank", "truth", "vote", "safari", "ethics"):
        assert f"{fam}/protocols.py" in names or f"{fam}/dpwevote.py" in names
    assert "truth/mechanisms.py" in names and "truth/mf.py" in names

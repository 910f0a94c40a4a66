"""DPWeVote's privacy budget (Yan, Liu & Liu, 2018, §4.5 and §5.1.1): the split of ε into the
weight report's ε1 and each opinion report's ε2, and the mechanisms they define: the randomized
responses M_w and M_φ (Eq. 9a, 9b) and the §5.1.3 baseline's Laplace releases.

How the paper's text is read is in ``dpwevote``'s module docstring.
"""

from __future__ import annotations

from dataclasses import dataclass

from ldpsim.protocols import mechanisms as mech

LAPLACE_SENSITIVITY_W = 2.0  # §5.1.3: w changes by at most 3 - 1
LAPLACE_SENSITIVITY_PHI = 1.0  # §5.1.3: φ changes by at most 1


@dataclass(frozen=True)
class Budget:
    """ε1 (weight report), ε2 (each opinion report) and the game's total ε1 + k·ε2."""

    eps_w: float
    eps_phi: float
    candidates: int

    @property
    def total(self) -> float:
        """Sequential composition (Theorem 2.6) over one weight and k opinion reports."""
        return self.eps_w + self.candidates * self.eps_phi


def budget(epsilon: float, split: float, candidates: int, scope: str = "game") -> Budget:
    """Split the budget as §4.5 / §5.1.1 (ε = ε1 + ε2, default ε1 = ε2 = ε/2), for k candidates.

    Parameters
    ----------
    epsilon : float
        The configured ε.
    split : float
        ε1 / ε for the weight report, in (0, 1).
    candidates : int
        k, the number of proposal candidates (opinion reports per partner).
    scope : {"game", "candidate"}
        ``"game"``: ε is the whole game's budget, ε2 = (1 - split) ε / k, total = ε.
        ``"candidate"``: ε = ε1 + ε2 as in Theorem 4.3 for one candidate, total = ε1 + k ε2.
    """
    eps_w = split * epsilon
    eps_phi = (1.0 - split) * epsilon
    if scope == "game":
        eps_phi /= candidates
    return Budget(eps_w, eps_phi, candidates)


def rr_probabilities(b: Budget) -> dict[str, float]:
    """Eq. (9a) ``p_w = e^ε1 / (2 + e^ε1)`` and Eq. (9b) ``p_φ = e^ε2 / (1 + e^ε2)``.

    Each report is ε-LDP with the ratio p / r = e^ε (Theorems 4.1, 4.2; §4.5 parts 1-2):
    one weight report ε1-LDP, one opinion report ε2-LDP. Randomized response has no sensitivity.
    """
    mw, mp = mech.GRR(b.eps_w, 3), mech.GRR(b.eps_phi, 2)
    return {"p_w": mw.p, "r_w": mw.q, "p_phi": mp.p, "r_phi": mp.q}


def rr_mechanisms(b: Budget) -> tuple[mech.GRR, mech.GRR]:
    """The weight's and each opinion's randomized response: ``GRR(ε1, 3)`` (M_w, Eq. 9a) and
    ``GRR(ε2, 2)`` (M_φ, Eq. 9b)."""
    return mech.GRR(b.eps_w, 3), mech.GRR(b.eps_phi, 2)


def laplace_scales(b: Budget) -> tuple[float, float]:
    """§5.1.3 baseline: the nominal Laplace scales ``(Δ_w/ε1, Δ_φ/ε2) = (2/ε1, 1/ε2)``.

    ``w + Lap(2/ε1)`` is ε1-LDP because w in {1, 2, 3} moves by at most Δ_w = 2; each
    ``φ_l + Lap(1/ε2)`` is ε2-LDP with Δ_φ = 1. The game is (ε1 + k ε2)-LDP as for DPWeVote.
    The releases are the exact discrete mechanisms of ``laplace_mechanisms``.
    """
    return LAPLACE_SENSITIVITY_W / b.eps_w, LAPLACE_SENSITIVITY_PHI / b.eps_phi


def laplace_mechanisms(b: Budget) -> tuple[mech.Laplace, mech.Laplace]:
    """The weight's and each opinion's release: ``Laplace(ε1, 2)`` and ``Laplace(ε2, 1)``."""
    return (mech.Laplace(b.eps_w, LAPLACE_SENSITIVITY_W),
            mech.Laplace(b.eps_phi, LAPLACE_SENSITIVITY_PHI))

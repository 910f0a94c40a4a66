"""Truth inference on sparse crowdsourcing answers under LDP (Sun, Dong, Wang, Yu & Qin, 2018,
"Truth Inference on Sparse Crowdsourcing Data with Local Differential Privacy"): Algorithm 1 on
answers perturbed by LP, RR with NULL, MF (objective perturbation) or the 2-Layer baseline."""

from ldpsim.protocols.truth.data import KINDS
from ldpsim.protocols.truth.protocols import TruthLP, TruthMF, TruthPlain, TruthRR, TruthTwoLayer

PROTOCOLS = (TruthPlain(), TruthLP(), TruthRR(), TruthMF(), TruthTwoLayer())

__all__ = ["PROTOCOLS", "KINDS"]

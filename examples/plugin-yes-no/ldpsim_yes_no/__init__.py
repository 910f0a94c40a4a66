"""A complete small ldpsim family, kept outside ldpsim: one yes/no survey question.

Every respondent holds one private bit ("have you ever ...?"). ``yes_no_rr`` asks each of them
once; the respondent answers through Warner's randomized response (ldpsim's ``GRR`` with two
values), so the answer is ε-LDP; the curator estimates the fraction of "yes" without bias.

ldpsim finds this package through the entry point in ``pyproject.toml``; the names below are
all it needs: ``PROTOCOLS`` (Protocol instances) and ``KINDS`` (data kinds by name).
"""

from ldpsim_yes_no.protocol import YesNoRR
from ldpsim_yes_no.survey import KINDS

PROTOCOLS = (YesNoRR(),)

__all__ = ["PROTOCOLS", "KINDS", "YesNoRR"]

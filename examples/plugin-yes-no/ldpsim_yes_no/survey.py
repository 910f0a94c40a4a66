"""The data: n respondents, each answering "yes" (1) with probability ``p_yes``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from ldpsim.protocols import rng
from ldpsim.protocols.base import MAX_AGENTS, ParamSpec
from ldpsim.protocols.data import DataKind, Dataset
from ldpsim.protocols.keys import DataKeys

DATA_TYPE = "yes_no"


@dataclass
class Survey(Dataset):
    """Respondent i's bit comes from its own data key (``keys.range``), so any block of
    respondents is the same whichever pool generates it (ldpsim's split-independence contract),
    and no respondent's key tells anything about another's."""

    keys: DataKeys | None = None
    p_yes: float = 0.3

    def rows(self, start: int, stop: int) -> np.ndarray:
        u = rng.uniform(self.keys.range(start, stop), np.arange(start, stop, dtype=np.int64),
                        0, 1)
        return (u < self.p_yes).astype(np.int64)  # shape (stop - start, 1)

    def truth(self) -> dict[str, float]:
        yes = sum(int(self.rows(s, min(s + (1 << 20), self.n)).sum())
                  for s in range(0, self.n, 1 << 20))
        return {"yes_fraction": yes / self.n}


def _survey(keys: DataKeys, n: int, p_yes: float) -> Survey:
    return Survey(kind="yes_no_survey", n=n, public={"n": n}, keys=keys, p_yes=p_yes)


KINDS = {
    "yes_no_survey": DataKind(
        "yes_no_survey", _survey,
        {"n": ParamSpec("n", "int", required=True, low=1, high=MAX_AGENTS,
                        help="number of respondents"),
         "p_yes": ParamSpec("p_yes", "float", default=0.3, low=0, high=1,
                            help="probability that a respondent's true answer is yes")},
        DATA_TYPE, "one private yes/no answer per respondent",
        examples=({"n": 500, "p_yes": 0.3},)),
}

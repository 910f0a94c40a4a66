"""The built-in families by name: pure data, importable before numpy (the command line reads
it to preload only a run's own families into the curator's fork server)."""

from __future__ import annotations

#: The built-in families, each a package exposing ``PROTOCOLS`` and ``KINDS``.
BUILTIN = ("ldpsim.protocols.rank", "ldpsim.protocols.truth", "ldpsim.protocols.vote",
           "ldpsim.protocols.safari", "ldpsim.protocols.ethics")

#: Each built-in family's protocols and data kinds by name (tests/protocols/test_registry.py
#: holds them to the families'): a look-up of a built-in name imports its family alone, not
#: every family and the plugins' entry points, which a run that names one family never uses.
BUILTIN_NAMES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "ldpsim.protocols.rank": (("dp_kwiksort", "kwiksort", "ldp_kwiksort_lap", "ldp_kwiksort_rr"),
                              ("mallows", "preflib", "sushi")),
    "ldpsim.protocols.truth": (("truth_lp", "truth_mf", "truth_plain", "truth_rr",
                                "truth_two_layer"),
                               ("crowd_adultcontent", "crowd_synthetic", "crowd_web")),
    "ldpsim.protocols.vote": (("dpwevote", "dpwevote_laplace"), ("weighted_votes",)),
    "ldpsim.protocols.safari": (("rank_calm", "rank_grr", "rank_harmony", "rank_olh", "safari",
                                 "safari_nopriv"), ("jester", "safari_mallows", "sushi_subset")),
    "ldpsim.protocols.ethics": (("ethics_nonprivate", "ethics_rlcp", "ethics_rldp_fm",
                                 "ethics_rldp_laplace", "ethics_vlcp", "ethics_vldp"),
                                ("ethics_synthetic",)),
}


def family_of_protocol(name: str) -> str | None:
    """The built-in family (its package's name) that defines protocol ``name``, or None."""
    return next((f for f, (names, _) in BUILTIN_NAMES.items() if name in names), None)


def family_of_kind(name: str) -> str | None:
    """The built-in family (its package's name) that defines data kind ``name``, or None."""
    return next((f for f, (_, names) in BUILTIN_NAMES.items() if name in names), None)

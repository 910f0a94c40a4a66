"""The per-run paths a sweep takes many times, each the same as the plain form it replaces:
a run's key from its point's shared text (``runs.key_parts``), the signatures and MACs
(``signing``: ``hmac.digest``), the policy keys (derived once), and the CSV tables
(``summary.csv_text``: cells in column order)."""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
import json
from typing import Any

import numpy as np
import pytest
from ldpsim.protocols.keys import kdf
from ldpsim.simulator.results import summary
from ldpsim.simulator.scenario import runs
from ldpsim.simulator.session import signing


def plain_run_key(proto, params, data, repeat, seed, collusion, faults, deployment=None):
    """``run_key`` as one JSON list hashed whole (how every stored key was made)."""
    data = {k: runs.key_form(v) for k, v in data.items()}
    blob = json.dumps([proto, params, data, repeat, seed,
                       {k: collusion[k] for k in ("colluders", "curator")}, faults,
                       *([deployment] if deployment else [])],
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


CASES = [
    ("dpwevote", {"epsilon": 0.5, "split": 0.5}, {"kind": "weighted_votes", "n": 10},
     {"colluders": 0, "curator": True}, [], None),
    ("rr", {"epsilon": 1}, {"kind": "x", "file": "data:sushi/a.txt", "n": None},
     {"colluders": [1, 2], "curator": False, "extra": 1}, [{"pool": 0, "round": 1}],
     {"model": "m", "late": 0.5}),
    ("é", {"w": [1.5, -0.0], "z": {"b": 1, "a": 2}}, {"kind": "k", "p": object()},
     {"colluders": 0.25, "curator": True}, [], {}),
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("repeat", [0, 7, 12345, np.int64(3), 2.0, True])
def test_a_runs_key_is_its_whole_lists_hash(case: tuple, repeat: Any) -> None:
    proto, params, data, collusion, faults, deployment = case
    want = plain_run_key(proto, params, data, repeat, 42, collusion, faults, deployment)
    assert runs.run_key(proto, params, data, repeat, 42, collusion, faults,
                        deployment) == want
    parts = runs.key_parts(proto, params, data, 42, collusion, faults, deployment)
    assert runs.key_of(parts, repeat) == want


def test_signatures_are_hmac_sha256() -> None:
    key, blob, nonce = b"k" * 32, b"\x00config\xff" * 9, b"n" * 16
    assert signing.sign(key, blob) == hmac.new(key, b"ldpsim\x1fsetup\x1f" + blob,
                                               hashlib.sha256).digest()
    assert signing.verify(key, blob, signing.sign(key, blob))
    assert not signing.verify(key, blob + b"x", signing.sign(key, blob))
    msg = b"ldpsim\x1fhello\x1f" + nonce + b"\x1f3\x1f1\x1f2"
    assert signing.registration_mac(key, nonce, 3, 1, 2) == hmac.new(key, msg,
                                                                     hashlib.sha256).digest()


def test_policy_keys_are_derived_per_master_and_slot() -> None:
    a, b = b"a" * 16, b"b" * 16
    for _ in range(2):  # derived, then found
        assert signing.policy_key(a, 0, 2) == kdf(a, "policy", 0, 2)
        assert signing.policy_key(a, np.int64(1), 2.0) == kdf(a, "policy", 1, 2)
        assert signing.policy_key(b, 0, 2) == kdf(b, "policy", 0, 2)
    assert len({signing.policy_key(a, 0, 2), signing.policy_key(a, 1, 2),
                signing.policy_key(a, 0, 3), signing.policy_key(b, 0, 2)}) == 4


def dict_writer_text(columns: list[str], rows: list[dict[str, Any]]) -> str:
    """``csv_text`` as ``csv.DictWriter`` writes it (how every table was written)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({c: summary._csv_cell(row.get(c)) for c in columns})
    return buf.getvalue()


def test_csv_text_is_dict_writers() -> None:
    columns = ["key", "a", "b,c", 'q"uote', "missing"]
    rows = [{"key": "k1", "a": 1.5, "b,c": None, 'q"uote': 'x "y", z'},
            {"key": "k2", "a": True, "b,c": [1, 2.5], 'q"uote': {"b": 1, "a": (2, 3)}},
            {"key": "k3", "a": np.float64(1e-300), "b,c": np.int64(3), 'q"uote': "é\nline"},
            {"key": "k4", "a": float("nan"), "b,c": -0.0, 'q"uote': 10**20, "other": 1},
            {}]
    assert summary.csv_text(columns, rows) == dict_writer_text(columns, rows)
    assert summary.csv_text(columns, []) == dict_writer_text(columns, [])


@pytest.mark.parametrize("seed", [0, 5, 2**62 + 3, 8193526412876548646, np.int64(7)])
def test_a_seeds_ids_are_derived_as_before(seed) -> None:
    from ldpsim.protocols.keys import data_tag
    from ldpsim.protocols.rng import stream_key
    from ldpsim.simulator.session import seeding

    config = {"protocol": "dpwevote", "params": {"epsilon": 1.0},
              "data": {"kind": "weighted_votes", "n": 10}, "seed": seed, "pools": 2}
    for _ in range(2):  # derived, then found
        public = seeding.public_config(config)
        assert public["data_id"] == data_tag(seed)
        assert public["collusion_key"] == stream_key(seed, "collusion")
        assert seeding.curator_config(config)["keys"]["curator"] == stream_key(seed, "curator")
        assert all(type(public[k]) is int for k in ("data_id", "collusion_key", "run_id"))


def test_signatures_and_tags_are_their_json_as_before() -> None:
    from ldpsim.protocols import keys
    from ldpsim.protocols.keys import Secrets
    from ldpsim.simulator.sweep.execute import data_signature

    data = {"kind": "k", "n": 10, "z": [1.5, None], "p": object()}
    sec = Secrets(b"m" * 16)
    tag = hashlib.blake2b(sec.master, digest_size=8).hexdigest()
    assert data_signature(data, 7) == json.dumps([data, 7, ""], sort_keys=True, default=str)
    assert data_signature(data, 7, sec) == json.dumps([data, 7, tag], sort_keys=True,
                                                      default=str)
    parts = ("a", {"y": 1, "x": [2, np.float64(0.5)]}, 3)
    blob = json.dumps(keys._canon(list(parts)), sort_keys=True, separators=(",", ":"))
    h = hashlib.blake2b(blob.encode(), digest_size=8, person=b"ldpsim-tag")
    assert keys.tag_of(*parts) == int.from_bytes(h.digest(), "little") >> (64 - keys.TAG_BITS)
    blob = json.dumps(keys._canon(["p", {"e": 1}, {"n": 2}, 0]), sort_keys=True,
                      separators=(",", ":"))
    assert keys._run_identity("p", {"e": 1}, {"n": 2}) == keys._identity_key(blob)


def test_a_policy_with_what_was_spent_is_the_replaced_one() -> None:
    from dataclasses import replace

    from ldpsim.simulator.session.policy import AgentPolicy

    for table in (None, {}, {"max_epsilon": 2.0, "protocols": ["dpwevote"],
                             "lifetime_epsilon": 5.0}):
        for spent in (0.0, 1.5):
            assert AgentPolicy.of(table, spent=spent) == replace(AgentPolicy.of(table),
                                                                 spent=spent)


def test_protocol_code_ends_the_run_on_the_protocols_own_failure() -> None:
    from ldpsim.simulator.session import RunFailed
    from ldpsim.simulator.session.common import out_of_memory, protocol_code

    def plan() -> None:
        raise ValueError("bad plan")

    with protocol_code("nothing"):
        pass
    with pytest.raises(RunFailed) as err:
        with protocol_code("plan of round 3"):
            plan()
    text = str(err.value)
    assert text.startswith("the protocol's curator code failed in plan of round 3:\n")
    assert "Traceback" in text and "in plan" in text and "ValueError: bad plan" in text
    assert err.value.__suppress_context__
    mine = RunFailed("the run's own")
    with pytest.raises(RunFailed) as err:
        with protocol_code("x"):
            raise mine
    assert err.value is mine
    with pytest.raises(RunFailed, match="ran out of memory"):
        with protocol_code("x"):
            raise MemoryError("big")
    assert "ran out of memory" in out_of_memory(MemoryError("big"))
    with pytest.raises(KeyboardInterrupt):
        with protocol_code("x"):
            raise KeyboardInterrupt

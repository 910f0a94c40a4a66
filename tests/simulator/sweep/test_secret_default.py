"""No secret given means no secret leaked (issue 47, part 4).

The attack: take exactly what the curator process of a run receives (``curator_config``: the
run's and its data set's public ids, its stream keys; and the registration key ``auth``) and
what a pool receives (its ``PoolKeys``), and try every scenario seed below ``GUESSES``, as a
curator or a pool that knows how ldpsim derives its keys would: the run seed of repetition 0
of each, then the public ids, stream keys and the pool's first agent's device key that run
seed would give if the seed were the only secret; and what a colluding agent discloses (its
coin key of the run). The scenario's own seed is among the guesses (a scenario file is
public), so a match means the seed alone rebuilds every key.

Without a secret (a fresh one per sweep) and with a key file no guess matches; in the explicit
seed-only mode the same search finds the seed (so the test cannot pass vacuously).

Then the fresh secret itself: kept in the results directory as ``secret.key`` (the format of
``ldpsim keys``, owner-only), reused on resume, read by ``ldpsim verify``, named by ``ldpsim
run``, never written into the results; ``--secret`` with it reproduces the runs elsewhere; a
run of the Python API without a directory holds it on its ``Results``.
"""

from __future__ import annotations

import json
import shutil
import stat

import numpy as np
import pytest
from ldpsim.protocols.keys import (
    data_tags,
    device_rows,
    master_words_of_seeds,
    root_words,
    run_seed,
    run_tags,
)
from ldpsim.protocols.keytree import key_message as _message
from ldpsim.protocols.prf import prf
from ldpsim.protocols.rng import stream_key
from ldpsim.simulator.session.common import block_of
from ldpsim.simulator.session.keyfiles import (
    SECRET_FILE,
    KeyFileError,
    read_host_keys,
    secrets_of,
    write_host_keys,
)

import ldpsim

#: scenario seeds an attacker tries (every one below this)
GUESSES = 1_000_000
#: the scenario's seed: one of the guesses
SEED = 424_242
N = 300
POOLS = 2


def _received(tmp_path, monkeypatch, secret: str | None):
    """What the orchestrator handed the curator process and the pools of a small default run
    (``seeding.local_parties`` as the processes backend calls it), with ``[runtime] secret =
    secret`` (None: not given)."""
    from ldpsim.simulator.backends import transport

    got = []
    real = transport.local_parties

    def spy(*args, **kwargs):
        got.append(real(*args, **kwargs))
        return got[-1]

    monkeypatch.setattr(transport, "local_parties", spy)
    overrides = {"data.n": N, "params.epsilon": 1.0, "repeats": 1, "seed": SEED,
                 "protocols": ["ldp_kwiksort_rr"], "runtime.backend": "processes",
                 "runtime.pools": POOLS, "runtime.jobs": 1}
    if secret is not None:
        overrides["runtime.secret"] = secret
    ldpsim.run("demo", overrides, out=tmp_path / "out")
    assert len(got) == 1
    return got[0]


def _candidates() -> np.ndarray:
    """The run seed of repetition 0 of every scenario seed below ``GUESSES``."""
    cands = stream_key(np.arange(GUESSES, dtype=np.uint64), "repeat", 0) >> np.uint64(1)
    assert int(cands[SEED]) == run_seed(SEED, 0)
    return cands


def curator_guesses(cfg: dict, auth: bytes, cands: np.ndarray) -> np.ndarray:
    """The candidate run seeds that give any id or key of what the curator received (``auth``,
    random per run, is no function of a seed: nothing to match)."""
    assert isinstance(auth, bytes) and len(auth) == 32
    u = np.uint64
    hit = data_tags(cands) == u(cfg["data_id"])
    hit |= run_tags(cands, cfg["protocol"], cfg["params"], cfg["data"]) == u(cfg["run_id"])
    hit |= stream_key(cands, "curator") == u(cfg["keys"]["curator"])
    hit |= stream_key(cands, "collusion") == u(cfg["keys"]["collusion"])
    return np.flatnonzero(hit)


def pool_guesses(keys, cands: np.ndarray) -> np.ndarray:
    """The candidate run seeds whose seed-derived master gives the device key of the pool's
    first agent (as the pool holds it)."""
    first, _ = block_of(keys.pool, keys.pools, N)
    held = keys.agents.for_range(first, first + 1, device=True)
    d0, d1 = device_rows(*root_words(*master_words_of_seeds(cands)),
                         np.full(len(cands), first, dtype=np.int64))
    return np.flatnonzero((d0 == held["device0"][0]) & (d1 == held["device1"][0]))


def colluder_guesses(keys, run_id: int, cands: np.ndarray) -> np.ndarray:
    """The candidate run seeds whose seed-derived keys give the coin key the pool's first
    agent discloses when it colludes (its coins in the run ``run_id``)."""
    first, _ = block_of(keys.pool, keys.pools, N)
    disclosed = keys.agents.for_range(first, first + 1, coin_tag=run_id)["coins"][0]
    d0, d1 = device_rows(*root_words(*master_words_of_seeds(cands)),
                         np.full(len(cands), first, dtype=np.int64))
    coins = prf(d0, d1, _message(run_id, len(cands), False))  # as ``AgentKeys.coins``
    return np.flatnonzero(coins == disclosed)


@pytest.mark.parametrize("mode", ["default", "file"])
def test_no_guess_recovers_the_seed_or_a_key(tmp_path, monkeypatch, mode):
    """Without a secret (a fresh one per sweep), and with a key file: no scenario seed below
    10^6, the scenario's own included, gives any id or key the curator or a pool received."""
    secret = None
    if mode == "file":
        secret = str(write_host_keys(tmp_path / "keys", POOLS,
                                      [[block_of(i, POOLS, N)] for i in range(POOLS)])["secret"])
    parties = _received(tmp_path, monkeypatch, secret)
    cands = _candidates()
    assert curator_guesses(parties.curator, parties.auth, cands).size == 0
    for keys in parties.pools:
        assert pool_guesses(keys, cands).size == 0
        assert colluder_guesses(keys, parties.curator["run_id"], cands).size == 0


def test_seed_only_mode_is_found_by_the_same_search(tmp_path, monkeypatch):
    """``secret = "seed"`` keeps the seed-derived keys: the same search finds the seed from
    the curator's ids and from each pool's keys."""
    parties = _received(tmp_path, monkeypatch, "seed")
    cands = _candidates()
    assert curator_guesses(parties.curator, parties.auth, cands).tolist() == [SEED]
    for keys in parties.pools:
        assert pool_guesses(keys, cands).tolist() == [SEED]
        assert colluder_guesses(keys, parties.curator["run_id"], cands).tolist() == [SEED]


# -- the fresh secret: where it lives, and how a run is reproduced -------------------------

def _tiny(**runtime) -> dict:
    return {"name": "fresh", "protocols": ["ldp_kwiksort_rr"], "repeats": 1, "seed": 5,
            "data": {"kind": "mallows", "n": 120, "m": 4, "theta": 0.5},
            "params": {"epsilon": 1.0},
            "runtime": {"backend": "inproc", "pools": 2, "jobs": 1, "progress": False,
                        **runtime},
            "output": {"plots": False}}


def _outputs(res) -> dict:
    return {r["key"]: (r["output"], r["metrics"]) for r in res}


def test_the_fresh_secret_is_kept_owner_only_reused_on_resume_and_never_recorded(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / (SECRET_FILE + ".tmp")).write_text("left by a crash")  # readable by all
    (out / (SECRET_FILE + ".tmp")).chmod(0o644)
    first = ldpsim.run(_tiny(), out=out)
    key = out / SECRET_FILE
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    master = read_host_keys(key).secrets.master  # the format `ldpsim keys` writes
    assert len(master) == 32
    assert json.loads(key.read_text())["kind"] == "orchestrator"
    stored = json.loads((out / "scenario.json").read_text())
    assert stored["secret"] == {"kind": "fresh", "file": SECRET_FILE}
    assert stored["fingerprint"]["runtime.secret"][0] != ""  # its salted MAC
    assert stored["scenarios"][0]["runtime"]["secret"] == ""  # the directory's own
    for name in ("scenario.json", "results.jsonl", "summary.csv"):
        assert master.hex() not in (out / name).read_text()
    # resumed (one more repetition): the same secret, the first run kept, one new run
    more = ldpsim.run({**_tiny(), "repeats": 2}, out=out)
    assert read_host_keys(key).secrets.master == master
    assert len(more) == 2 and _outputs(first).items() <= _outputs(more).items()
    # another directory: another secret, other data and coins
    other = ldpsim.run(_tiny(), out=tmp_path / "other")
    assert read_host_keys(tmp_path / "other" / SECRET_FILE).secrets.master != master
    assert _outputs(other) != _outputs(first)
    # elsewhere, given the directory's secret.key: the same runs, bit for bit
    again = ldpsim.run(_tiny(), out=tmp_path / "again", secret=key)
    assert _outputs(again) == _outputs(first)
    assert json.loads((tmp_path / "again" / "scenario.json").read_text())["secret"] == \
        {"kind": "file", "file": None}


def test_verify_reads_the_directorys_secret_or_is_given_it(tmp_path):
    out = tmp_path / "out"
    ldpsim.run({**_tiny(), "repeats": 2}, out=out)
    rep = ldpsim.verify(out)
    assert rep.ok and rep.checked == 2
    moved = tmp_path / "moved"  # a copy without its secret
    shutil.copytree(out, moved)
    (moved / SECRET_FILE).unlink()
    with pytest.raises(KeyFileError, match="no such key file"):
        ldpsim.verify(moved)
    rep = ldpsim.verify(moved, secret=out / SECRET_FILE)
    assert rep.ok and rep.checked == 2
    wrong = ldpsim.verify(moved, secret="seed")  # another secret: every run differs
    assert not wrong.ok and len(wrong.differing) == 2


def test_a_directory_of_runs_without_a_secret_key_is_not_resumed_with_a_fresh_one(tmp_path):
    """Records written with another secret (the seed's, as before fresh secrets were kept)
    are never mixed with a fresh secret's: the sweep is refused, naming how to give it."""
    out = tmp_path / "seeded"
    ldpsim.run(_tiny(secret="seed"), out=out)
    assert not (out / SECRET_FILE).exists()
    with pytest.raises(KeyFileError, match="--secret seed"):
        ldpsim.run({**_tiny(), "repeats": 2}, out=out)
    assert not (out / SECRET_FILE).exists()
    assert len(ldpsim.run({**_tiny(secret="seed"), "repeats": 2}, out=out)) == 2
    assert ldpsim.verify(out).ok  # its stored sweeps name the seed's secret


def test_the_api_without_a_directory_keeps_its_fresh_secret_on_the_results(tmp_path):
    res = ldpsim.run(_tiny())
    assert res.path is None and isinstance(res.secret, bytes) and len(res.secret) == 32
    assert res.secret.hex() not in repr(res)
    path = res.write_secret(tmp_path / "secret.key")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert _outputs(ldpsim.run(_tiny(), secret=path)) == _outputs(res)
    assert _outputs(ldpsim.run(_tiny())) != _outputs(res)  # a fresh one each time
    seeded = ldpsim.run(_tiny(), secret="seed")
    assert seeded.secret is None and _outputs(ldpsim.run(_tiny(secret="seed"))) == \
        _outputs(seeded)  # reproducible from the scenario alone
    with pytest.raises(ValueError, match="no fresh secret"):
        seeded.write_secret(tmp_path / "none.key")


def test_a_results_reader_rebuilds_no_row_from_the_recorded_seed(tmp_path):
    """Every record carries its run's seed: with the default secret the seed-derived rows are
    not the run's (they agree as independent draws do); in the seed-only mode they are."""
    from ldpsim.protocols import build_data
    from ldpsim.protocols.keys import DataKeys
    from ldpsim.simulator.sweep.execute import _dataset, keyed_seed

    for secret, same in (("", False), ("seed", True)):
        out = tmp_path / (secret or "fresh")
        rec, = ldpsim.run(_tiny(secret=secret), out=out)
        guessed = build_data(rec["data"], DataKeys.of_seed(rec["seed"])).rows(0, 120)
        held = secrets_of({"secret": str(out / SECRET_FILE) if not secret else secret})
        true = _dataset(rec["data"], keyed_seed(rec["seed"], held), held).rows(0, 120)
        agree = float(np.mean((guessed == true).all(axis=1)))
        assert (agree == 1.0) if same else agree < 0.2


def test_the_secret_key_is_validated_in_one_line():
    from ldpsim.simulator.scenario.scenario import ScenarioError, validate

    with pytest.raises(ScenarioError) as e:
        validate(_tiny(secret="sead"))
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("[runtime] secret: sead")
    assert "'seed'" in msg and "secret.key" in msg and "none" in msg


def test_ldpsim_run_says_where_the_secret_is(tmp_path):
    from tests.test_cli import cli

    scen = tmp_path / "s.toml"
    scen.write_text('name = "one"\nprotocol = "ldp_kwiksort_rr"\nrepeats = 1\nseed = 1\n'
                    '[data]\nkind = "mallows"\nn = 40\nm = 4\n'
                    '[runtime]\nbackend = "inproc"\npools = 2\n[output]\nplots = false\n')
    out = tmp_path / "out"
    res = cli("run", str(scen), "--out", str(out), "--no-progress")
    assert res.returncode == 0, res.stderr
    assert f"secret:  {out / SECRET_FILE} (fresh" in res.stdout
    res = cli("run", str(scen), "--out", str(tmp_path / "s"), "--no-progress", "--secret",
              "seed")
    assert res.returncode == 0, res.stderr
    assert "secret:  the seed's (--secret seed)" in res.stdout
    res = cli("verify", str(out), "--no-progress")
    assert res.returncode == 0, res.stdout + res.stderr


def test_a_replaced_secret_key_is_refused_on_resume(tmp_path):
    """Whoever can write the directory cannot slip another secret under its records: the
    fingerprint's MAC of the secret no longer matches."""
    from ldpsim.simulator.scenario.identity import FingerprintMismatch
    from ldpsim.simulator.session.keyfiles import write_fresh_secret

    out = tmp_path / "out"
    ldpsim.run(_tiny(), out=out)
    write_fresh_secret(out / SECRET_FILE)  # another secret in its place
    with pytest.raises(FingerprintMismatch, match="runtime.secret"):
        ldpsim.run({**_tiny(), "repeats": 2}, out=out)


def test_records_a_key_file_gave_before_seeds_were_keyed_are_not_mixed_in(tmp_path):
    """A key file's runs hold other data and coins than before (their seeds are keyed by the
    secret first): a directory written with it before is refused, naming the derivation; the
    seed-only secret's runs are unchanged, and so is their derivation's name."""
    import ldpsim.simulator.scenario.identity as identity

    secret = str(write_host_keys(tmp_path / "keys", 2, [[(0, 60)], [(60, 120)]])["secret"])
    out = tmp_path / "out"
    ldpsim.run(_tiny(secret=secret), out=out)
    doc = json.loads((out / "scenario.json").read_text())
    assert doc["fingerprint"]["keys"] == [identity.KEYS_KEYED]
    doc["fingerprint"]["keys"] = [identity.KEYS]  # as written before
    (out / "scenario.json").write_text(json.dumps(doc))
    with pytest.raises(identity.FingerprintMismatch, match='keys: "prf-1" there'):
        ldpsim.run({**_tiny(secret=secret), "repeats": 2}, out=out)
    ldpsim.run(_tiny(secret="seed"), out=tmp_path / "seeded")
    seeded = json.loads((tmp_path / "seeded" / "scenario.json").read_text())
    assert seeded["fingerprint"]["keys"] == [identity.KEYS]

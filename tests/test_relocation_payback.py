"""The relocation payback rule (``env/relocation_payback.py``, ``networks.relocation_pays``): relocate
is masked where a relocation after contention cannot save the pause it pays, read from the
observation's features; it travels in the run's config, old configs read it off, and a loaded
policy can take it without training again."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from learner_fixtures import TINY

from slamorl_jax.agent.config import TrainConfig
from slamorl_jax.agent.config_checks import ignored_settings, validate_config
from slamorl_jax.agent.networks import MASKED_LOGIT, ActorCritic, init_params, relocation_pays
from slamorl_jax.env.action_sets import RELOCATE_ACTION
from slamorl_jax.env.forecast import EPOCHS_LEFT_SCALE
from slamorl_jax.env.observation import FEATURE_NAMES, NUM_FEATURES
from slamorl_jax.env.relocation_payback import contended_epochs_avoided, relocation_payback

SHIPPED = Path(__file__).resolve().parent.parent / "checkpoints" / "default"
# A relocating network without the rule (the default has it: 1 pause).
RELOCATING = dataclasses.replace(
    TINY, actions="targets_relocate", relocate_gain_init=6.0, relocate_payback=0.0
)


def observation(slower: float, epoch_over_pause: float, epochs_left: float, rows: int = 4) -> jax.Array:
    """Random observations whose last epoch ran ``slower`` times its forecast, on a job whose clean
    epoch is ``epoch_over_pause`` pauses with ``epochs_left`` epochs to run (the features'
    encodings, ``forecast.py``)."""
    obs = jax.random.uniform(jax.random.key(0), (rows, NUM_FEATURES))
    features = {
        "surprise": 0.5 + 0.5 * np.tanh(2.0 * np.log(slower)),
        "pause_share": 1.0 / (1.0 + epoch_over_pause),
        "epochs_left": epochs_left / (epochs_left + EPOCHS_LEFT_SCALE),
    }
    for name, value in features.items():
        obs = obs.at[:, FEATURE_NAMES.index(name)].set(value)
    return obs


def test_the_payback_is_the_contended_epochs_avoided_times_their_extra_time_over_the_pause() -> None:
    # A 10 s epoch, 1.3x slower, under a 30 s pause, many epochs left: 2.33 x 3 s / 30 s.
    payback = relocation_payback(jnp.log(1.3), 10.0 / 30.0, 1000.0, 0.7)
    assert float(payback) == pytest.approx(7 / 3 * 0.3 / 3.0, rel=1e-5)
    assert float(relocation_payback(jnp.log(0.8), 10.0, 50.0, 0.7)) == 0.0  # faster than forecast
    assert float(contended_epochs_avoided(0.7, 1.0)) == pytest.approx(0.7)  # one epoch left


@pytest.mark.parametrize(
    ("slower", "epoch_over_pause", "epochs_left"),
    [(1.3, 10 / 30, 100), (1.3, 60 / 30, 100), (2.7, 10 / 30, 100), (1.3, 60 / 30, 1), (1.15, 120 / 30, 50)],
)
def test_the_rule_reads_the_payback_back_from_the_observation(
    slower: float, epoch_over_pause: float, epochs_left: float
) -> None:
    """The network's decision equals the arithmetic on the values the features encode, and masks
    relocate alone: every other logit is the rule-free network's (the same parameters)."""
    ruled = ActorCritic(dataclasses.replace(RELOCATING, relocate_payback=1.0).network)
    free = ActorCritic(RELOCATING.network)
    obs = observation(slower, epoch_over_pause, epochs_left)
    expected = float(relocation_payback(jnp.log(slower), epoch_over_pause, epochs_left, 0.7)) >= 1.0
    assert np.all(np.asarray(relocation_pays(obs, ruled.config)) == expected)
    params = init_params(free, jax.random.key(1), NUM_FEATURES)
    weights = jnp.full((obs.shape[0], 3), 1.0 / 3.0)
    logits = np.asarray(ruled.apply(params, obs, weights)[0])
    free_logits = np.asarray(free.apply(params, obs, weights)[0])
    others = np.arange(free.config.num_actions) != RELOCATE_ACTION
    np.testing.assert_array_equal(logits[:, others], free_logits[:, others])
    if expected:
        np.testing.assert_array_equal(logits[:, RELOCATE_ACTION], free_logits[:, RELOCATE_ACTION])
    else:
        assert np.all(logits[:, RELOCATE_ACTION] == MASKED_LOGIT)


def test_the_rule_is_a_flag_that_old_configs_and_other_action_sets_read_off() -> None:
    assert TrainConfig().relocate_payback == 1.0 == TrainConfig().network.relocate_payback  # the default
    assert TrainConfig(actions="targets").network.relocate_payback == 0.0  # nothing to mask there
    on = dataclasses.replace(RELOCATING, relocate_payback=1.0).network
    assert on.payback_features == (FEATURE_NAMES.index("pause_share"), FEATURE_NAMES.index("epochs_left"))
    assert on.contention_persistence == pytest.approx(0.7)
    # An off rule leaves the network config as it was, so older networks compare equal.
    assert RELOCATING.network == dataclasses.replace(RELOCATING, relocate_payback=0.0).network
    saved = json_dict(dataclasses.replace(RELOCATING, relocate_payback=1.0))
    del saved["relocate_payback"]
    assert TrainConfig.from_dict(saved).relocate_payback == 0.0  # saved before the rule: off
    for bad in (-1.0, 101.0, float("nan")):
        with pytest.raises(ValueError, match="--relocate_payback must be"):
            validate_config(dataclasses.replace(RELOCATING, relocate_payback=bad))
    assert "relocate_payback" in ignored_settings(dataclasses.replace(RELOCATING, actions="targets"))
    assert "relocate_payback" not in ignored_settings(RELOCATING)


def json_dict(config: TrainConfig) -> dict:
    """``config`` as its checkpoint's meta stores it."""
    import json

    return json.loads(config.to_json())


def test_a_loaded_policy_takes_the_rule_without_training_again() -> None:
    from slamorl_jax.policy_checkpoint import load_policy

    shipped = load_policy(SHIPPED)  # trained with the rule: its config carries it
    assert shipped.config.relocate_payback == 1.0 == shipped.network.config.relocate_payback
    gated = load_policy(SHIPPED.parent / "gated")  # trained before the rule: reads 0
    assert gated.config.relocate_payback == 0.0 == gated.network.config.relocate_payback
    ruled = gated.with_relocate_payback(1.0)
    assert ruled.config.relocate_payback == 1.0 and ruled.params is gated.params
    assert ruled.network.config == shipped.network.config  # as if trained with it
    weights = jnp.full((4, 3), 1.0 / 3.0)
    short = observation(1.3, 10 / 30, 100)  # cannot pay: relocate masked
    assert np.all(np.asarray(jax.nn.softmax(ruled.logits(short, weights)))[:, RELOCATE_ACTION] == 0.0)
    assert np.all(np.asarray(ruled(short, weights)) != RELOCATE_ACTION)
    long = observation(1.3, 3000 / 30, 100)  # pays many times over: the gated policy's own logits
    np.testing.assert_array_equal(
        np.asarray(ruled.logits(long, weights)), np.asarray(gated.logits(long, weights))
    )
    assert shipped.with_relocate_payback(0.0).network.config == gated.network.config
    # The gate still masks where the rule alone would allow: 1.05x slower, under the gate's 1.105x.
    under_gate = observation(1.05, 3000 / 30, 100)
    assert np.all(np.asarray(relocation_pays(under_gate, ruled.network.config)))
    assert np.all(np.asarray(jax.nn.softmax(ruled.logits(under_gate, weights)))[:, RELOCATE_ACTION] == 0.0)
    assert shipped.deciding(0.5, None).network is shipped.network and shipped.deciding(0.5).hold_below == 0.5
    with pytest.raises(ValueError, match="relocate prior"):
        dataclasses.replace(
            shipped, config=dataclasses.replace(shipped.config, actions="targets")
        ).with_relocate_payback(1.0)


def test_the_commands_take_the_rule_or_refuse_it_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``recommend --relocate_payback`` runs the policy with that rule: the README's job whose last
    epoch ran 1.3x slower than the nine before it is told to relocate by the shipped policy (a 26-minute
    epoch repays the pause many times over), and not under a rule asking 100 pauses, which masks
    relocate (probability 0). A policy without the relocate prior (``checkpoints/targets``) refuses
    the flag with one line and exit code 2, as does a value outside [0, 100]."""
    import json

    from slamorl_jax import recommend as recommend_cli

    job = json.loads((SHIPPED.parent.parent / "docs" / "example_job.json").read_text())
    job["history"][-1]["epoch_time_s"] = job["last_epoch_time_s"] = 2015.0  # 1.3 x 1550 s
    job["elapsed_s"] += 465.0
    slowed = tmp_path / "slowed.json"
    slowed.write_text(json.dumps(job))
    argv = [f"--job={slowed}", f"--checkpoint={SHIPPED}", "--compact"]
    answers = {}
    for flags in ([], ["--relocate_payback=0"], ["--relocate_payback=100"]):
        assert recommend_cli.main([*argv, *flags]) == 0
        answers[tuple(flags)] = json.loads(capsys.readouterr().out)
    assert answers[()]["relocate"] and answers[("--relocate_payback=0",)]["relocate"]
    ruled_out = answers[("--relocate_payback=100",)]
    assert not ruled_out["relocate"] and ruled_out["action_probabilities"][RELOCATE_ACTION] == 0.0
    for bad, words in (
        (
            [f"--job={slowed}", f"--checkpoint={SHIPPED.parent / 'targets'}", "--relocate_payback=1"],
            "relocate prior",
        ),
        ([*argv, "--relocate_payback=-1"], "--relocate_payback"),
    ):
        with pytest.raises(SystemExit) as info:
            recommend_cli.main(bad)
        err = capsys.readouterr().err
        assert info.value.code == 2 and words in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("flag", ["--relocate-payback=1", "--relocate-gate=0.1"])
def test_reallocation_patterns_refuses_a_rule_for_a_policy_that_cannot_relocate(
    flag: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Bad input, not an unexpected error: one line and exit code 2, before anything runs."""
    from benchmarks import reallocation_patterns

    argv = [f"--checkpoint={SHIPPED.parent / 'targets'}", flag, f"--out={tmp_path / 'r.json'}"]
    with pytest.raises(SystemExit) as info:
        reallocation_patterns.main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2 and "relocate prior" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "r.json").exists()

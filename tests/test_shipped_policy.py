"""The policy shipped in checkpoints/ loads without training code and acts; export round-trips."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slamorl_jax import checkpoint as ckpt
from slamorl_jax.agent.trainer import env_params_from_config, make_train
from slamorl_jax.env import NUM_ACTIONS, make
from slamorl_jax.env.scenarios import SCENARIO_KINDS, with_scenario
from slamorl_jax.episodes import keep_allocation, run_episodes, summarise_episodes, with_init_strategy
from slamorl_jax.quality_bar import greedy_policy, objective

SHIPPED = Path(__file__).resolve().parent.parent / "checkpoints" / "default"


def test_shipped_policy_acts_on_env_observations() -> None:
    """``load_policy`` reads the shipped export; greedy and sampled actions are valid for real states."""
    policy = ckpt.load_policy(SHIPPED)
    env, params = make("mixed")
    obs, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(jax.random.key(0), 16), params)
    greedy = np.asarray(policy(obs, state.weights))
    sampled = np.asarray(policy(obs, state.weights, jax.random.key(1)))
    for actions in (greedy, sampled):
        assert actions.shape == (16,)
        assert np.all((actions >= 0) & (actions < NUM_ACTIONS))
    assert policy.values(obs, state.weights).shape == (16, 3)


def test_export_keeps_the_policy_and_refuses_a_used_destination(tmp_path: Path) -> None:
    """Exporting an export gives identical parameters; exporting onto checkpoints fails clearly."""
    exported = ckpt.export_policy(SHIPPED, tmp_path / "copy")
    original, copy = ckpt.load_policy(SHIPPED), ckpt.load_policy(exported)
    assert ckpt.params_equal(original.params, copy.params)
    assert copy.config == original.config
    obs = jax.random.uniform(jax.random.key(2), (8, 21))
    weights = jnp.full((8, 3), 1.0 / 3.0)
    np.testing.assert_array_equal(np.asarray(original(obs, weights)), np.asarray(copy(obs, weights)))
    with pytest.raises(ckpt.CheckpointError, match="already holds checkpoints"):
        ckpt.export_policy(SHIPPED, tmp_path / "copy")


def test_an_export_cannot_be_resumed() -> None:
    """An export has no training state: ``restore_state`` says so instead of crashing."""
    config = dataclasses.replace(
        ckpt.load_policy(SHIPPED).config, num_envs=4, total_timesteps=64, updates_per_chunk=1
    )
    trainer = make_train(config)
    template = trainer.init(jax.random.key(0), env_params_from_config(config))
    with pytest.raises(ckpt.CheckpointError, match="cannot restore training state"):
        ckpt.restore_state(SHIPPED, template)


@pytest.mark.parametrize(("shipped", "eta"), [(SHIPPED, 1.5), (SHIPPED.parent / "static-weights", 0.0)])
def test_shipped_policies_still_beat_the_request(shipped: Path, eta: float) -> None:
    """Guard against env or observation changes that silently break the shipped policies: on fresh
    jobs each still beats the static request on each kind's objective and meets all SLAs more often
    (the adaptive one, eta = 1.5, and the static-weight ablation, trained with eta = 0)."""
    policy = ckpt.load_policy(shipped)
    assert policy.config.adapt_strength == eta
    greedy = greedy_policy(policy.network)
    base = env_params_from_config(policy.config)
    env, _ = make("mixed")
    for scenario in SCENARIO_KINDS:
        params = with_init_strategy(with_scenario(base, scenario), "requested")
        key = jax.random.key(11)
        ours = summarise_episodes(run_episodes(env, params, greedy, key, 512, policy.params))
        request = summarise_episodes(run_episodes(env, params, keep_allocation, key, 512))
        assert objective(scenario, ours) < objective(scenario, request) - 0.05, scenario
        assert ours["all_slas_met"] > request["all_slas_met"] + 0.05, scenario

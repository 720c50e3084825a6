"""``benchmarks/step_breakdown.py``'s probes change only what they say they leave out."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.step_breakdown import WithoutRankingBatch, paper_features_full_width
from slamorl_jax.env import JobAllocationEnv
from slamorl_jax.env.observation import FEATURE_NAMES, NUM_FEATURES, paper_features

SUGGESTED = np.array([name.endswith("_suggested") for name in FEATURE_NAMES])


def test_unranked_step_batch_differs_from_the_env_only_in_the_suggested_flags() -> None:
    """Reset and one ``step_batch`` of four jobs: the probe's observations are the env's with every
    ``*_suggested`` feature 0 (the env flags exactly one candidate per job), and the same states
    (to float32 rounding: the two programs fuse differently)."""
    env = JobAllocationEnv()
    params = env.default_params
    probe = WithoutRankingBatch(env)
    keys = jax.random.split(jax.random.key(3), 4)
    actions = jnp.array([0, 4, 9, 30], jnp.int32)

    def run(stepper: object) -> tuple:
        obs, state = jax.vmap(stepper.reset, in_axes=(0, None))(keys, params)
        next_obs, next_state, *_ = stepper.step_batch(keys, state, actions, params)
        return obs, next_obs, next_state

    ours, theirs = jax.jit(lambda: run(probe))(), jax.jit(lambda: run(env))()
    for mine, env_obs in zip(ours[:2], theirs[:2], strict=True):
        mine, env_obs = np.asarray(mine), np.asarray(env_obs)
        np.testing.assert_allclose(mine[:, ~SUGGESTED], env_obs[:, ~SUGGESTED], rtol=1e-6, atol=1e-6)
        assert not mine[:, SUGGESTED].any()
        np.testing.assert_array_equal(env_obs[:, SUGGESTED].sum(axis=1), 1.0)
    for mine, env_leaf in zip(jax.tree.leaves(ours[2]), jax.tree.leaves(theirs[2]), strict=True):
        np.testing.assert_allclose(np.asarray(mine), np.asarray(env_leaf), rtol=1e-6)


def test_paper_features_at_full_width_pad_the_paper_features() -> None:
    """The full-width probe has the observation's size: the paper's features, then their mean."""
    env = JobAllocationEnv()
    params = env.default_params
    _, state = env.reset(jax.random.key(0), params)
    paper = np.asarray(paper_features(state, params))
    wide = np.asarray(paper_features_full_width(state, params))
    assert wide.shape == (NUM_FEATURES,)
    np.testing.assert_array_equal(wide[: paper.size], paper)
    np.testing.assert_allclose(wide[paper.size :], paper.mean(), rtol=1e-6)

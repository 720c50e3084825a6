"""``benchmarks/step_breakdown.py``'s probes change only what they say they leave out."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks.step_breakdown import (
    RankedWithBatch,
    WithoutRankingBatch,
    most_slas_only,
    paper_features_full_width,
)
from slamorl_jax.env import JobAllocationEnv
from slamorl_jax.env.observation import FEATURE_NAMES, NUM_FEATURES, paper_features

SUGGESTED = np.array([name.endswith("_suggested") for name in FEATURE_NAMES])


@functools.cache
def reset_and_step(probe: str) -> tuple:
    """Reset and one ``step_batch`` of four jobs by the env (``probe="env"``) or one of the
    benchmark's ranking probes: ``(observations at reset, after the step, the stepped states)``."""
    env = JobAllocationEnv()
    params = env.default_params
    stepper = {
        "env": env,
        "unranked": WithoutRankingBatch(env),
        "one-pass": RankedWithBatch(env, most_slas_only),
    }[probe]
    keys = jax.random.split(jax.random.key(3), 4)
    actions = jnp.array([0, 4, 9, 30], jnp.int32)

    def run() -> tuple:
        obs, state = jax.vmap(stepper.reset, in_axes=(0, None))(keys, params)
        next_obs, next_state, *_ = stepper.step_batch(keys, state, actions, params)
        return obs, next_obs, next_state

    return jax.device_get(jax.jit(run)())


@pytest.mark.slow  # a benchmark's probe (6 s): in the slow run (pytest -m slow)
def test_unranked_step_batch_differs_from_the_env_only_in_the_suggested_flags() -> None:
    """The probe's observations are the env's with every ``*_suggested`` feature 0 (the env flags
    exactly one candidate per job), and the same states (to float32 rounding: the two programs fuse
    differently)."""
    ours, theirs = reset_and_step("unranked"), reset_and_step("env")
    for mine, env_obs in zip(ours[:2], theirs[:2], strict=True):
        mine, env_obs = np.asarray(mine), np.asarray(env_obs)
        np.testing.assert_allclose(mine[:, ~SUGGESTED], env_obs[:, ~SUGGESTED], rtol=1e-6, atol=1e-6)
        assert not mine[:, SUGGESTED].any()
        np.testing.assert_array_equal(env_obs[:, SUGGESTED].sum(axis=1), 1.0)
    for mine, env_leaf in zip(jax.tree.leaves(ours[2]), jax.tree.leaves(theirs[2]), strict=True):
        np.testing.assert_allclose(np.asarray(mine), np.asarray(env_leaf), rtol=1e-6)


@pytest.mark.slow  # a benchmark's probe (6 s): in the slow run (pytest -m slow)
def test_one_pass_ranking_flags_the_candidates_at_the_most_slas() -> None:
    """The cheapest ranking flags the env's own choice among the candidates at the most SLAs (keep
    only where it meets more SLAs than every target, so where the env keeps on a tie it flags the
    tied targets instead), and nothing else of the observation changes."""
    ours, theirs = reset_and_step("one-pass"), reset_and_step("env")
    targets_suggested = np.array([n.startswith("target") and n.endswith("_suggested") for n in FEATURE_NAMES])
    keep_suggested = FEATURE_NAMES.index("keep_suggested")
    for mine, env_obs in zip(ours[:2], theirs[:2], strict=True):
        mine, env_obs = np.asarray(mine), np.asarray(env_obs)
        np.testing.assert_allclose(mine[:, ~SUGGESTED], env_obs[:, ~SUGGESTED], rtol=1e-6, atol=1e-6)
        chosen_target = env_obs[:, targets_suggested] > 0
        assert np.all(mine[:, targets_suggested][chosen_target] == 1.0)
        keeps = env_obs[:, keep_suggested] == 1.0
        flagged = mine[:, keep_suggested] + mine[:, targets_suggested].sum(axis=1)
        assert np.all(flagged[keeps] >= 1.0) and np.all(mine[~keeps, keep_suggested] == 0.0)
        assert np.all((mine[:, keep_suggested] == 0.0) | (mine[:, targets_suggested].sum(axis=1) == 0.0))
        assert np.all(mine[:, targets_suggested].sum(axis=1) < chosen_target.shape[1])  # not every target


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

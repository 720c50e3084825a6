"""``step_batch`` (``env/batched_step.py``) is ``vmap(env.step)``: the same next jobs, episode ends,
observations, rewards and ``info``, on steps with fewer finished jobs than reset slots (one round of
resets), with more (several rounds), by either reset (``RESET_BY``) and with a slot for every env
(no loop); the scalar-reward wrapper scalarises each env's reward; the trainer steps its envs with
it; a batch split over devices runs it on each device's share."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gymnax.wrappers.purerl import LogWrapper

from slamorl_jax.agent.trainer import make_train
from slamorl_jax.env import JobAllocationEnv, ScalarRewardWrapper
from slamorl_jax.env import draws as d
from slamorl_jax.env.batched_step import (
    RESET_BY,
    default_reset_slots,
    has_step_batch,
    reset_draws,
)
from tests.learner_fixtures import TINY, env_params_for
from tests.test_env_api import assert_trees_close, with_epochs
from tests.test_sharding import REPO_ROOT, TIMEOUT_S, worker_env

NUM_ENVS = 24
RESET_SLOTS = 8
STEPS = 12


@functools.cache
def vmapped_step(env: Any) -> Callable:
    """Jitted ``vmap(env.step)``, one per env for the module."""
    return jax.jit(jax.vmap(env.step, in_axes=(0, 0, 0, None)))


@functools.cache
def step_pair(env: Any, reset_slots: int, reset_by: str) -> tuple[Callable, Callable]:
    """Jitted ``vmap(env.step)`` and ``env.step_batch`` with ``reset_slots`` and ``reset_by``, one
    pair per env and settings for the module (so each is traced once)."""
    by_vmap = vmapped_step(env)
    batched = jax.jit(lambda k, s, a, p: env.step_batch(k, s, a, p, reset_slots, reset_by))
    return by_vmap, batched


def compare_steps(
    env: Any, params: Any, reset_slots: int, seed: int = 0, steps: int = STEPS, reset_by: str = "scatter"
) -> list[int]:
    """Step ``NUM_ENVS`` jobs ``steps`` times by ``vmap(step)``, checking ``step_batch`` from the same
    state, key and action at every step; the number of finished jobs per step."""
    by_vmap, batched = step_pair(env, reset_slots, reset_by)
    key = jax.random.key(seed)
    _, state = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(jax.random.split(key, NUM_ENVS), params)
    finished = []
    for step_key in jax.random.split(key, steps):
        action_key, env_key = jax.random.split(step_key)
        actions = jax.random.randint(action_key, (NUM_ENVS,), 0, env.num_actions)
        keys = jax.random.split(env_key, NUM_ENVS)
        expected = by_vmap(keys, state, actions, params)
        assert_trees_close(batched(keys, state, actions, params), expected)
        finished.append(int(jnp.sum(expected[3] | expected[4])))
        state = expected[1]
    return finished


@pytest.fixture(scope="module")
def short_jobs(env: JobAllocationEnv) -> Any:
    """The default params with 1-4 epoch jobs, so many end on every step."""
    return with_epochs(env.default_params, 1, 4)


@pytest.mark.parametrize("reset_by", RESET_BY)
def test_step_batch_equals_vmapped_step_in_one_round_and_in_several(
    env: JobAllocationEnv, short_jobs: Any, reset_by: str
) -> None:
    finished = compare_steps(env, short_jobs, RESET_SLOTS, reset_by=reset_by)
    # The steps exercised both branches.
    assert any(0 < n <= RESET_SLOTS for n in finished), finished
    assert any(n > RESET_SLOTS for n in finished), finished


def test_scalar_reward_wrapper_scalarises_each_env(env: JobAllocationEnv, short_jobs: Any) -> None:
    wrapped = ScalarRewardWrapper(env, "balanced")
    key = jax.random.key(2)
    _, state = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(jax.random.split(key, NUM_ENVS), short_jobs)
    actions = jnp.zeros((NUM_ENVS,), jnp.int32)
    keys = jax.random.split(key, NUM_ENVS)
    _, batched = step_pair(env, RESET_SLOTS, "scatter")  # the step the [scatter] comparison traced
    obs, _, vector, *_ = batched(keys, state, actions, short_jobs)
    step = jax.jit(lambda k, s, a, p: wrapped.step_batch(k, s, a, p, RESET_SLOTS))
    scalar_obs, _, reward, *_, info = step(keys, state, actions, short_jobs)
    assert reward.shape == (NUM_ENVS,)
    np.testing.assert_allclose(reward, vector @ wrapped.weights, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(info["vector_reward"], vector, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(scalar_obs, obs, rtol=1e-5, atol=1e-6)
    # reset_by reaches the wrapped env's step_batch (the same jobs by either reset).
    by_select = jax.jit(lambda k, s, a, p: wrapped.step_batch(k, s, a, p, RESET_SLOTS, reset_by="select"))
    np.testing.assert_allclose(by_select(keys, state, actions, short_jobs)[2], reward, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="reset_by"):
        wrapped.step_batch(keys, state, actions, short_jobs, RESET_SLOTS, reset_by="sideways")
    # Over an env whose class has no step_batch, the wrapper vmaps that env's step.
    over_step_only = ScalarRewardWrapper(StepOnly(env), "balanced")
    _, _, reward_by_vmap, *_ = jax.jit(over_step_only.step_batch)(keys, state, actions, short_jobs)
    np.testing.assert_allclose(reward_by_vmap, reward, rtol=1e-5, atol=1e-6)


class StepOnly:
    """An env with a per-env ``step`` and no ``step_batch``."""

    def __init__(self, env: JobAllocationEnv) -> None:
        self.env = env

    def step(self, *args: Any) -> tuple:
        """The env's step."""
        return self.env.step(*args)


def test_a_slot_for_every_env(env: JobAllocationEnv, short_jobs: Any) -> None:
    # As many slots as envs (num_envs=1 is such a batch): every env's reset selected, no loop.
    finished = compare_steps(env, short_jobs, NUM_ENVS, steps=4)
    assert max(finished) > 0, finished


def test_default_reset_slots_and_bad_slots(env: JobAllocationEnv) -> None:
    assert [default_reset_slots(n) for n in (1, 16, 17, 4096)] == [1, 1, 2, 256]
    keys = jax.random.split(jax.random.key(0), 2)
    state = jax.eval_shape(jax.vmap(env.reset, in_axes=(0, None)), keys, env.default_params)[1]
    with pytest.raises(ValueError, match="reset_slots must be >= 1"):
        env.step_batch(keys, state, jnp.zeros((2,), jnp.int32), reset_slots=0)
    with pytest.raises(ValueError, match="reset_by must be one of scatter, select, got 'gather'"):
        env.step_batch(keys, state, jnp.zeros((2,), jnp.int32), reset_by="gather")


def test_only_an_env_class_of_its_own_offers_step_batch(env: JobAllocationEnv) -> None:
    # gymnax's wrappers forward unknown attributes to the wrapped env: its step_batch would skip the
    # wrapper's step, so the trainer must vmap the wrapper's step instead.
    wrapped = LogWrapper(env)
    assert hasattr(wrapped, "step_batch") and not has_step_batch(wrapped)
    assert has_step_batch(env) and has_step_batch(ScalarRewardWrapper(env, "cost"))


def test_trainer_steps_with_step_batch(env: JobAllocationEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    original = JobAllocationEnv.step_batch

    def counted(self: JobAllocationEnv, keys: jax.Array, *args: Any, **kwargs: Any) -> Any:
        calls.append(keys.shape[0])
        return original(self, keys, *args, **kwargs)

    monkeypatch.setattr(JobAllocationEnv, "step_batch", counted)
    trainer = make_train(TINY, env)
    env_params = env_params_for(TINY)
    state = jax.eval_shape(trainer.init, jax.random.key(0), env_params)
    jax.eval_shape(trainer._rollout, state, env_params)
    assert calls == [TINY.num_envs]


# slow: a subprocess on 4 fake devices (about 14 s). The default suite's sharded check is
# test_sharding.py's 8-device training, which steps through the same shard_map but rarely ends more
# jobs on one device than its reset slot; the rounds that follow are checked on one device above
# (test_step_batch_equals_vmapped_step_in_one_round_and_in_several).
@pytest.mark.slow
def test_a_batch_split_over_devices_steps_each_share_with_step_batch() -> None:
    """On 4 fake devices ``step_envs`` with the mesh runs ``step_batch`` per device under
    ``shard_map`` and gives the single-device step's outputs, including on steps where one device's
    share ended more jobs than its reset slot (``sharded_step_worker.py``)."""
    result = subprocess.run(
        [sys.executable, str(Path(__file__).resolve().parent / "sharded_step_worker.py")],
        cwd=REPO_ROOT,
        env=worker_env(4),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads(result.stdout.strip().splitlines()[-1])
    assert record["devices"] == 4 and record["shard_map"]
    assert record["most_ended_on_one_device"] > 1  # 8 envs a device, one reset slot each


def test_reset_draws_are_the_slots_after_the_step_draws() -> None:
    """``reset_draws`` hashes only the reset slots of each key, and gets exactly the values
    ``env.step`` draws for its auto-reset (the slots after its ``STEP_DRAWS``)."""
    keys = jax.random.split(jax.random.key(11), 16)
    every_slot = jax.vmap(lambda key: jnp.stack(d.uniforms(key, d.STEP_DRAWS + d.RESET_DRAWS)))(keys)
    np.testing.assert_array_equal(np.asarray(reset_draws(keys)), np.asarray(every_slot[:, d.STEP_DRAWS :]))


def test_step_batch_takes_raw_uint32_keys_as_env_step_does() -> None:
    """``jax.random.split(jax.random.PRNGKey(0), 4)`` (shape (4, 2)) is one raw key per env, as
    ``env.step`` and ``reset`` take them (the key checks are static: traced, not compiled, here)."""
    env = JobAllocationEnv()
    params = env.default_params
    raw = jax.random.split(jax.random.PRNGKey(0), 4)
    _, states = jax.eval_shape(jax.vmap(env.reset, (0, None)), raw, params)
    actions = jnp.arange(4, dtype=jnp.int32)
    from_raw = jax.eval_shape(env.step_batch, raw, states, actions, params)
    from_typed = jax.eval_shape(env.step_batch, jax.random.wrap_key_data(raw), states, actions, params)
    assert jax.tree.map(lambda x: (x.shape, x.dtype), from_raw[:5]) == jax.tree.map(
        lambda x: (x.shape, x.dtype), from_typed[:5]
    )

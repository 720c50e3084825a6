"""The branch-free variants that the GPU benchmarks time (``--also-branch-free``) compute what the
defaults compute: new jobs built without the ``lax.cond`` on the start strategy
(``JobAllocationEnv.branch_on_init_strategy``) are the same jobs, and a trainer that values
truncated jobs at every step (``Trainer.branch_on_truncation``) trains to the same parameters."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from learner_fixtures import TINY, Compiled, shared_trainer, trees_equal

from slamorl_jax.agent.trainer import make_train
from slamorl_jax.env import INIT_STRATEGIES, JobAllocationEnv
from slamorl_jax.env import draws as d
from tests.test_env_api import assert_trees_close


@functools.cache
def build_jobs(branch: bool) -> Callable:
    """Jitted batched ``reset_from_draws`` of an env with or without the branch (one compilation
    each for the module: the start strategy is a traced param)."""
    env = JobAllocationEnv(branch_on_init_strategy=branch)
    return jax.jit(jax.vmap(env.reset_from_draws, in_axes=(0, None)))


@pytest.mark.parametrize("strategy", ["cold", "requested", "random", "mixed"])
def test_jobs_built_without_the_branch_are_the_same_jobs(strategy: str) -> None:
    params = JobAllocationEnv().default_params
    params = params.replace(init_strategy=jnp.int32(INIT_STRATEGIES.index(strategy)))
    keys = jax.random.split(jax.random.key(3), 64)
    draws = jax.vmap(lambda key: jnp.stack(d.uniforms(key, d.RESET_DRAWS)))(keys)
    expected = build_jobs(True)(draws, params)
    assert_trees_close(build_jobs(False)(draws, params), expected)
    # Each strategy's own starts, so the variants were compared on starts from the table and the model.
    gpus = np.asarray(expected.gpus)
    if strategy == "cold":
        assert np.all(gpus == 1)
    elif strategy == "requested":
        np.testing.assert_array_equal(gpus, np.asarray(expected.job.requested_gpus))
    else:
        assert np.unique(gpus).size > 1


# slow: a second compilation of TINY's update (run with -m slow)
@pytest.mark.slow
def test_a_trainer_that_values_truncated_jobs_at_every_step_trains_the_same() -> None:
    compiled: Compiled = shared_trainer(TINY)
    # A step limit of 3 truncates most jobs, so the values of their last observations are read.
    params = compiled.env_params.replace(max_steps_in_episode=jnp.int32(3))
    branch_free = dataclasses.replace(make_train(TINY), branch_on_truncation=False)
    state = compiled.fresh()
    expected, metrics = jax.jit(compiled.trainer.update_chunk)(state, params)
    got, _ = jax.jit(branch_free.update_chunk)(state, params)
    assert float(metrics["episodes"]) > 0
    # The same values where they are read, to float32 rounding (XLA fuses the value network's pass
    # differently inside and outside the branch).
    assert_trees_close(got.params, expected.params)
    assert not trees_equal(got.params, compiled.fresh().params)  # it trained

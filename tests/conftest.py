"""Shared test configuration: JAX's persistent compilation cache, hypothesis profiles, the env and a
batched rollout compiled once per session."""

from __future__ import annotations

import gc
import importlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

# The suite compiles far more than it runs (most programs take a few steps of tens of envs), so its
# programs are built with LLVM at -O0 and XLA:CPU's older loop emitters (``FAST_COMPILE_FLAGS``):
# the suite takes 0.65x the time (BUILD.md, "Tests"; one program's compile and run:
# benchmarks/compile_flags.py). Set before JAX starts its backend and inherited by the suite's
# subprocesses (under pytest-xdist, set once by the controller: its workers inherit it). An
# ``XLA_FLAGS`` that already picks an LLVM level is kept as it is; a jaxlib that no longer knows the
# emitters flag gets -O0 alone.
from slamorl_jax.xla_flags import (
    FAST_COMPILE_FLAGS,
    LLVM_LEVEL_FLAG,
    with_xla_flags,
    xla_accepts,
)

if LLVM_LEVEL_FLAG not in os.environ.get("XLA_FLAGS", ""):
    test_flags = FAST_COMPILE_FLAGS if xla_accepts(FAST_COMPILE_FLAGS) else {LLVM_LEVEL_FLAG: 0}
    os.environ["XLA_FLAGS"] = with_xla_flags(test_flags)["XLA_FLAGS"]
# Whether this process's backend had started before the flags were in place (XLA reads them once,
# when it starts; tests/test_xla_flags.py): a flag set after it is in the environment and changes
# nothing. Kept in the environment, which is all a module may set before its imports.
os.environ["SLAMORL_JAX_TEST_BACKEND_STARTED_FIRST"] = str(
    int("jax" in sys.modules and importlib.import_module("jax._src.xla_bridge").backends_are_initialized())
)

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, settings

from slamorl_jax.env import EnvParams, EnvState, JobAllocationEnv, load_catalog

CACHE_DIR = Path(
    os.environ.get("SLAMORL_JAX_TEST_CACHE", Path(__file__).resolve().parent.parent / ".jax_cache")
)
# The package's commands default to JAX's cache variable (``compilation_cache.DEFAULT_CACHE_DIR``): a
# command the tests run, in this process or another, shares the suite's cache instead of the user's.
# (Named here, not as compilation_cache.JAX_CACHE_VARIABLE: that module reads it when imported.)
os.environ["JAX_COMPILATION_CACHE_DIR"] = str(CACHE_DIR)
jax.config.update("jax_compilation_cache_dir", str(CACHE_DIR))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)

settings.register_profile(
    "default",
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("thorough", max_examples=300, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


# The settings a command run in this process (``train``, ``recommend``, ``imitate``, ...) may change
# when it turns on its own cache (``slamorl_jax.compilation_cache``).
CACHE_SETTINGS = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs")


@pytest.fixture(autouse=True)
def suite_cache_settings() -> Iterator[None]:
    """The suite's compilation-cache settings, put back after every test (a command run in this
    process sets its own: ``imitate`` and ``history build`` cache only programs over a second)."""
    settings = {name: getattr(jax.config, name) for name in CACHE_SETTINGS}
    yield
    for name, value in settings.items():
        if getattr(jax.config, name) != value:
            jax.config.update(name, value)


@pytest.fixture(scope="session")
def env() -> JobAllocationEnv:
    """The environment on the shipped calibrated catalogue."""
    return JobAllocationEnv(load_catalog())


# Outputs of ``batched_rollout`` per step (leading axes: step, env); see the fixture.
ROLLOUT_ENVS = 32
ROLLOUT_STEPS = 40


@pytest.fixture(scope="session")
def batched_rollout(env: JobAllocationEnv) -> Callable[..., dict[str, np.ndarray]]:
    """``batched_rollout(seed, params, logits)``: ``ROLLOUT_ENVS`` envs of the default action set for
    ``ROLLOUT_STEPS`` steps, actions drawn from ``logits`` (one per action); host arrays.

    Compiled once per session and shared by the test modules that need a batched rollout (params
    and logits are traced, so only their values change). Per step it returns the observation, the
    pre-reset ``final_observation``, reward, flags, the job-level SLA checks and severities of the
    advanced job, its allocation, elapsed time, cost and epochs after the step, its episode figures,
    dual multipliers and weights after the epoch (and those the step used), and, from the state the
    action was taken in, its epoch, elapsed time, cost, hidden deviation, online model posterior
    (``mu_before``), dual multipliers, preference, scenario kind and allocation; and the first
    observation, allocation and epochs of each env (``obs0``, ``gpus0``, ``cpus0``, ``epochs0``).
    """
    from slamorl_jax.env.online_model import posterior_deviation

    def run(key: jax.Array, params: EnvParams, logits: jax.Array) -> dict[str, Any]:
        reset_key, steps_key = jax.random.split(key)
        obs0, state0 = jax.vmap(env.reset, in_axes=(0, None))(
            jax.random.split(reset_key, ROLLOUT_ENVS), params
        )

        def body(state: EnvState, key: jax.Array) -> tuple[EnvState, dict[str, Any]]:
            action_key, step_key = jax.random.split(key)
            actions = jax.random.categorical(action_key, logits, shape=(ROLLOUT_ENVS,)).astype(jnp.int32)
            step = jax.vmap(env.step, in_axes=(0, 0, 0, None))
            obs, next_state, reward, terminated, truncated, info = step(
                jax.random.split(step_key, ROLLOUT_ENVS), state, actions, params
            )
            out = {
                "action": actions,
                "obs": obs,
                "reward": reward,
                "terminated": terminated,
                "truncated": truncated,
                "gpus": next_state.gpus,
                "cpus": next_state.cpus,
                "elapsed_before": state.elapsed_s,
                "cost_before": state.cost_usd,
                "elapsed_after": next_state.elapsed_s,
                "cost_after": next_state.cost_usd,
                "epochs_running": next_state.job.epochs,
                "epoch_before": state.epoch,
                "gpus_before": state.gpus,
                "cpus_before": state.cpus,
                "deviation": state.job.deviation,
                "mu_before": jnp.stack(posterior_deviation(state.model_stats, params), axis=-1),
                "multipliers_before": state.multipliers,
                "multipliers_after": info["final_state"].multipliers,
                "final_weights": info["final_weights"],
                "preference": state.job.preference,
                "kind": state.job.scenario,
                **{
                    k: info[k]
                    for k in (
                        "weights",
                        "step_weights",
                        "episode_time_s",
                        "episode_cost_usd",
                        "final_observation",
                        "severities",
                        "job_sla_met",
                        "all_slas_met",
                        "epochs",
                        "reallocated",
                    )
                },
            }
            return next_state, out

        _, trajectory = jax.lax.scan(body, state0, jax.random.split(steps_key, ROLLOUT_STEPS))
        initial = {"gpus0": state0.gpus, "cpus0": state0.cpus, "epochs0": state0.job.epochs}
        return {"obs0": obs0, **initial, **trajectory}

    compiled = jax.jit(run)

    def call(seed: int, params: EnvParams, logits: Any) -> dict[str, np.ndarray]:
        out = compiled(jax.random.key(seed), params, jnp.asarray(np.asarray(logits, np.float32)))
        return {k: np.asarray(v) for k, v in jax.device_get(out).items()}

    return call


# The modules that take longest on a cold cache, longest first (``--durations=0`` on 2026-12-06,
# seconds of test time each: train_cli 67, evaluation 47, sharding about 46, trainer 43,
# custom_catalog 32, env_api 28, checkpoint 27, shifts 26, ...).
# pytest-xdist's ``loadscope`` hands whole modules to its workers in collection order, so starting
# the long ones first keeps one worker from running a long module alone at the end.
LONGEST_MODULES_FIRST = (
    "test_train_cli",
    "test_evaluation",
    "test_sharding",
    "test_trainer",
    "test_custom_catalog",
    "test_env_api",
    "test_checkpoint",
    "test_shifts",
    "test_batched_step",
    "test_env_actions",
    "test_live",
    "test_gym_envs",
    "test_fuzz_inputs",
    "test_env_truth",
    "test_shipped_policy",
    "test_reachable",
    "test_python_job",
    "test_probes",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the modules of ``LONGEST_MODULES_FIRST`` first, in that order; the others keep theirs,
    and so does every module's own test order."""
    rank = {name: i for i, name in enumerate(LONGEST_MODULES_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.stem, len(rank)))


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Collect the session's garbage once, then freeze what is left out of later collections.

    pytest collects five times more at its clean-up (to report unraisable exceptions). A worker's
    heap at the end of the suite (compiled programs, traces: over a million objects) takes about
    half a second a collection on the 2-core machine, more on a busy one; pytest-xdist's transport
    (execnet) sends a worker SIGINT when it has not stopped five seconds after being told to, and
    the interrupt then surfaced as an unraisable ``KeyboardInterrupt`` in hypothesis's gc callback.
    This collection still runs under pytest's unraisable-exception hook."""
    gc.collect()
    gc.freeze()

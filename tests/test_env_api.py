"""The environment's functional API: single compilation, jit/vmap equivalence, determinism, auto-reset,
terminated vs truncated, dtype stability under x64, spaces, ``make`` and the ``info`` contract."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slamorl_jax.env import (
    ACTION_SETS,
    DEFAULT_ACTION_SET,
    FEATURE_NAMES,
    NUM_ACTIONS,
    NUM_FEATURES,
    NUM_PAPER_FEATURES,
    PREFERENCES,
    SCENARIOS,
    EnvParams,
    EnvState,
    JobAllocationEnv,
    default_params,
    make,
    num_actions,
    observe,
    validate_params,
    with_derived_tables,
    with_scenario,
)
from slamorl_jax.env import draws as d
from slamorl_jax.env.action_sets import NUM_TARGETS, RELOCATE_ACTION
from slamorl_jax.env.forecast import NUM_FORECAST_FEATURES
from slamorl_jax.env.params import with_values
from slamorl_jax.env.prices import with_prices
from slamorl_jax.env.scenarios import KIND_PREFERENCES, SCENARIO_KINDS

REPO_ROOT = Path(__file__).resolve().parent.parent
ROLLOUT_STEPS = 24
DEFAULT_NUM_ACTIONS = num_actions(DEFAULT_ACTION_SET)  # ``targets_relocate``: moves, targets, relocate
PROGRESS = FEATURE_NAMES.index("progress")
# On a step without a reset the returned and the final observation observe the same state, but ``step``
# computes them in two separate ``observe`` calls: XLA may fuse, and so round, the two differently,
# so a feature can differ by an ulp (seen: ``keep_cost``, 6e-8). They used to be one selected array.
SAME_STATE_OBS_RTOL = 1e-6

# The ``info`` keys the module docstring of ``job_env`` documents, with the shape of one entry.
DOCUMENTED_INFO_SHAPES: dict[str, tuple[int, ...]] = {
    "weights": (3,),
    "step_weights": (3,),
    "final_weights": (3,),
    "severities": (6,),
    "sla_met": (6,),
    "reallocated": (),
    "projected_remaining_time_s": (),
    "projected_remaining_cost_usd": (),
    "episode_time_s": (),
    "episode_cost_usd": (),
    "time_ref_s": (),
    "cost_ref_usd": (),
    "deadline_met": (),
    "budget_met": (),
    "job_sla_met": (6,),
    "all_slas_met": (),
    "sla_compliance": (),
    "mean_severity": (),
    "mean_gpu_util": (),
    "mean_cpu_util": (),
    "reallocations": (),
    "epochs": (),
    "workload": (),
    "gpu_type": (),
    "scenario": (),
    "preference": (3,),
    "terminated": (),
    "truncated": (),
    "final_observation": (NUM_FEATURES,),
}
BOOL_INFO = (
    "sla_met",
    "reallocated",
    "deadline_met",
    "budget_met",
    "job_sla_met",
    "all_slas_met",
    "terminated",
    "truncated",
)

# Prints the dtype of every leaf of one reset and one step; run in a subprocess with and without x64.
DTYPE_SCRIPT = """
import json
import jax
import jax.numpy as jnp
from slamorl_jax.env import make

env, params = make()
obs, state = jax.jit(env.reset)(jax.random.key(0), params)
out = jax.jit(env.step)(jax.random.key(1), state, jnp.int32(8), params)
leaves = jax.tree_util.tree_flatten_with_path({"reset": (obs, state), "step": out})[0]
print(json.dumps({
    "x64": bool(jax.config.jax_enable_x64),
    "dtypes": {jax.tree_util.keystr(path): str(leaf.dtype) for path, leaf in leaves},
}))
"""


def with_epochs(params: EnvParams, low: int, high: int) -> EnvParams:
    """Every workload's epochs drawn from ``[low, high]`` (short episodes for fast tests)."""
    count = params.workloads.epochs_min.shape
    workloads = with_values(params.workloads, epochs_min=np.full(count, low), epochs_max=np.full(count, high))
    return validate_params(with_derived_tables(params.replace(workloads=workloads)))


def assert_trees_close(a: Any, b: Any, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """Same structure; integer and bool leaves equal, float leaves close."""
    chex.assert_trees_all_equal_structs(a, b)
    for path, x, y in zip(
        [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(a)[0]],
        jax.tree.leaves(a),
        jax.tree.leaves(b),
        strict=True,
    ):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype, path
        if np.issubdtype(x.dtype, np.floating):
            np.testing.assert_allclose(x, y, rtol=rtol, atol=atol, err_msg=path)
        else:
            np.testing.assert_array_equal(x, y, err_msg=path)


def episode_segments(done: np.ndarray) -> list[tuple[int, int]]:
    """(start, end) step indices (end inclusive) of each finished episode of one env's trajectory."""
    segments, start = [], 0
    for t in np.flatnonzero(done):
        segments.append((start, int(t)))
        start = int(t) + 1
    return segments


# --- fixtures: one environment, one compilation of each function per module --------------------


@pytest.fixture(scope="module")
def params(env: JobAllocationEnv) -> EnvParams:
    """Default params (``mixed`` scenario, cold start)."""
    return validate_params(env.default_params)


@pytest.fixture(scope="module")
def jitted(env: JobAllocationEnv) -> tuple[Callable, Callable]:
    """``jit(reset)`` and ``jit(step)`` that fail if traced more than once in this module."""
    chex.clear_trace_counter()
    return (
        jax.jit(chex.assert_max_traces(env.reset, n=1)),
        jax.jit(chex.assert_max_traces(env.step, n=1)),
    )


@pytest.fixture(scope="module")
def param_variants(params: EnvParams) -> list[EnvParams]:
    """Params that differ in values only: scenario, adaptation, cluster links, CPU step, init."""
    variants = [
        params,
        with_scenario(params, "deadline-critical"),
        with_values(params, adapt_strength=0.0),
        with_derived_tables(with_values(params, intra_node_gbps=2400.0, inter_node_gbps=400.0)),
        with_scenario(
            with_derived_tables(with_values(params, adapt_strength=6.0, cpu_step=2, init_strategy=1)),
            "budget-constrained",
        ),
    ]
    return [validate_params(p) for p in variants]


@pytest.fixture(scope="module")
def rollout(env: JobAllocationEnv, jitted: tuple[Callable, Callable]) -> Callable:
    """jit of: reset, then ``len(actions)`` steps under ``lax.scan``; returns obs0, state0, trajectory.

    Traced once for the whole module (every params value below shares the compilation); it depends
    on ``jitted`` only so that the trace counters are cleared before it is first traced.
    """

    def run(key: jax.Array, params: EnvParams, actions: jax.Array) -> tuple[jax.Array, EnvState, dict]:
        reset_key, steps_key = jax.random.split(key)
        obs0, state0 = env.reset(reset_key, params)

        def body(carry: tuple[jax.Array, EnvState], inputs: tuple) -> tuple[tuple, dict]:
            _, state = carry
            step_key, action = inputs
            obs, next_state, reward, terminated, truncated, info = env.step(step_key, state, action, params)
            out = {
                "obs": obs,
                "state": next_state,
                "prev_state": state,
                "reward": reward,
                "terminated": terminated,
                "truncated": truncated,
                "info": info,
            }
            return (obs, next_state), out

        keys = jax.random.split(steps_key, actions.shape[0])
        _, trajectory = jax.lax.scan(body, (obs0, state0), (keys, actions))
        return obs0, state0, trajectory

    return jax.jit(chex.assert_max_traces(run, n=1))


def random_actions(seed: int, steps: int = ROLLOUT_STEPS) -> jax.Array:
    """Uniform random int32 actions of the default (``targets``) set."""
    return jax.random.randint(jax.random.key(seed), (steps,), 0, DEFAULT_NUM_ACTIONS, dtype=jnp.int32)


# --- compilation ------------------------------------------------------------------------------


def test_reset_and_step_trace_once_across_params_and_keys(
    jitted: tuple[Callable, Callable], param_variants: list[EnvParams]
) -> None:
    """One compilation of reset and of step serves every key and params value."""
    reset, step = jitted
    for i, p in enumerate(param_variants):
        obs, state = reset(jax.random.key(i), p)
        for t in range(3):
            action = jnp.int32((7 * i + 5 * t) % DEFAULT_NUM_ACTIONS)
            obs, state, *_ = step(jax.random.key(100 * i + t), state, action, p)
        assert np.all(np.isfinite(np.asarray(obs)))
    # Other keys, actions and params values must not retrace either.
    _, state = reset(jax.random.key(123), param_variants[0])
    step(jax.random.key(7), state, jnp.int32(0), param_variants[-1])


def test_default_params_and_their_refreshes_share_one_compiled_derivation() -> None:
    """``default_params`` gives ``job_rows`` its final shape before deriving the tables, so refreshing
    them (``with_prices``, as every command's ``env_params_from_config`` does) reuses the program
    instead of compiling a second one (about a second of every command's start)."""
    params = default_params()
    programs = with_derived_tables._cache_size()
    with_prices(params, "reference-code")
    with_derived_tables(with_values(params, adapt_strength=2.0))
    assert with_derived_tables._cache_size() == programs


# --- jit, determinism ----------------------------------------------------------------------------


def test_jitted_equals_unjitted(jitted: tuple[Callable, Callable], param_variants: list[EnvParams]) -> None:
    """Reset and steps agree with and without jit."""
    reset, step = jitted
    p = param_variants[3]
    key = jax.random.key(3)
    results_jit, results_eager = [], []
    for results, disable in ((results_jit, False), (results_eager, True)):
        with jax.disable_jit(disable):
            obs, state = reset(key, p)
            results.append((obs, state))
            for t, action in enumerate((8, 4, 0)):
                out = step(jax.random.fold_in(key, t), state, jnp.int32(action), p)
                results.append(out)
                state = out[1]
    assert_trees_close(results_jit, results_eager, rtol=1e-4, atol=1e-5)


def test_same_key_same_trajectory_different_keys_differ(rollout: Callable, params: EnvParams) -> None:
    """Rollouts are a pure function of the key."""
    actions = random_actions(0)
    first = rollout(jax.random.key(1), params, actions)
    again = rollout(jax.random.key(1), params, actions)
    chex.assert_trees_all_equal(first, again)
    other = rollout(jax.random.key(2), params, actions)
    assert not np.array_equal(np.asarray(first[2]["obs"]), np.asarray(other[2]["obs"]))
    assert not np.array_equal(np.asarray(first[2]["reward"]), np.asarray(other[2]["reward"]))


# --- vmap ---------------------------------------------------------------------------------------


def reset_then_step(env: JobAllocationEnv) -> Callable:
    """A function of (key, params, action): reset with one half of the key, step with the other."""

    def run(key: jax.Array, params: EnvParams, action: jax.Array) -> tuple:
        reset_key, step_key = jax.random.split(key)
        obs0, state0 = env.reset(reset_key, params)
        return (obs0, state0), env.step(step_key, state0, action, params)

    return run


def per_element(
    jitted: tuple[Callable, Callable], key: jax.Array, params: EnvParams, action: jax.Array
) -> tuple:
    """``reset_then_step`` for one element, through the module's single-env jitted functions."""
    reset, step = jitted
    reset_key, step_key = jax.random.split(key)
    obs0, state0 = reset(reset_key, params)
    return (obs0, state0), step(step_key, state0, action, params)


def test_vmap_over_keys_equals_per_element_calls(
    env: JobAllocationEnv, params: EnvParams, jitted: tuple[Callable, Callable]
) -> None:
    """vmap over keys with shared params equals single-env calls."""
    keys = jax.random.split(jax.random.key(11), 4)
    actions = jnp.asarray([0, 4, 8, 2], dtype=jnp.int32)
    batched = jax.jit(jax.vmap(reset_then_step(env), in_axes=(0, None, 0)))(keys, params, actions)
    for i in range(keys.shape[0]):
        single = per_element(jitted, keys[i], params, actions[i])
        assert_trees_close(jax.tree.map(lambda x, i=i: x[i], batched), single)


def test_vmap_over_params_equals_per_element_calls(
    env: JobAllocationEnv, param_variants: list[EnvParams], jitted: tuple[Callable, Callable]
) -> None:
    """vmap over stacked EnvParams equals single-env calls with each params."""
    stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *param_variants)
    n = len(param_variants)
    keys = jax.random.split(jax.random.key(12), n)
    actions = jnp.arange(n, dtype=jnp.int32) * 2
    batched = jax.jit(jax.vmap(reset_then_step(env)))(keys, stacked, actions)
    for i, p in enumerate(param_variants):
        single = per_element(jitted, keys[i], p, actions[i])
        assert_trees_close(jax.tree.map(lambda x, i=i: x[i], batched), single)
    # The sweep really varies: the adaptive weights follow each element's adapt_strength.
    (_, states), _ = batched
    np.testing.assert_allclose(np.asarray(states.weights[2]), np.asarray(states.job.preference[2]), atol=1e-6)


# --- auto-reset, termination, truncation --------------------------------------------------------


def test_final_observation_is_the_pre_reset_observation(
    env: JobAllocationEnv, params: EnvParams, jitted: tuple[Callable, Callable]
) -> None:
    """Auto-reset keeps the finished job's last observation and weights in info."""
    reset, step = jitted
    p = with_epochs(params, 2, 2)

    @jax.jit
    def by_hand(key: jax.Array, state: EnvState, action: jax.Array) -> tuple:
        u = d.uniforms(key, d.STEP_DRAWS + d.RESET_DRAWS)
        next_state, reward, terminated, _ = env.transition(u[: d.STEP_DRAWS], state, action, p)
        reset_state = env.reset_from_draws(u[d.STEP_DRAWS :], p)
        return next_state, reward, terminated, reset_state

    _, state = reset(jax.random.key(5), p)
    for t in range(2):
        key, action = jax.random.key(50 + t), jnp.int32(8)
        pre_reset, expected_reward, expected_terminated, reset_state = by_hand(key, state, action)
        expected_final, reset_obs = observe(pre_reset, p), observe(reset_state, p)
        obs, next_state, reward, terminated, truncated, info = step(key, state, action, p)
        assert bool(terminated) == bool(expected_terminated) == (t == 1)
        assert not bool(truncated)
        np.testing.assert_allclose(
            np.asarray(info["final_observation"]), np.asarray(expected_final), atol=1e-6
        )
        np.testing.assert_allclose(
            np.asarray(info["final_weights"]), np.asarray(pre_reset.weights), atol=1e-6
        )
        np.testing.assert_allclose(np.asarray(info["weights"]), np.asarray(next_state.weights), atol=1e-6)
        np.testing.assert_allclose(np.asarray(reward), np.asarray(expected_reward), rtol=1e-5, atol=1e-7)
        if t == 0:  # no reset: the returned observation is the final one (to the last bit or so: XLA
            # fuses the two separate observe calls differently, see SAME_STATE_OBS_RTOL)
            np.testing.assert_allclose(
                np.asarray(obs), np.asarray(info["final_observation"]), rtol=SAME_STATE_OBS_RTOL, atol=0
            )
        else:  # reset: a fresh job, the old one's last observation in info
            np.testing.assert_allclose(np.asarray(obs), np.asarray(reset_obs), atol=1e-6)
            assert_trees_close(next_state, reset_state)
            assert float(info["final_observation"][PROGRESS]) == 1.0  # progress of the finished job
            assert float(obs[PROGRESS]) == 0.0 and int(next_state.epoch) == 0 and int(next_state.steps) == 0
        state = next_state


def test_episode_terminates_after_exactly_its_epochs(rollout: Callable, params: EnvParams) -> None:
    """Each episode terminates after exactly job.epochs steps."""
    p = with_epochs(params, 2, 7)
    _, state0, traj = rollout(jax.random.key(21), p, random_actions(21))
    terminated = np.asarray(traj["terminated"])
    assert not np.any(np.asarray(traj["truncated"]))
    segments = episode_segments(terminated)
    assert len(segments) >= 3
    epochs_of_job = np.asarray(traj["prev_state"].job.epochs)
    for start, end in segments:
        assert end - start + 1 == epochs_of_job[start] == np.asarray(traj["info"]["epochs"])[end]
        assert np.all(epochs_of_job[start : end + 1] == epochs_of_job[start])  # one job per episode
    assert epochs_of_job[0] == int(state0.job.epochs)
    # The step counter restarts with every job.
    np.testing.assert_array_equal(np.asarray(traj["state"].steps)[terminated], 0)


@pytest.mark.parametrize(("epochs", "max_steps"), [(5, 3), (5, 5), (5, 200), (4, 1)])
def test_truncation_is_separate_from_termination(
    rollout: Callable, params: EnvParams, epochs: int, max_steps: int
) -> None:
    """max_episode_steps truncates; truncation never coincides with termination."""
    p = validate_params(with_values(with_epochs(params, epochs, epochs), max_episode_steps=max_steps))
    _, _, traj = rollout(jax.random.key(epochs + max_steps), p, random_actions(max_steps))
    terminated, truncated = np.asarray(traj["terminated"]), np.asarray(traj["truncated"])
    assert not np.any(terminated & truncated)
    length = min(epochs, max_steps)
    expected_done = (np.arange(ROLLOUT_STEPS) + 1) % length == 0
    np.testing.assert_array_equal(terminated | truncated, expected_done)
    np.testing.assert_array_equal(terminated, expected_done if epochs <= max_steps else False)
    np.testing.assert_array_equal(np.asarray(traj["info"]["terminated"]), terminated)
    np.testing.assert_array_equal(np.asarray(traj["info"]["truncated"]), truncated)
    # A truncated job is reset like a finished one, and its last observation is kept.
    final = np.asarray(traj["info"]["final_observation"])
    np.testing.assert_allclose(
        np.asarray(traj["obs"])[~expected_done], final[~expected_done], rtol=SAME_STATE_OBS_RTOL, atol=0
    )
    np.testing.assert_allclose(final[expected_done, PROGRESS], length / epochs, rtol=1e-6)


# --- dtypes -------------------------------------------------------------------------------------


def dtype_report(x64: bool) -> dict:
    """Run ``DTYPE_SCRIPT`` in a fresh interpreter with ``JAX_ENABLE_X64`` on or off."""
    environ = {**os.environ, "JAX_ENABLE_X64": "1" if x64 else "0", "JAX_PLATFORMS": "cpu"}
    cache_dir = jax.config.jax_compilation_cache_dir
    if cache_dir:  # share the tests' persistent compilation cache
        environ["JAX_COMPILATION_CACHE_DIR"] = str(cache_dir)
        environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), environ.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", DTYPE_SCRIPT],
        cwd=REPO_ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def leaf_dtypes(tree: Any) -> dict[str, str]:
    """Path -> dtype name of every leaf."""
    return {
        jax.tree_util.keystr(path): str(leaf.dtype)
        for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]
    }


# slow: kept out of the default suite's time budget (run with -m slow)
@pytest.mark.slow
def test_x64_does_not_change_dtypes(jitted: tuple[Callable, Callable], params: EnvParams) -> None:
    """JAX_ENABLE_X64=1 leaves every dtype of reset and step unchanged."""
    reset, step = jitted
    obs, state = reset(jax.random.key(0), params)
    out = step(jax.random.key(1), state, jnp.int32(8), params)
    normal = leaf_dtypes({"reset": (obs, state), "step": out})
    assert str(obs.dtype) == "float32" and str(out[2].dtype) == "float32"
    x64 = dtype_report(x64=True)
    assert x64["x64"]
    assert x64["dtypes"] == normal


# --- spaces, make, scenarios, info ---------------------------------------------------------------


def test_spaces(env: JobAllocationEnv, params: EnvParams, rollout: Callable) -> None:
    """Observation, action and reward spaces: shapes, dtypes, bounds, membership."""
    obs_space = env.observation_space(params)
    assert obs_space.shape == (NUM_FEATURES,) == (NUM_PAPER_FEATURES + NUM_FORECAST_FEATURES,)
    assert NUM_FORECAST_FEATURES == 4 * (NUM_TARGETS + 1) + 6  # 4 per target and for keep, 6 of the job
    assert DEFAULT_NUM_ACTIONS == NUM_ACTIONS + NUM_TARGETS + 1 == RELOCATE_ACTION + 1
    assert len(FEATURE_NAMES) == len(set(FEATURE_NAMES)) == NUM_FEATURES
    assert obs_space.dtype == jnp.float32
    np.testing.assert_array_equal(obs_space.low, np.zeros(NUM_FEATURES))
    np.testing.assert_array_equal(obs_space.high, np.ones(NUM_FEATURES))
    action_space = env.action_space(params)
    assert env.action_set == DEFAULT_ACTION_SET == "targets_relocate"
    assert action_space.n == env.num_actions == DEFAULT_NUM_ACTIONS
    assert action_space.shape == () and action_space.dtype == jnp.int32
    assert JobAllocationEnv(env.catalog, "paper").action_space(params).n == NUM_ACTIONS == 9
    reward_space = env.reward_space(params)
    assert reward_space.shape == (env.reward_dim,) == (3,)
    assert reward_space.dtype == jnp.float32
    clip = float(params.reward_clip)
    top = 6.0 * float(params.sla_met_bonus) + float(params.all_slas_bonus)
    np.testing.assert_allclose(reward_space.low, [-clip, -clip, -1.0])
    np.testing.assert_allclose(reward_space.high, [0.0, 0.0, top])
    custom = env.reward_space(with_values(params, reward_clip=2.5, sla_met_bonus=0.5, all_slas_bonus=3.0))
    np.testing.assert_allclose(custom.low, [-2.5, -2.5, -1.0])
    np.testing.assert_allclose(custom.high, [0.0, 0.0, 6.0])
    # Bonuses whose end-of-job sum rounds up in float32 (product, then sum) by one ulp over the exact
    # sum: the bound holds what the env computes.
    per_sla, all_six = np.float32(32.46524429321289), np.float32(1.2177881002426147)
    edge = env.reward_space(with_values(params, sla_met_bonus=float(per_sla), all_slas_bonus=float(all_six)))
    rounded_twice = per_sla * np.float32(6.0) + all_six
    assert edge.high[2] >= rounded_twice > np.float32(6.0 * float(per_sla) + float(all_six))
    assert env.reward_space().shape == (3,)

    key = jax.random.key(9)
    assert bool(action_space.contains(action_space.sample(key)))
    assert not bool(action_space.contains(jnp.int32(DEFAULT_NUM_ACTIONS)))
    assert bool(obs_space.contains(obs_space.sample(key)))
    obs0, _, traj = rollout(key, params, random_actions(9))
    for obs in [obs0, *np.asarray(traj["obs"]), *np.asarray(traj["info"]["final_observation"])]:
        assert obs.shape == obs_space.shape and obs.dtype == obs_space.dtype
        assert bool(obs_space.contains(obs))
    for reward in np.asarray(traj["reward"]):
        assert reward.shape == reward_space.shape and reward.dtype == reward_space.dtype
        assert bool(reward_space.contains(reward))


@pytest.mark.parametrize("name", SCENARIOS)
def test_make_and_every_scenario_smoke(env: JobAllocationEnv, rollout: Callable, name: str) -> None:
    """make(name) gives valid params and a finite rollout for each scenario."""
    made_env, p = make(name)
    assert isinstance(made_env, JobAllocationEnv)
    assert made_env.catalog.workload_names == env.catalog.workload_names
    chex.assert_trees_all_equal_shapes_and_dtypes(p, env.default_params)
    obs, state = made_env.reset(jax.random.key(0), p)
    assert obs.shape == (NUM_FEATURES,)
    made_env.step(jax.random.key(1), state, 4, p)
    obs0, _, traj = rollout(jax.random.key(31), p, random_actions(31))
    for leaf in jax.tree.leaves((obs0, traj)):
        if jnp.issubdtype(leaf.dtype, jnp.floating):
            assert np.all(np.isfinite(np.asarray(leaf)))
    if name in SCENARIO_KINDS:  # a named kind: every job of it, with its preset preference
        kind = SCENARIO_KINDS.index(name)
        np.testing.assert_array_equal(np.asarray(traj["info"]["scenario"]), kind)
        preset = PREFERENCES[KIND_PREFERENCES[kind]]
        np.testing.assert_allclose(
            np.asarray(traj["info"]["preference"]), np.tile(preset, (ROLLOUT_STEPS, 1))
        )


def test_make_default_is_mixed_and_unknown_scenario_fails() -> None:
    """make() defaults to 'mixed'; an unknown name fails."""
    _, p = make()
    _, mixed = make("mixed")
    chex.assert_trees_all_equal(p, mixed)
    with pytest.raises(ValueError, match="unknown scenario"):
        make("no-such-scenario")


def test_make_takes_the_action_set() -> None:
    """make() builds the default ``targets_relocate`` set or the named one; an unknown set fails,
    listing them."""
    env, _ = make()
    assert (env.action_set, env.num_actions) == ("targets_relocate", DEFAULT_NUM_ACTIONS)
    paper, _ = make("balanced", action_set="paper")
    assert (paper.action_set, paper.num_actions) == ("paper", NUM_ACTIONS)
    assert "paper" in repr(paper)
    with pytest.raises(ValueError, match="unknown action set 'moves'") as err:
        make(action_set="moves")
    for name in ACTION_SETS:
        assert name in str(err.value)
    with pytest.raises(ValueError, match="unknown action set"):
        JobAllocationEnv(action_set="moves")


def test_info_has_documented_keys_with_fixed_shapes(rollout: Callable, params: EnvParams) -> None:
    """info holds every documented key with a fixed shape and dtype."""
    p = with_epochs(params, 2, 3)
    _, _, traj = rollout(jax.random.key(41), p, random_actions(41))
    info = traj["info"]
    missing = set(DOCUMENTED_INFO_SHAPES) - set(info)
    assert not missing, f"info lacks documented keys {sorted(missing)}"
    undocumented = set(info) - set(DOCUMENTED_INFO_SHAPES) - {"final_state"}
    assert not undocumented, f"info has undocumented keys {sorted(undocumented)}"
    # final_state: the pre-reset state, a whole EnvState, which observes as final_observation.
    assert isinstance(info["final_state"], EnvState)
    chex.assert_trees_all_equal_shapes_and_dtypes(info["final_state"], traj["state"])
    final_obs = jax.vmap(observe, in_axes=(0, None))(info["final_state"], p)
    np.testing.assert_allclose(
        np.asarray(final_obs), np.asarray(info["final_observation"]), rtol=SAME_STATE_OBS_RTOL, atol=1e-7
    )
    advanced = np.asarray(traj["prev_state"].epoch) + 1
    np.testing.assert_array_equal(np.asarray(info["final_state"].epoch), advanced)
    for name, shape in DOCUMENTED_INFO_SHAPES.items():
        assert info[name].shape == (ROLLOUT_STEPS, *shape), name
    for name in BOOL_INFO:
        assert info[name].dtype == jnp.bool_, name
    for name in ("reallocations", "epochs", "workload", "gpu_type", "scenario"):
        assert jnp.issubdtype(info[name].dtype, jnp.integer), name
    # The same structure on steps that reset and steps that do not (both occur here).
    done = np.asarray(traj["terminated"])
    assert done.any() and not done.all()

"""Action sets, ``mixed`` starts, the end-of-job SLA reward and the forecast block's bounds."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slamorl_jax.env import (
    FEATURE_NAMES,
    INIT_STRATEGIES,
    NUM_ACTIONS,
    EnvParams,
    JobAllocationEnv,
    action_names,
    num_actions,
    validate_params,
    with_derived_tables,
)
from slamorl_jax.env.action_sets import (
    NUM_TARGET_CPUS_PER_GPU,
    NUM_TARGET_GPUS,
    NUM_TARGETS,
    RELOCATE_ACTION,
    RELOCATE_NAME,
    apply,
    emitted_relocation,
)
from slamorl_jax.env.forecast import NUM_FORECAST_FEATURES
from slamorl_jax.env.objectives import NUM_SLAS
from slamorl_jax.env.observation import NUM_PAPER_FEATURES
from slamorl_jax.env.params import MIXED_INIT_STRATEGIES, with_values

NUM_STATES = 6
NUM_TARGET_ACTIONS = num_actions("targets")  # the 9 moves, then every absolute target
# An odd grid: odd GPU counts from 1 up to MAX_GPUS (half of them beyond the 16-GPU cluster), and
# zero, fractional and huge CPUs per GPU.
ODD_TARGET_GPUS = [1 + 31 * i // (NUM_TARGET_GPUS - 1) for i in range(NUM_TARGET_GPUS)]
ODD_TARGET_CPUS_PER_GPU = [0.0, 0.6, 3.0, 5.0, 60.0][:NUM_TARGET_CPUS_PER_GPU]
OUT_OF_RANGE = (-7, -1)  # and num_actions, num_actions + 50
KEEP = [FEATURE_NAMES.index(f"keep_{name}") for name in ("time", "cost", "other_slas")]


def target_columns(k: int) -> list[int]:
    """Observation columns of target ``k``'s time, cost and other-SLA features."""
    return [FEATURE_NAMES.index(f"target{k}_{name}") for name in ("time", "cost", "other_slas")]


def expected_targets(params: EnvParams) -> np.ndarray:
    """The documented grid, computed here: every target GPU count x CPUs-per-GPU value (GPU-major),
    CPUs rounded to the step lattice in float32, then clipped to the cluster, ``(NUM_TARGETS, 2)``."""
    step = int(params.cpu_step)
    per_node, gpus_per_node = int(params.cpus_per_node), int(params.gpus_per_node)
    max_gpus = min(int(params.max_gpus_per_job), gpus_per_node * int(params.max_nodes))
    out = []
    for g in np.asarray(params.target_gpus).tolist():
        for x in np.asarray(params.target_cpus_per_gpu, np.float32):
            cpus = int(np.round(np.float32(np.float32(g) * x) / np.float32(step))) * step
            g_clipped = min(max(g, 1), max_gpus)
            cap = -(-g_clipped // gpus_per_node) * per_node // step * step
            out.append((g_clipped, min(max(cpus // step * step, step), cap)))
    return np.asarray(out)


@pytest.fixture(scope="module")
def params(env: JobAllocationEnv) -> EnvParams:
    """Defaults with ``mixed`` starts."""
    return validate_params(with_values(env.default_params, init_strategy=INIT_STRATEGIES.index("mixed")))


@pytest.fixture(scope="module")
def odd_grid(params: EnvParams) -> EnvParams:
    """Targets beyond the 16-GPU cluster, and zero, fractional and huge CPUs per GPU."""
    return validate_params(
        with_derived_tables(
            with_values(params, target_gpus=ODD_TARGET_GPUS, target_cpus_per_gpu=ODD_TARGET_CPUS_PER_GPU)
        )
    )


@pytest.fixture(scope="module")
def step_sets(env: JobAllocationEnv) -> dict[str, tuple[Callable, Callable]]:
    """Per action set, jit(vmap(reset)) over keys (shared: reset does not depend on the set) and
    jit(vmap(step)) over keys, states and actions."""
    out = {}
    reset = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))  # a job's reset is the same in every set
    for name in ("targets", "paper"):
        e = env if name == env.action_set else JobAllocationEnv(env.catalog, name)
        out[name] = (reset, jax.jit(jax.vmap(e.step, in_axes=(0, 0, 0, None))))
    return out


ACTIONS_PER_STATE = NUM_TARGETS  # the widest list a test steps from each state


def states_times_actions(
    step_sets: dict, name: str, params: EnvParams, actions: list[int], seed: int
) -> tuple:
    """``NUM_STATES`` states (reset, then one random move) each stepped with every action in
    ``actions`` (same key per state): (states before, actions, step outputs), flattened."""
    reset, step = step_sets[name]
    keys = jax.random.split(jax.random.key(seed), NUM_STATES)
    _, states = reset(keys, params)
    # Every call steps ACTIONS_PER_STATE actions per state (the list padded with its last action), so
    # the batched step compiles once per set whatever the list; the padding is dropped after. The
    # random move that makes each state one epoch old runs in the same shape (each state repeated).
    n, width = len(actions), max(ACTIONS_PER_STATE, len(actions))
    moves = jnp.repeat(jnp.arange(NUM_STATES, dtype=jnp.int32) % NUM_ACTIONS, width)
    _, moved, *_ = step(
        jnp.repeat(keys, width, axis=0),
        jax.tree.map(lambda x: jnp.repeat(x, width, axis=0), states),
        moves,
        params,
    )
    states = jax.tree.map(lambda x: x[::width], moved)
    before = jax.tree.map(lambda x: jnp.repeat(x, width, axis=0), states)
    step_keys = jnp.repeat(jax.random.split(jax.random.key(seed + 1), NUM_STATES), width, axis=0)
    padded = [*actions, *[actions[-1]] * (width - n)]
    flat_actions = jnp.tile(jnp.asarray(padded, jnp.int32), NUM_STATES)
    outputs = step(step_keys, before, flat_actions, params)
    rows = np.asarray([state * width + i for state in range(NUM_STATES) for i in range(n)])
    return jax.tree.map(lambda x: x[rows], (before, flat_actions, outputs))


# --- action sets --------------------------------------------------------------------------------


def test_action_set_sizes_and_names(params: EnvParams) -> None:
    """``paper`` has the 9 moves, ``targets`` those 9 then every GPU count 1-16 x 5 CPUs-per-GPU
    values (80 targets), each named by its grid point, GPU-major."""
    assert num_actions("paper") == NUM_ACTIONS == 9
    assert NUM_TARGETS == NUM_TARGET_GPUS * NUM_TARGET_CPUS_PER_GPU
    assert num_actions("targets") == NUM_TARGET_ACTIONS == 9 + NUM_TARGETS
    paper, targets = action_names("paper"), action_names("targets", params)
    assert targets[:9] == paper and len(targets) == len(set(targets)) == NUM_TARGET_ACTIONS
    gpus = np.asarray(params.target_gpus).tolist()
    ratios = np.asarray(params.target_cpus_per_gpu).tolist()
    np.testing.assert_array_equal(gpus, np.arange(1, NUM_TARGET_GPUS + 1))  # the default: every count
    assert len(ratios) == NUM_TARGET_CPUS_PER_GPU
    cpu_names = [f"{x:g} CPUs/GPU" if x else "fewest CPUs" for x in ratios]
    expected = [f"target {g} GPUs x {cpus}" for g in gpus for cpus in cpu_names]
    assert list(targets[9:]) == expected
    assert targets[9] == "target 1 GPUs x fewest CPUs" and targets[-1] == "target 16 GPUs x 12 CPUs/GPU"
    assert action_names("targets") == targets  # the default grid without params
    odd = with_values(params, target_gpus=ODD_TARGET_GPUS, target_cpus_per_gpu=ODD_TARGET_CPUS_PER_GPU)
    odd_names = action_names("targets", odd)  # another grid: named from the params
    # (a count beyond the cluster's 16 says where the env clips it)
    assert (
        odd_names[-1]
        == f"target {ODD_TARGET_GPUS[-1]} GPUs (16 here) x {ODD_TARGET_CPUS_PER_GPU[-1]:g} CPUs/GPU"
    )
    # targets_relocate: the targets set, then relocate (the same allocation on fresh nodes).
    assert num_actions("targets_relocate") == NUM_TARGET_ACTIONS + 1 == RELOCATE_ACTION + 1
    assert action_names("targets_relocate", params) == (*targets, RELOCATE_NAME)
    gpus, cpus = apply(jnp.arange(num_actions("targets_relocate")), jnp.int32(4), jnp.int32(16), params)
    assert (int(gpus[RELOCATE_ACTION]), int(cpus[RELOCATE_ACTION])) == (4, 16)
    np.testing.assert_array_equal(np.asarray(gpus[9:RELOCATE_ACTION]), expected_targets(params)[:, 0])


def test_an_emitted_action_relocates_only_where_the_set_clips_it_to_relocate() -> None:
    """A policy's raw action counts as a relocation as the env step reads it: clipped to the set
    first (so any index past the end relocates in ``targets_relocate``), and never in a set without
    relocate."""
    emitted = jnp.array([0, RELOCATE_ACTION - 1, RELOCATE_ACTION, RELOCATE_ACTION + 5, -1])
    np.testing.assert_array_equal(
        np.asarray(emitted_relocation(emitted, "targets_relocate")), [False, False, True, True, False]
    )
    for name in ("paper", "targets"):
        assert not np.asarray(emitted_relocation(emitted, name)).any()


@pytest.mark.parametrize("grid", ["default", "odd"])
def test_targets_land_on_the_documented_grid(
    step_sets: dict, params: EnvParams, odd_grid: EnvParams, grid: str
) -> None:
    """Action ``9 + 5 i + j`` goes to ``target_gpus[i]`` GPUs with ``target_cpus_per_gpu[j]`` CPUs each,
    on the CPU lattice and clipped to the cluster, from any state; the observation's target ``k``
    forecast then equals its ``keep`` forecast (same allocation, the same profile numbers, no pause)."""
    p = params if grid == "default" else odd_grid
    expected = expected_targets(p)
    np.testing.assert_array_equal(np.asarray(p.target_allocation), expected)
    if grid == "odd":  # the clipping is exercised: beyond 16 GPUs, below one CPU step, above the cap
        assert expected[:, 0].max() == 16 and expected[:, 1].min() == int(p.cpu_step)
        assert expected[-1, 1] == 4 * int(p.cpus_per_node)
    actions = list(range(9, 9 + NUM_TARGETS))
    _, flat_actions, (obs, after, *_) = states_times_actions(step_sets, "targets", p, actions, seed=3)
    k = np.asarray(flat_actions) - 9
    allocation = np.stack([np.asarray(after.gpus), np.asarray(after.cpus)], axis=-1)
    np.testing.assert_array_equal(allocation, expected[k])
    obs = np.asarray(obs)
    for row, target in enumerate(k):
        np.testing.assert_allclose(obs[row, target_columns(target)], obs[row, KEEP], rtol=1e-5, atol=1e-6)


def test_moves_are_the_same_in_both_sets_and_actions_clip(step_sets: dict, params: EnvParams) -> None:
    """Indices 0-8 do the same in both sets (allocation, observation, reward, info); an index outside
    a set does what the nearest index inside it does."""
    moves = list(range(NUM_ACTIONS))
    paper_actions = [*moves, *OUT_OF_RANGE, NUM_ACTIONS, NUM_ACTIONS + 50]
    target_actions = [*moves, *OUT_OF_RANGE, NUM_TARGET_ACTIONS, NUM_TARGET_ACTIONS + 50]
    _, _, paper = states_times_actions(step_sets, "paper", params, paper_actions, seed=5)
    _, _, targets = states_times_actions(step_sets, "targets", params, target_actions, seed=5)
    paper, targets = jax.device_get(paper), jax.device_get(targets)
    per_state = len(paper_actions)

    def rows(tree: object, index: list[int]) -> object:
        take = np.asarray([s * per_state + i for s in range(NUM_STATES) for i in index])
        return jax.tree.map(lambda x: np.asarray(x)[take], tree)

    def assert_same(a: object, b: object) -> None:
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
            np.testing.assert_allclose(
                np.asarray(x, np.float64), np.asarray(y, np.float64), rtol=1e-6, atol=1e-7
            )

    move_rows = list(range(NUM_ACTIONS))
    assert_same(rows(paper, move_rows), rows(targets, move_rows))
    # Below the range: as action 0; above it: as the set's last action (8, or the last target).
    for out, last in ((paper, 8), (targets, None)):
        assert_same(rows(out, [9, 10]), rows(out, [0, 0]))
        if last is not None:
            assert_same(rows(out, [11, 12]), rows(out, [last, last]))
    _, after, *_ = targets
    last_target = expected_targets(params)[-1]
    for i in (11, 12):
        picked = rows((after.gpus, after.cpus), [i])
        np.testing.assert_array_equal(np.stack(picked, axis=-1), np.tile(last_target, (NUM_STATES, 1)))


# --- mixed starts ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def starts(env: JobAllocationEnv) -> Callable:
    """jit of: reset many keys; each start's allocation, the job's request, and whether the reset
    readings are the profile's forecast for the start."""
    from slamorl_jax.env.job_model import epoch_metrics

    def run(keys: jax.Array, params: EnvParams) -> dict:
        _, s = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
        forecast = epoch_metrics(s.job.profile, s.gpus, s.cpus, params)
        return {
            "allocation": jnp.stack([s.gpus, s.cpus], axis=-1),
            "requested": jnp.stack([s.job.requested_gpus, s.job.requested_cpus], axis=-1),
            "readings_are_forecast": jnp.isclose(s.epoch_time_s, forecast.epoch_time_s, rtol=1e-6)
            & jnp.isclose(s.cpu_util, forecast.cpu_util, rtol=1e-6),
        }

    return jax.jit(run)


@pytest.mark.parametrize("probs", [(0.2, 0.5, 0.3), (0.6, 0.05, 0.35), (0.0, 0.0, 1.0)])
def test_mixed_starts_follow_init_mix_probs(starts: Callable, params: EnvParams, probs: tuple) -> None:
    """Under ``mixed`` each job starts cold, at its request or at random (the very start each of those
    strategies gives the same key), at ``init_mix_probs`` rates: each count within 5 binomial standard
    deviations over the jobs whose three candidate starts differ (which start they took is visible;
    the draw is independent of what makes them differ). The readings are the profile's forecast."""
    n = 20_000
    keys = jax.random.split(jax.random.key(11), n)
    mixed = with_values(params, init_mix_probs=probs)
    got = jax.device_get(starts(keys, mixed))
    assert np.all(got["readings_are_forecast"])
    candidates = []
    for name in MIXED_INIT_STRATEGIES:
        pure = jax.device_get(starts(keys, with_values(mixed, init_strategy=INIT_STRATEGIES.index(name))))
        candidates.append(pure["allocation"])
    np.testing.assert_array_equal(candidates[1], got["requested"])
    candidates = np.stack(candidates)  # (3, n, 2)
    match = np.all(got["allocation"][None] == candidates, axis=-1)  # (3, n)
    assert np.all(match.any(axis=0)), "a mixed start is none of cold, requested, random"
    distinct = ~(
        np.all(candidates[0] == candidates[1], axis=-1)
        | np.all(candidates[0] == candidates[2], axis=-1)
        | np.all(candidates[1] == candidates[2], axis=-1)
    )
    m = int(distinct.sum())
    assert m > n // 3
    counts = match[:, distinct].sum(axis=1)
    p = np.asarray(probs)
    tolerance = 5.0 * np.sqrt(m * p * (1.0 - p)) + 1e-9
    assert np.all(np.abs(counts - m * p) <= tolerance), (counts, m * p, tolerance)


# --- reward and bounds through rollouts ----------------------------------------------------------


def lenient(params: EnvParams) -> EnvParams:
    """Generous deadlines, budgets and memory, tiny minimums: most jobs meet all six SLAs."""
    low = np.tile([5.0, 5.0, 0.01, 10.0, 0.0, 0.0], (3, 1))
    high = np.tile([6.0, 6.0, 0.02, 12.0, 0.0, 0.0], (3, 1))
    return with_values(params, sla_factor_low=low, sla_factor_high=high)


def short_jobs(params: EnvParams, low: int = 2, high: int = 4) -> EnvParams:
    shape = params.workloads.epochs_min.shape
    workloads = with_values(params.workloads, epochs_min=np.full(shape, low), epochs_max=np.full(shape, high))
    return with_derived_tables(params.replace(workloads=workloads))


@pytest.mark.parametrize("bonuses", [(2.0, 4.0), (1.5, 7.0), (0.0, 0.0)])
def test_end_of_job_sla_reward(
    env: JobAllocationEnv, batched_rollout: Callable, params: EnvParams, bonuses: tuple
) -> None:
    """On finished jobs the SLA reward is ``-mean severity / epochs + sla_met_bonus x (job-level SLAs
    met) + all_slas_bonus x [all six met]``; on other steps only the severity term."""
    met_bonus, all_bonus = bonuses
    logits = np.zeros(env.num_actions, np.float32)
    counts_seen: set[int] = set()
    for seed, p in enumerate((short_jobs(params), short_jobs(lenient(params)))):
        p = validate_params(with_values(p, sla_met_bonus=met_bonus, all_slas_bonus=all_bonus))
        out = batched_rollout(seed, p, logits)
        sla_reward = out["reward"][..., 2].astype(np.float64)
        severity_term = -out["severities"].mean(axis=-1) / out["epochs"]
        met = out["job_sla_met"].sum(axis=-1)
        done = out["terminated"]
        expected = severity_term + np.where(done, met_bonus * met + all_bonus * out["all_slas_met"], 0.0)
        np.testing.assert_allclose(sla_reward, expected, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(out["all_slas_met"], met == NUM_SLAS)
        assert done.sum() >= 100
        counts_seen |= set(met[done].tolist())
    assert len(counts_seen) >= 3 and NUM_SLAS in counts_seen  # several counts, and all six met


def bound_variants(params: EnvParams, odd_grid: EnvParams) -> dict[str, EnvParams]:
    """The new knobs at their edges."""
    return {
        "mixed-defaults": params,
        "odd-target-grid": odd_grid,
        "no-deviation": with_values(params, compute_spread=0.0, sync_spread=0.0),
        "widest-deviation-sharpest-forecast": with_values(
            params, compute_spread=2.0, sync_spread=2.0, forecast_noise=1e-3
        ),
        "widest-deviation-vaguest-forecast": with_values(
            params, compute_spread=2.0, sync_spread=2.0, forecast_noise=10.0
        ),
        "all-random-starts-long-pauses": with_values(
            params,
            init_mix_probs=[0.0, 0.0, 1.0],
            reallocation_pause_s=86_400.0,
            cpu_reallocation_pause_s=3600.0,
        ),
        "short-lenient-jobs": short_jobs(lenient(params), 1, 3),
    }


def test_every_feature_stays_in_unit_interval(
    env: JobAllocationEnv, batched_rollout: Callable, params: EnvParams, odd_grid: EnvParams
) -> None:
    """Every feature (the paper's 21, then 3 per target and for keep, then 5 of the job) is finite and
    in [0, 1] at reset, after steps and in the final observation, for every new scenario; the
    forecast's discrete features take their documented values."""
    assert NUM_FORECAST_FEATURES == 4 * (NUM_TARGETS + 1) + 6
    assert len(FEATURE_NAMES) == NUM_PAPER_FEATURES + NUM_FORECAST_FEATURES
    other_slas = [i for i, name in enumerate(FEATURE_NAMES) if name.endswith("other_slas")]
    data_parallel = FEATURE_NAMES.index("data_parallel")
    logits = np.zeros(env.num_actions, np.float32)
    for seed, (name, p) in enumerate(bound_variants(params, odd_grid).items()):
        out = batched_rollout(100 + seed, validate_params(p), logits)
        for key in ("obs0", "obs", "final_observation"):
            obs = out[key].reshape(-1, len(FEATURE_NAMES))
            bad = ~(np.isfinite(obs) & (obs >= 0.0) & (obs <= 1.0))
            features = sorted({FEATURE_NAMES[i] for i in np.argwhere(bad)[:, 1]})
            assert not features, f"{name} {key}: not finite in [0, 1]: {features}"
            assert np.all(np.isin(obs[:, other_slas], [0.0, 0.25, 0.5, 0.75, 1.0])), f"{name} {key}"
            assert np.all(np.isin(obs[:, data_parallel], [0.0, 1.0])), f"{name} {key}"

"""The JAX env matches the plain-Python job (``env.python_job``, an independent implementation) step by
step on the same uniform draws, for every named scenario, every init strategy, both action sets and
a few other params (hidden-truth spreads, forecast noise, target grids, SLA bonuses, mixed starts).

One jitted ``vmap`` over (params, seed) per action set runs each trajectory through
``step_from_draws`` with random actions (a few of them out of range, which both clip to the set); the
Python job then replays each one from the very same draws and actions. Every observation feature
(the paper's 21 and the forecast block), every reward and every ``info`` entry is compared.
Tolerances are float32's (the Python job computes in float64): ``RTOL = 1e-4``, ``ATOL = 1e-5``.
Discrete outcomes are exact except where the checked value sits on its limit to within ``TIE``
(relative), where float32 and float64 may fairly disagree; such steps must stay rare. Those are the
per-epoch met-flags (as before), the job-level checks with the end-of-job SLA reward (as before), and,
new with the forecast block, each target's ``other_slas`` feature, a count of four threshold checks
on a projected job (the Python job reports their margins as ``observation_slack``).

One looser tolerance, new with the online model: the three posterior features (``compute_dev``,
``sync_dev``, and ``surprise``, an epoch against the posterior's forecast) get
``POSTERIOR_ATOL = 1e-4``. The JAX env accumulates the model's sums in float32 and
solves the 2x2 posterior by Cramer's rule. Its determinant is now expanded so that nothing cancels,
but its numerators (``p22 b1 - p12 b2``) still do: at one allocation the prior's part of
``p22 = d2 + n S22`` is what survives the cancellation, with a relative error of about float32's
epsilon x ``n S22 / d2`` (the data's precision over the prior's; ``test_env_truth``'s
``NUMERATOR_BUG``). At the defaults that stays ~20x inside ``ATOL``; with
about three times the default spreads (the ``wide-deviation`` case under the ``paper`` moves, which
stay put) the error reaches ~7e-5 absolute. It is the env's rounding, not a difference of formulas
(``test_env_truth`` checks the posterior against float64 on its own).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slamorl_jax.env import (
    FEATURE_NAMES,
    INIT_STRATEGIES,
    NUM_FEATURES,
    SCENARIOS,
    SLA_NAMES,
    EnvParams,
    JobAllocationEnv,
    SlaTargets,
    num_actions,
    observe,
    scenario_params,
    validate_params,
    with_derived_tables,
    with_preference,
)
from slamorl_jax.env import draws as d
from slamorl_jax.env.action_sets import (
    ACTION_SETS,
    DEFAULT_ACTION_SET,
    NUM_TARGET_CPUS_PER_GPU,
    NUM_TARGET_GPUS,
    NUM_TARGETS,
    WIDEST_ACTION_SET,
)
from slamorl_jax.env.params import with_values
from slamorl_jax.env.python_job import PythonJob, action_count
from slamorl_jax.env.python_uniforms import NumpyUniforms, run_random_steps
from slamorl_jax.env.shifts import SHIFT_KINDS

RTOL = 1e-4
ATOL = 1e-5
TIE = 1e-5
POSTERIOR_ATOL = 1e-4
POSTERIOR = [FEATURE_NAMES.index(name) for name in ("compute_dev", "sync_dev", "surprise")]
# The forecast's suggestion flags: one ranking per observation, keep's flag stands for it.
SUGGESTED = [i for i, name in enumerate(FEATURE_NAMES) if name.endswith("_suggested")]
KEEP_SUGGESTED = FEATURE_NAMES.index("keep_suggested")
SEEDS = (0, 1)  # per case; 16 cases x 2 seeds x about 240 steps in the default suite
OUT_OF_RANGE = 2  # actions are drawn from [-2, num_actions + 2): both implementations clip them
# Observation columns of the six met-flags and of the six severities.
MET = slice(FEATURE_NAMES.index(f"{SLA_NAMES[0]}_met"), FEATURE_NAMES.index(f"{SLA_NAMES[-1]}_met") + 1)
SEVERITY = slice(
    FEATURE_NAMES.index(f"{SLA_NAMES[0]}_severity"), FEATURE_NAMES.index(f"{SLA_NAMES[-1]}_severity") + 1
)

# info entries compared with tie-aware rules below; every other entry must match within tolerance.
JOB_FLAGS = ("deadline_met", "budget_met", "job_sla_met", "all_slas_met", "sla_compliance")
SPECIAL_INFO = ("final_observation", "final_state", "sla_met", *JOB_FLAGS)


# Mid-run event kinds replayed in the default suite (the ones with their own code paths in the step
# and the forecast); the others run with -m slow.
DEFAULT_SUITE_EVENTS = ("price_rise", "deadline_cut", "preemption")


def _event_cases(kinds: tuple[str, ...]) -> dict[str, EnvParams]:
    """Each mid-run event kind on its own, early in the job, so every trajectory meets it."""
    shifting = with_values(scenario_params("shifting"), init_strategy=INIT_STRATEGIES.index("mixed"))
    return {
        f"event-{name}": validate_params(
            with_values(
                shifting,
                shift_probs=np.eye(len(SHIFT_KINDS))[SHIFT_KINDS.index(name)],
                shift_at_low=0.1,
                shift_at_high=0.3,
            )
        )
        for name in kinds
    }


def _case_params() -> dict[str, EnvParams]:
    """Every scenario, each with one init strategy in turn (every strategy on at least one scenario;
    the scenarios differ only in parameter values, so the full product added replay time and no
    code path), plus truncation, fixed preferences (one with a zero weight and
    strong adaptation), another cluster with frequent contention that moves do not leave, and the
    new knobs: no hidden
    deviation, wide deviations with a sharp forecast, an odd target grid (targets beyond the cluster,
    fractional and zero CPUs per GPU) with other SLA bonuses, and a mixed start of other rates."""
    cases = {}
    # the event-* cases below run shifting, one event kind each
    scenarios = [scenario for scenario in SCENARIOS if scenario != "shifting"]
    for turn, scenario in enumerate(scenarios):
        index = turn % len(INIT_STRATEGIES)
        cases[f"{scenario}/{INIT_STRATEGIES[index]}"] = scenario_params(scenario).replace(
            init_strategy=jnp.int32(index)
        )
    random_start = scenario_params("mixed").replace(init_strategy=jnp.int32(INIT_STRATEGIES.index("random")))
    mixed_start = with_values(random_start, init_strategy=INIT_STRATEGIES.index("mixed"))
    cases["truncated-after-7"] = random_start.replace(max_episode_steps=jnp.int32(7))
    cases["fixed-preference-static-weights"] = with_preference(random_start, [0.1, 0.3, 0.6]).replace(
        adapt_strength=jnp.float32(0.0)
    )
    cases["zero-weight-preference-strong-adaptation"] = with_preference(
        random_start, [0.5, 0.0, 0.5]
    ).replace(adapt_strength=jnp.float32(100.0))
    cases["nvlink-cluster-heavy-contention"] = with_derived_tables(
        random_start.replace(
            gpus_per_node=jnp.int32(8),
            cpus_per_node=jnp.int32(96),
            cpu_step=jnp.int32(8),
            intra_node_gbps=jnp.float32(2400.0),
            inter_node_gbps=jnp.float32(400.0),
            contention_start_prob=jnp.float32(0.4),
            contention_end_prob=jnp.float32(0.3),
            reallocation_pause_s=jnp.float32(5.0),
            moves_leave_contention=jnp.asarray(False),  # the other cases leave it (shifts.py)
        )
    )
    cases["no-hidden-deviation"] = with_values(mixed_start, compute_spread=0.0, sync_spread=0.0)
    cases["wide-deviation"] = with_values(
        mixed_start, compute_spread=0.8, sync_spread=0.6, forecast_noise=0.1, epoch_time_noise=0.0
    )
    cases["odd-targets-other-bonuses"] = with_derived_tables(
        with_values(
            mixed_start,
            target_gpus=[1 + 31 * i // (NUM_TARGET_GPUS - 1) for i in range(NUM_TARGET_GPUS)],
            target_cpus_per_gpu=[0.0, 0.6, 3.0, 5.0, 60.0][:NUM_TARGET_CPUS_PER_GPU],
            sla_met_bonus=0.5,
            all_slas_bonus=20.0,
        )
    )
    cases["mixed-mostly-random"] = with_values(mixed_start, init_mix_probs=[0.05, 0.15, 0.8])
    cases.update(_event_cases(DEFAULT_SUITE_EVENTS))
    return {name: validate_params(p) for name, p in cases.items()}


def _jax_trajectory(env: JobAllocationEnv, params: EnvParams, key: jax.Array, num_steps: int) -> dict:
    """Reset from drawn uniforms, then ``num_steps`` random actions through ``step_from_draws``."""
    reset_key, run_key = jax.random.split(key)
    u_reset = jnp.stack(d.uniforms(reset_key, d.RESET_DRAWS))
    state = env.reset_from_draws(u_reset, params)
    first = {"u": u_reset, "obs": observe(state, params), "gpus": state.gpus, "cpus": state.cpus}

    def body(state: Any, key: jax.Array) -> tuple[Any, dict]:
        draw_key, action_key = jax.random.split(key)
        u = jnp.stack(d.uniforms(draw_key, d.STEP_DRAWS + d.RESET_DRAWS))
        action = jax.random.randint(action_key, (), -OUT_OF_RANGE, env.num_actions + OUT_OF_RANGE)
        obs, state, reward, terminated, truncated, info = env.step_from_draws(
            u[: d.STEP_DRAWS], u[d.STEP_DRAWS :], state, action, params
        )
        out = {"u": u, "action": action, "obs": obs, "reward": reward, "terminated": terminated}
        out.update(truncated=truncated, gpus=state.gpus, cpus=state.cpus, info=info)
        return state, out

    _, steps = jax.lax.scan(body, state, jax.random.split(run_key, num_steps))
    return {"first": first, "steps": steps}


def _python_trajectory(
    params: EnvParams, action_set: str, first_u: np.ndarray, u: np.ndarray, actions: np.ndarray
) -> dict:
    """Replay the same draws and actions through the Python job; every output stacked over steps."""
    job = PythonJob(params, action_set)
    first = {"obs": np.asarray(job.reset(first_u)), "allocation": np.asarray(job.allocation)}
    first["observation_slack"] = np.asarray(job.observation_slack)
    rows: dict[str, list] = {}
    for row, action in zip(u, actions, strict=True):
        obs, reward, terminated, truncated, info = job.step(row[: d.STEP_DRAWS], row[d.STEP_DRAWS :], action)
        out = {"obs": obs, "reward": reward, "terminated": terminated, "truncated": truncated}
        out.update(allocation=job.allocation, **info)
        out.update(_flatten(out.pop("final_state"), "final_state"))
        for name, value in out.items():
            rows.setdefault(name, []).append(value)
    return {"first": first, "steps": {name: np.asarray(v) for name, v in rows.items()}}


def _flatten(tree: dict, prefix: str) -> dict[str, Any]:
    """A nested dict as ``{"prefix/key/...": leaf}``."""
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(_flatten(value, f"{prefix}/{key}"))
        else:
            out[f"{prefix}/{key}"] = value
    return out


def _state_leaf(state: Any, path: str) -> np.ndarray:
    """The JAX state's leaf at a ``final_state/...`` path (``sla_targets`` as its six limits)."""
    node = state
    for key in path.split("/")[1:]:
        node = getattr(node, key)
    if isinstance(node, SlaTargets):  # fields in SLA order
        return np.stack([np.asarray(getattr(node, f.name)) for f in dataclasses.fields(node)], axis=-1)
    return np.asarray(node)


def _assert_close(
    label: str, name: str, got: np.ndarray, want: np.ndarray, skip: Any = False, atol: Any = ATOL
) -> None:
    """``got`` (JAX) equals ``want`` (Python) within float32 tolerances, except where ``skip``."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, f"{label}: {name} shape {got.shape} != {want.shape}"
    ok = np.abs(got - want) <= atol + RTOL * np.abs(want)
    ok |= np.broadcast_to(skip, got.shape)
    if not np.all(ok):
        bad = np.argwhere(~ok)[0]
        raise AssertionError(
            f"{label}: {name} differs first at step {bad[0]} (index {tuple(bad)}): "
            f"JAX {got[tuple(bad)]!r} vs Python {want[tuple(bad)]!r}\n"
            f"JAX row {got[bad[0]]}\nPython row {want[bad[0]]}"
        )


def _assert_observations(
    label: str, name: str, got: np.ndarray, want: np.ndarray, slack: np.ndarray
) -> tuple[int, int]:
    """Observations agree in every feature; a met-flag may differ only where both severities are within
    ``TIE`` of 0, a forecast ``other_slas`` count only where one of its checks is within ``TIE`` of its
    limit, the suggestion flags only where the ranking had a near tie (``slack``). Returns how many
    ``other_slas`` features and how many rankings sat at such a tie."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape[-1] == want.shape[-1] == NUM_FEATURES, f"{label}: {name} has {got.shape[-1]} features"
    near_limit = np.maximum(got[..., SEVERITY], want[..., SEVERITY]) <= TIE
    skip = np.asarray(slack) <= TIE
    skip[..., MET] |= near_limit
    atol = np.full(NUM_FEATURES, ATOL)
    atol[POSTERIOR] = POSTERIOR_ATOL
    _assert_close(label, name, got, want, skip, atol)
    at_tie = np.asarray(slack) <= TIE
    return int(np.sum(np.delete(at_tie, SUGGESTED, axis=-1))), int(np.sum(at_tie[..., KEEP_SUGGESTED]))


def _compare(label: str, jax_out: dict, py_out: dict) -> tuple[int, np.ndarray]:
    """Compare one trajectory; returns the number of steps with a job-level check at a tie and
    (forecast ``other_slas`` features, suggestion rankings) at a tie."""
    forecast_ties = np.asarray(
        _assert_observations(
            label,
            "reset observation",
            jax_out["first"]["obs"],
            py_out["first"]["obs"],
            py_out["first"]["observation_slack"],
        )
    )
    first_allocation = np.stack([jax_out["first"]["gpus"], jax_out["first"]["cpus"]])
    np.testing.assert_array_equal(first_allocation, py_out["first"]["allocation"], err_msg=label)
    got, want = jax_out["steps"], py_out["steps"]
    info = got["info"]
    for name in ("terminated", "truncated"):
        _assert_close(label, name, got[name], want[name])
    allocation = np.stack([got["gpus"], got["cpus"]], axis=-1)
    _assert_close(label, "allocation (gpus, cpus)", allocation, want["allocation"], skip=False)
    forecast_ties += _assert_observations(
        label, "observation", got["obs"], want["obs"], want["observation_slack"]
    )
    forecast_ties += _assert_observations(
        label,
        "final_observation",
        info["final_observation"],
        want["final_observation"],
        want["final_observation_slack"],
    )
    missing = sorted(set(info) - {name.split("/")[0] for name in want})
    assert not missing, f"the Python job lacks info entries {missing}"
    # The pre-reset state, field by field (every field the Python job keeps; job constants included).
    state_paths = [name for name in want if name.startswith("final_state/")]
    assert len(state_paths) >= 45
    for path in state_paths:
        _assert_close(label, f"info[{path!r}]", _state_leaf(info["final_state"], path), want[path])
    for name in sorted(set(info) - set(SPECIAL_INFO)):
        _assert_close(label, f"info[{name!r}]", info[name], want[name])
    near_limit = np.maximum(info["severities"], want["severities"]) <= TIE
    _assert_close(label, "info['sla_met']", info["sla_met"], want["sla_met"], skip=near_limit)
    # A job-level check at a tie may flip, and with it the end-of-job SLA reward of the last step.
    job_tie = np.any(np.abs(want["job_sla_slack"]) <= TIE, axis=-1)
    for name in JOB_FLAGS:
        skip = job_tie.reshape(job_tie.shape + (1,) * (np.ndim(want[name]) - 1))
        _assert_close(label, f"info[{name!r}]", info[name], want[name], skip=skip)
    reward_skip = np.zeros(want["reward"].shape, bool)
    reward_skip[:, 2] = job_tie & want["terminated"]
    _assert_close(label, "reward", got["reward"], want["reward"], skip=reward_skip)
    return int(np.sum(job_tie)), forecast_ties


def _check_action_set(action_set: str, cases: dict[str, EnvParams]) -> None:
    """Run every case x seed through the JAX env with ``action_set`` and replay it in Python."""
    env = JobAllocationEnv(action_set=action_set)
    names = list(cases)
    longest = max(int(np.max(np.asarray(p.workloads.epochs_max))) for p in cases.values())
    num_steps = 2 * longest  # at least two whole episodes, so every trajectory crosses an auto-reset
    batch = [(name, seed) for name in names for seed in SEEDS]
    stacked = jax.tree.map(lambda *leaves: jnp.stack(leaves), *(cases[name] for name, _ in batch))
    keys = jnp.stack([jax.random.key(seed) for _, seed in batch])
    run = jax.jit(jax.vmap(lambda p, k: _jax_trajectory(env, p, k, num_steps)))
    outputs = jax.device_get(run(stacked, keys))

    job_ties, forecast_ties, ranking_ties = 0, 0, 0
    actions_seen = set()
    for i, (name, seed) in enumerate(batch):
        jax_out = jax.tree.map(lambda x, i=i: x[i], outputs)
        steps = jax_out["steps"]
        actions_seen.update(np.asarray(steps["action"]).tolist())
        py_out = _python_trajectory(
            cases[name], action_set, jax_out["first"]["u"], steps["u"], steps["action"]
        )
        label = f"{action_set}: {name} seed={seed}"
        ties = _compare(label, jax_out, py_out)
        job_ties += ties[0]
        forecast_ties += int(ties[1][0])
        ranking_ties += int(ties[1][1])
        episodes_ended = int(np.sum(steps["terminated"] | steps["truncated"]))
        assert episodes_ended >= 2, f"{label}: only {episodes_ended} episodes ended in {num_steps} steps"
        if name.startswith("truncated"):
            assert np.any(steps["truncated"]), label
    # Every action of the set was taken, and some outside it on both sides (clipped).
    assert set(range(env.num_actions)) <= actions_seen
    assert min(actions_seen) < 0 and max(actions_seen) >= env.num_actions
    assert job_ties <= 0.01 * len(batch) * num_steps, f"{job_ties} steps had a job-level check at a tie"
    forecast_checks = len(batch) * (2 * num_steps + 1) * (NUM_TARGETS + 1)  # targets and keep, twice
    assert forecast_ties <= 1e-3 * forecast_checks, f"{forecast_ties} forecast SLA counts sat at a tie"
    observations = len(batch) * (2 * num_steps + 1)
    assert ranking_ties <= 0.02 * observations, f"{ranking_ties} of {observations} suggestions sat at a tie"


def test_jax_env_matches_python_job_step_by_step() -> None:
    """The widest set (``targets_relocate``, the default: ``targets`` and relocate): every case."""
    _check_action_set(WIDEST_ACTION_SET, _case_params())


# slow: kept out of the default suite's time budget (run with -m slow)
@pytest.mark.slow
def test_jax_env_matches_python_job_on_the_other_events() -> None:
    """The event kinds the default suite does not replay on their own."""
    others = tuple(name for name in SHIFT_KINDS[1:] if name not in DEFAULT_SUITE_EVENTS)
    _check_action_set("targets", _event_cases(others))


# slow: kept out of the default suite's time budget (run with -m slow)
@pytest.mark.slow
def test_jax_env_matches_python_job_with_the_paper_actions() -> None:
    """The ``paper`` set (the 9 moves; clipping at 8): a few cases."""
    cases = _case_params()
    names = (
        "conflict/mixed",
        "balanced/random",
        "nvlink-cluster-heavy-contention",
        "wide-deviation",
    )
    _check_action_set("paper", {name: cases[name] for name in names})


def test_python_job_takes_jax_arrays_and_clips_actions_like_the_env() -> None:
    """JAX arrays are accepted as uniforms; out-of-range actions clip to the set; unknown sets fail."""
    params = scenario_params("balanced")
    for action_set in ACTION_SETS:
        top = num_actions(action_set) - 1  # the env's count
        u = jnp.stack(d.uniforms(jax.random.key(8), d.STEP_DRAWS + d.RESET_DRAWS))
        outs = []
        for action in (top, top + 1, 10_000):
            job = PythonJob(params, action_set)
            obs = job.reset(jnp.stack(d.uniforms(jax.random.key(7), d.RESET_DRAWS)))
            assert len(obs) == NUM_FEATURES and job.num_actions == action_count(action_set) == top + 1
            outs.append(job.step(u[: d.STEP_DRAWS], u[d.STEP_DRAWS :], action)[0])
        assert outs[0] == outs[1] == outs[2]
    with pytest.raises(ValueError, match="unknown action set"):
        PythonJob(params, "absolute")


def test_python_job_numpy_rollout_stays_in_bounds() -> None:
    """The benchmark's loop (NumPy uniforms, float64 draws) keeps observations in [0, 1] and finite."""
    params = scenario_params("mixed").replace(init_strategy=jnp.int32(INIT_STRATEGIES.index("mixed")))
    for action_set in ("targets", "paper"):
        job = PythonJob(params, action_set)
        source = NumpyUniforms(seed=3, block=64, num_actions=job.num_actions)
        job.reset(source.reset_draws())
        total = run_random_steps(job, source, 300)
        assert np.isfinite(total)
        for _ in range(150):
            u_step, u_reset, action = source.next_step()
            obs, reward, _, _, info = job.step(u_step, u_reset, action)
            assert len(obs) == NUM_FEATURES
            assert all(0.0 <= x <= 1.0 for x in obs)
            assert np.all(np.isfinite(reward))
            assert abs(sum(info["weights"]) - 1.0) < 1e-9
            assert job.gpus >= 1 and job.cpus >= 1
    # The default source draws over the default set; a mismatched set is refused.
    default_count = num_actions(DEFAULT_ACTION_SET)
    assert NumpyUniforms(seed=0).num_actions == PythonJob(params).num_actions == default_count
    with pytest.raises(ValueError, match="draws actions over"):
        run_random_steps(PythonJob(params, "paper"), NumpyUniforms(seed=0), 1)

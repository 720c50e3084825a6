"""Mid-run events (``env/shifts.py``), the ``conflict`` and ``shifting`` scenarios, and the
re-planning oracle (``evaluation/replanning.py``)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slamorl_jax.agent.config import TrainConfig
from slamorl_jax.agent.config_checks import validate_config
from slamorl_jax.agent.trainer import env_params_from_config
from slamorl_jax.env import FEATURE_NAMES, JobAllocationEnv, scenario_params, shifts, validate_params
from slamorl_jax.env import draws as d
from slamorl_jax.env.action_sets import RELOCATE_ACTION, WIDEST_ACTION_SET
from slamorl_jax.env.job_model import allocation_price_per_hour, epoch_metrics
from slamorl_jax.env.objectives import preference_vector
from slamorl_jax.env.params import INIT_STRATEGIES, with_values
from slamorl_jax.env.plans import plan_outcomes
from slamorl_jax.env.scenario_kinds import SCENARIO_KINDS
from slamorl_jax.evaluation.baselines import BestStatic, ProfileBestStatic
from slamorl_jax.evaluation.replanning import Replanning

ENV = JobAllocationEnv(action_set=WIDEST_ACTION_SET)  # every set's actions, relocate included
NUM_JOBS = 20_000


@jax.jit
def _reset_batch(keys: jax.Array, params) -> object:
    """Reset states of a batch of keys (one compilation for every scenario's params)."""
    return jax.vmap(lambda k: ENV.reset(k, params)[1])(keys)


@functools.cache
def _jobs(scenario: str):
    """``NUM_JOBS`` fresh jobs of a scenario (their reset states)."""
    return _reset_batch(jax.random.split(jax.random.key(7), NUM_JOBS), scenario_params(scenario))


def _within(count: int, n: int, p: float, sigmas: float = 4.5) -> bool:
    return abs(count - n * p) <= sigmas * np.sqrt(n * p * (1 - p)) + 1


@pytest.mark.parametrize("scenario,share", [("shifting", 1.0), ("mixed", shifts.DEFAULT_MIXED_SHIFT_PROB)])
def test_events_happen_at_the_documented_rates(scenario: str, share: float) -> None:
    jobs = _jobs(scenario).job
    kind = np.asarray(jobs.shift_kind)
    epochs = np.asarray(jobs.epochs)
    at = np.asarray(jobs.shift_epoch)
    counts = np.bincount(kind, minlength=shifts.NUM_SHIFT_KINDS)
    assert _within(counts[0], NUM_JOBS, 1.0 - share)
    for k in range(1, shifts.NUM_SHIFT_KINDS):
        assert _within(counts[k], NUM_JOBS, share / (shifts.NUM_SHIFT_KINDS - 1)), (k, counts)
    low = np.maximum(np.round(np.float32(0.2) * epochs.astype(np.float32)), 1)
    high = np.maximum(np.round(np.float32(0.7) * epochs.astype(np.float32)), low)
    assert np.all((at >= low) & (at <= high))
    # Uniform over the range: the mean position sits at its middle (long jobs, many values).
    long = epochs >= 50
    position = (at[long] - low[long]) / np.maximum(high[long] - low[long], 1)
    assert abs(position.mean() - 0.5) < 0.02
    value = np.asarray(jobs.shift_value)
    for k, (lo, hi) in enumerate(
        zip(shifts.DEFAULT_SHIFT_SIZE_LOW, shifts.DEFAULT_SHIFT_SIZE_HIGH, strict=True)
    ):
        if k in (shifts.SLOW_NODE, shifts.PRICE_RISE, shifts.PREEMPTION):
            v = value[kind == k]
            assert v.min() >= lo - 1e-6 and v.max() <= hi + 1e-6
            if hi > lo:
                assert abs(v.mean() - 0.5 * (lo + hi)) < 0.05 * (hi - lo) + 1e-3
    targets = jobs.sla_targets
    for k, name in ((shifts.DEADLINE_CUT, "deadline_s"), (shifts.BUDGET_CUT, "budget_usd")):
        mine = kind == k
        before = np.asarray(getattr(targets, name))[mine]
        cut = value[mine]
        assert np.all(cut <= before * (1 + 1e-6)) and np.all(cut >= 0.6 * before * (1 - 1e-6))
        assert np.mean(cut < 0.99 * before) > 0.3  # the floors leave most cuts in place


def test_event_share_sets_the_share_of_training_jobs_that_meet_an_event() -> None:
    """``train --event_share`` overrides the scenario's share of jobs with an event (here on
    deadline-critical jobs, which have none of their own), every kind equally likely; unset keeps
    the scenario's, and a config saved before the flag reads as unset."""
    config = validate_config(TrainConfig(scenario="deadline-critical", event_share=0.5))
    jobs = _reset_batch(jax.random.split(jax.random.key(3), NUM_JOBS), env_params_from_config(config)).job
    counts = np.bincount(np.asarray(jobs.shift_kind), minlength=shifts.NUM_SHIFT_KINDS)
    assert _within(counts[0], NUM_JOBS, 0.5)
    for k in range(1, shifts.NUM_SHIFT_KINDS):
        assert _within(counts[k], NUM_JOBS, 0.5 / (shifts.NUM_SHIFT_KINDS - 1)), (k, counts)
    unset = env_params_from_config(TrainConfig())
    np.testing.assert_array_equal(unset.shift_probs, scenario_params("mixed").shift_probs)
    legacy = {k: v for k, v in TrainConfig().__dict__.items() if k != "event_share"}
    assert TrainConfig.from_dict(legacy).event_share is None
    with pytest.raises(ValueError, match=r"--event_share must be in \[0, 1\]"):
        validate_config(TrainConfig(event_share=1.5))


def test_reallocation_pause_sets_the_restart_pause_of_training_jobs() -> None:
    """``train --reallocation_pause_s`` sets the pause of a GPU change or a relocation in the
    training env (and so in ``evaluate`` and ``recommend``, which build the env from the config);
    unset keeps the environment's, a config saved before the flag reads as unset, and a pause
    outside [0, 3600] s is refused."""
    pause = env_params_from_config(validate_config(TrainConfig(reallocation_pause_s=120.0)))
    assert float(pause.reallocation_pause_s) == 120.0
    unset = env_params_from_config(TrainConfig())
    assert float(unset.reallocation_pause_s) == float(scenario_params("mixed").reallocation_pause_s)
    assert float(pause.cpu_reallocation_pause_s) == float(unset.cpu_reallocation_pause_s)
    legacy = {k: v for k, v in TrainConfig().__dict__.items() if k != "reallocation_pause_s"}
    assert TrainConfig.from_dict(legacy).reallocation_pause_s is None
    for bad in (-1.0, 4000.0):
        with pytest.raises(ValueError, match=r"--reallocation_pause_s must be in \[0, 3600\]"):
            validate_config(TrainConfig(reallocation_pause_s=bad))
    with pytest.raises(ValueError, match="--reallocation_pause_s must be a finite number"):
        validate_config(TrainConfig(reallocation_pause_s=float("nan")))


def test_conflict_pairs_each_tight_sla_with_the_opposed_preference() -> None:
    jobs = _jobs("conflict").job
    scenario = np.asarray(jobs.scenario)
    preference = np.asarray(jobs.preference)
    critical = scenario == SCENARIO_KINDS.index("deadline-critical")
    constrained = scenario == SCENARIO_KINDS.index("budget-constrained")
    assert np.all(critical | constrained) and _within(int(critical.sum()), NUM_JOBS, 0.5)
    np.testing.assert_allclose(
        preference[critical], np.broadcast_to(preference_vector("cost"), (critical.sum(), 3))
    )
    np.testing.assert_allclose(
        preference[constrained], np.broadcast_to(preference_vector("time"), (constrained.sum(), 3))
    )
    assert np.all(np.asarray(jobs.shift_kind) == shifts.NONE)


def _one_kind(kind: int, **values) -> object:
    """``shifting`` with every job meeting ``kind`` after its first epoch, starting at its request."""
    params = with_values(
        scenario_params("shifting"),
        shift_probs=np.eye(shifts.NUM_SHIFT_KINDS)[kind],
        shift_at_low=0.0,
        shift_at_high=0.0,
        init_strategy=INIT_STRATEGIES.index("requested"),
        **values,
    )
    return validate_params(params)


KEEP, ADD_GPU, ADD_CPU_STEP = 4, 7, 5  # paper moves: keep, +1 GPU, +1 CPU step


@jax.jit
def _three_epochs_batch(keys: jax.Array, params, second_action: jax.Array) -> tuple:
    """States at reset and after epochs 1, 2 and 3 of each key's job: keep, ``second_action``, keep."""

    def run(key):
        _, s0 = ENV.reset(key, params)
        states = [s0]
        for epoch, action in enumerate((KEEP, second_action, KEEP), start=1):
            u = d.uniforms(jax.random.fold_in(key, epoch), d.STEP_DRAWS)
            states.append(ENV.transition(u, states[-1], action, params)[0])
        return tuple(states)

    return jax.vmap(run)(keys)


def _first_epochs(params, second_action: int = KEEP, num_jobs: int = 256):
    """States at reset and after epochs 1 (the event), 2 (after ``second_action``) and 3 (keep); and
    which jobs run epochs 2 and 3 after their event."""
    keys = jax.random.split(jax.random.key(3), num_jobs)
    s0, s1, s2, s3 = _three_epochs_batch(keys, params, jnp.int32(second_action))
    live = np.asarray(s0.job.epochs) > 3  # the event happens (at epoch 1 < epochs) and epochs 2, 3 run
    return s0, s1, s2, s3, live


def _first_two_epochs(params):
    """States at reset, after epoch 1 (the event) and after epoch 2, keeping the allocation; and
    which jobs run both epochs after their event."""
    s0, s1, s2, _, live = _first_epochs(params)
    return s0, s1, s2, live


def test_a_deadline_cut_and_a_budget_cut_set_the_new_targets() -> None:
    for kind, name in ((shifts.DEADLINE_CUT, "deadline_s"), (shifts.BUDGET_CUT, "budget_usd")):
        s0, s1, _, live = _first_two_epochs(_one_kind(kind))
        after = np.asarray(getattr(s1.job.sla_targets, name))[live]
        np.testing.assert_array_equal(after, np.asarray(s0.job.shift_value)[live])
        assert np.all(after <= np.asarray(getattr(s0.job.sla_targets, name))[live])


def test_a_price_rise_reprices_the_allocation_at_once() -> None:
    params = _one_kind(shifts.PRICE_RISE)
    s0, s1, _, live = _first_two_epochs(params)
    factor = np.asarray(s0.job.shift_value)
    risen = allocation_price_per_hour(
        s0.job.profile.gpu_price_per_hour * factor,
        s1.gpus.astype(jnp.float32),
        s1.cpus.astype(jnp.float32),
        params,
    )
    np.testing.assert_allclose(np.asarray(s1.price_per_hour)[live], np.asarray(risen)[live], rtol=1e-6)
    assert np.all(np.asarray(s1.price_per_hour)[live] > np.asarray(s0.price_per_hour)[live])


def test_a_preemption_restarts_the_job_on_half_its_gpus_and_bills_the_pause() -> None:
    params = _one_kind(shifts.PREEMPTION, epoch_time_noise=0.0)
    s0, s1, s2, live = _first_two_epochs(params)
    gpus0, cpus0 = np.asarray(s0.gpus), np.asarray(s0.cpus)
    # The event happens after epoch 1; the job restarts on half its GPUs before epoch 2 (keep).
    np.testing.assert_array_equal(np.asarray(s1.gpus), gpus0)
    np.testing.assert_array_equal(np.asarray(s2.gpus)[live], np.maximum(gpus0 // 2, 1)[live])
    moved = live & ((np.asarray(s2.gpus) != gpus0) | (np.asarray(s2.cpus) != cpus0))
    assert moved.sum() > 20
    # Epoch 2's interval = its epoch (no noise, keep) + the restart pause, billed at its price.
    interval = np.asarray(s2.elapsed_s) - np.asarray(s1.elapsed_s)
    restart = interval - np.asarray(s2.epoch_time_s)
    np.testing.assert_allclose(restart[moved], params.reallocation_pause_s, rtol=1e-4, atol=1e-2)
    np.testing.assert_allclose(restart[live & ~moved], 0.0, atol=1e-2)
    cost = np.asarray(s2.cost_usd) - np.asarray(s1.cost_usd)
    np.testing.assert_allclose(
        cost[live], (interval * np.asarray(s2.price_per_hour) / 3600.0)[live], rtol=1e-4
    )
    assert np.all(np.asarray(s2.reallocations) == 0)  # not the agent's move


QUIET = {"epoch_time_noise": 0.0, "contention_start_prob": 0.0, "contention_end_prob": 1.0}


def _epoch_times(states, params, compute_factor, contended: bool) -> np.ndarray:
    """Noise-free epoch times of ``states``' allocations on their jobs' true constants with the
    compute time x ``compute_factor`` (per job), contended or not."""

    def one(s, factor):
        running = s.job.constants.replace(compute_s=s.job.constants.compute_s * factor)
        return epoch_metrics(running, s.gpus, s.cpus, params, contended).epoch_time_s

    factor = jnp.broadcast_to(jnp.asarray(compute_factor, jnp.float32), states.gpus.shape)
    return np.asarray(jax.vmap(one)(states, factor))


@pytest.mark.parametrize("kind", [shifts.SLOW_NODE, shifts.CONTENTION])
def test_a_slow_node_and_a_contention_spell_slow_the_later_epochs(kind: int) -> None:
    params = _one_kind(kind, **QUIET)
    s0, s1, s2, s3, live = _first_epochs(params)
    factor = np.asarray(s0.job.shift_value) if kind == shifts.SLOW_NODE else 1.0
    spell = kind == shifts.CONTENTION
    # The job's true constants stay its own (the slowdown is its nodes'), the profile too.
    for part in ("constants", "profile"):
        before, after = (np.asarray(getattr(s.job, part).compute_s) for s in (s0, s1))
        np.testing.assert_array_equal(after, before)
    np.testing.assert_allclose(np.asarray(s1.epoch_time_s), _epoch_times(s1, params, 1.0, False), rtol=1e-5)
    for later in (s2, s3):
        expected = _epoch_times(later, params, factor, spell)
        np.testing.assert_allclose(np.asarray(later.epoch_time_s)[live], expected[live], rtol=1e-5)
        assert np.all(np.asarray(later.epoch_time_s)[live] > np.asarray(s1.epoch_time_s)[live])
    assert not np.any(np.asarray(s2.contended))  # the spell is the event's, not the random process's
    assert not np.any(np.asarray(s3.event_left))
    # The observation's surprise shows the first slowed epoch against what the job had measured.
    slowdown = np.log(_epoch_times(s2, params, factor, spell) / _epoch_times(s2, params, 1.0, False))
    visible = live & (slowdown > 0.1)  # (a job barely slowed is within what one epoch leaves unlearned)
    assert visible.sum() > 100 and np.all(np.asarray(s2.surprise)[visible] > 0.5 * slowdown[visible])
    first_job = jax.tree.map(lambda x: x[0], s2)
    surprise = np.asarray(ENV.get_obs(first_job, params))[FEATURE_NAMES.index("surprise")]
    np.testing.assert_allclose(surprise, 0.5 + 0.5 * np.tanh(2.0 * float(s2.surprise[0])), rtol=1e-6)


def test_an_epoch_like_those_before_it_is_less_and_less_of_a_surprise() -> None:
    # Noise-free epochs at one allocation: the first shows the job's deviation from its profile,
    # the next ones only what the model's prior still holds back.
    _, s1, s2, s3, live = _first_epochs(_one_kind(shifts.NONE, **QUIET))
    first, second, third = (np.abs(np.asarray(s.surprise))[live] for s in (s1, s2, s3))
    assert second.mean() < 0.25 * first.mean() and np.all(third <= second + 1e-6)


@pytest.mark.parametrize("kind", [shifts.SLOW_NODE, shifts.CONTENTION])
def test_a_gpu_change_leaves_the_nodes_event_for_good_and_a_cpu_change_does_not(kind: int) -> None:
    params = _one_kind(kind, **QUIET)
    s0, _, s2, s3, live = _first_epochs(params, ADD_GPU)
    moved = live & (np.asarray(s2.gpus) != np.asarray(s0.gpus))
    assert moved.sum() > 100
    assert np.all(np.asarray(s3.event_left)[moved]) and not np.any(np.asarray(s3.event_left)[live & ~moved])
    for later in (s2, s3):  # healthy from the move on
        healthy = _epoch_times(later, params, 1.0, False)
        np.testing.assert_allclose(np.asarray(later.epoch_time_s)[moved], healthy[moved], rtol=1e-5)
    s0, _, s2, s3, live = _first_epochs(params, ADD_CPU_STEP)
    changed = live & (np.asarray(s2.cpus) != np.asarray(s0.cpus))
    assert changed.sum() > 100 and not np.any(np.asarray(s3.event_left))
    factor = np.asarray(s0.job.shift_value) if kind == shifts.SLOW_NODE else 1.0
    for later in (s2, s3):  # still on the same nodes
        slowed = _epoch_times(later, params, factor, kind == shifts.CONTENTION)
        np.testing.assert_allclose(np.asarray(later.epoch_time_s)[changed], slowed[changed], rtol=1e-5)


@pytest.mark.parametrize("kind", [shifts.SLOW_NODE, shifts.CONTENTION])
@pytest.mark.parametrize("leave", [True, False])
def test_relocating_keeps_the_allocation_pays_one_gpu_pause_and_leaves_the_nodes_event(
    kind: int, leave: bool
) -> None:
    """``targets_relocate``'s relocate: the same GPUs and CPUs, the GPU re-allocation pause billed
    at the allocation's price and counted as a re-allocation; from then on healthy epochs (the
    event left for good), unless the fresh-nodes rule is off, when it leaves nothing."""
    params = _one_kind(kind, moves_leave_contention=leave, **QUIET)
    s0, s1, s2, s3, live = _first_epochs(params, RELOCATE_ACTION)
    assert live.sum() > 100
    for field in ("gpus", "cpus"):
        np.testing.assert_array_equal(np.asarray(getattr(s2, field)), np.asarray(getattr(s0, field)))
    interval = np.asarray(s2.elapsed_s) - np.asarray(s1.elapsed_s)
    pause = interval - np.asarray(s2.epoch_time_s)
    np.testing.assert_allclose(pause[live], params.reallocation_pause_s, rtol=1e-4, atol=1e-2)
    cost = np.asarray(s2.cost_usd) - np.asarray(s1.cost_usd)
    billed = interval * np.asarray(s2.price_per_hour) / 3600.0
    np.testing.assert_allclose(cost[live], billed[live], rtol=1e-4)
    assert np.all(np.asarray(s2.reallocations)[live] == 1) and np.all(np.asarray(s3.reallocations)[live] == 1)
    assert np.all(np.asarray(s3.event_left)[live] == leave)
    factor = np.asarray(s0.job.shift_value) if kind == shifts.SLOW_NODE and not leave else 1.0
    for later in (s2, s3):
        expected = _epoch_times(later, params, factor, kind == shifts.CONTENTION and not leave)
        np.testing.assert_allclose(np.asarray(later.epoch_time_s)[live], expected[live], rtol=1e-5)


@pytest.mark.parametrize("kind", [shifts.SLOW_NODE, shifts.CONTENTION])
def test_without_the_fresh_nodes_rule_a_gpu_change_leaves_nothing(kind: int) -> None:
    params = _one_kind(kind, moves_leave_contention=False, **QUIET)
    s0, _, s2, s3, live = _first_epochs(params, ADD_GPU)
    moved = live & (np.asarray(s2.gpus) != np.asarray(s0.gpus))
    assert moved.sum() > 100 and not np.any(np.asarray(s3.event_left))
    factor = np.asarray(s0.job.shift_value) if kind == shifts.SLOW_NODE else 1.0
    for later in (s2, s3):
        slowed = _epoch_times(later, params, factor, kind == shifts.CONTENTION)
        np.testing.assert_allclose(np.asarray(later.epoch_time_s)[moved], slowed[moved], rtol=1e-5)


def test_a_gpu_change_or_a_relocation_leaves_random_contention_and_a_cpu_change_does_not() -> None:
    # Contended from the start and for ever, unless a move lands the job on fresh nodes, which stay
    # uncontended (a new spell starts with probability 1e-9 an epoch).
    params = validate_params(
        with_values(
            scenario_params("balanced"),
            epoch_time_noise=0.0,
            contention_start_prob=1e-9,
            contention_end_prob=0.0,
            init_strategy=INIT_STRATEGIES.index("requested"),
        )
    )
    s0, s1, s2, s3, live = _first_epochs(params, ADD_GPU)
    assert np.all(np.asarray(s0.contended)) and np.all(np.asarray(s1.contended))
    moved = live & (np.asarray(s2.gpus) != np.asarray(s1.gpus))
    assert moved.sum() > 100
    assert not np.any(np.asarray(s3.contended)[moved]) and np.all(np.asarray(s3.contended)[live & ~moved])
    healthy = _epoch_times(s3, params, 1.0, False)
    np.testing.assert_allclose(np.asarray(s3.epoch_time_s)[moved], healthy[moved], rtol=1e-5)
    _, s1, s2, s3, live = _first_epochs(params, ADD_CPU_STEP)
    assert np.all(np.asarray(s3.contended)[live])
    _, s1, s2, s3, live = _first_epochs(params, RELOCATE_ACTION)  # the same allocation, fresh nodes
    assert live.sum() > 100 and not np.any(np.asarray(s3.contended)[live])
    np.testing.assert_allclose(
        np.asarray(s3.epoch_time_s)[live], _epoch_times(s3, params, 1.0, False)[live], rtol=1e-5
    )


def test_the_profile_oracle_knows_neither_the_hidden_constants_nor_the_event() -> None:
    """``best_static_profile`` chooses from what is known before a job runs: another event (kind,
    epoch, size) or other true constants leave its choice as it is, and it is the oracle's choice
    for the job with its profile and no event. It used to plan with the event, which no agent
    knows before it happens."""
    params = scenario_params("shifting")
    profile_oracle = ProfileBestStatic.for_params(params)
    states = jax.tree.map(lambda x: x[:256], _jobs("shifting"))
    choose = jax.jit(jax.vmap(lambda s: profile_oracle(s, params)))
    chosen = np.asarray(choose(states))
    job = states.job

    def scaled(x: jax.Array) -> jax.Array:
        return x * 1.3 if jnp.issubdtype(x.dtype, jnp.floating) else x

    other = job.replace(
        shift_kind=job.shift_kind % (shifts.NUM_SHIFT_KINDS - 1) + 1,  # every job another event kind
        shift_epoch=job.shift_epoch // 2,
        shift_value=job.shift_value * 0.8,
        constants=jax.tree.map(scaled, job.constants),
    )
    np.testing.assert_array_equal(np.asarray(choose(states.replace(job=other))), chosen)
    oracle = BestStatic.for_params(params)
    known = job.replace(constants=job.profile, shift_kind=jnp.zeros_like(job.shift_kind))
    by_oracle = jax.jit(jax.vmap(lambda s: oracle(s, params)))(states.replace(job=known))
    np.testing.assert_array_equal(np.asarray(by_oracle), chosen)


def test_the_replanning_oracle_is_the_static_oracle_without_events() -> None:
    params = scenario_params("balanced")
    oracle = BestStatic.for_params(params)
    replan = Replanning(oracle)
    states = _jobs("balanced")
    first = jax.tree.map(lambda x: x[:256], states)
    static = jax.jit(jax.vmap(lambda s: oracle(s, params)))(first)
    start = jax.jit(jax.vmap(lambda s: replan(s, params)))(first)
    placed = jax.vmap(lambda s, g, c: ENV.place(s, g, c, params))(first, *start)
    plan = jax.jit(jax.vmap(lambda s: replan.plan(s, params)))(placed)

    # Same SLAs met and objective as the static choice (the first allocation may be a target
    # that ties with it), and nothing to move to.
    def outcome(s, g, c):
        met, obj = plan_outcomes(s.job, g, c, g, c, False, params)
        return jnp.sum(met), obj

    a = jax.vmap(outcome)(first, *static)
    b = jax.vmap(outcome)(first, *start)
    np.testing.assert_array_equal(np.asarray(a[0]), np.asarray(b[0]))
    np.testing.assert_allclose(np.asarray(a[1]), np.asarray(b[1]), rtol=1e-6)
    assert np.all(np.asarray(plan) == 0)


def test_a_relocating_replanning_oracle_plans_no_worse_and_relocates_once_right_after_the_event() -> None:
    """With relocation among its choices (the anchor of ``targets_relocate`` policies) the oracle's
    plan is never worse on the model than without it; it relocates on some jobs a slower node hits,
    and its controller asks for it once, right after the event."""
    params = _one_kind(shifts.SLOW_NODE)
    oracle = BestStatic.for_params(params)
    plain, relocating = Replanning(oracle), Replanning(oracle, relocate=True)
    first = _reset_batch(jax.random.split(jax.random.key(9), 128), params)
    then = params.target_allocation

    def outcome(replan, s):
        g, c = replan(s, params)
        placed = ENV.place(s, g, c, params)
        choice = replan.plan(placed, params)
        k = jnp.clip(choice - 1, 0, then.shape[0] - 1)
        relocate = choice == 1 + then.shape[0]
        met, obj = plan_outcomes(s.job, g, c, then[k, 0], then[k, 1], choice > 0, params, relocate)
        acts = [replan.act(choice, placed.replace(epoch=s.job.shift_epoch + i), params) for i in (-1, 0, 1)]
        return jnp.sum(met), obj, relocate, jnp.stack(acts)

    run = jax.jit(jax.vmap(outcome, in_axes=(None, 0)), static_argnums=0)
    met0, obj0, _, _ = (np.asarray(x) for x in run(plain, first))
    met1, obj1, relocates, acts = (np.asarray(x) for x in run(relocating, first))
    assert np.all(met1 >= met0)
    same = met1 == met0
    assert np.all(obj1[same] <= obj0[same] * (1 + 1e-5))
    assert relocates.mean() > 0.05
    np.testing.assert_array_equal(
        acts[relocates], np.tile([KEEP, RELOCATE_ACTION, KEEP], (relocates.sum(), 1))
    )


def test_the_replanning_oracle_never_plans_worse_than_the_static_oracle() -> None:
    params = scenario_params("shifting")
    oracle = BestStatic.for_params(params)
    replan = Replanning(oracle)
    first = jax.tree.map(lambda x: x[:512], _jobs("shifting"))
    then_gpus, then_cpus = params.target_allocation[:, 0], params.target_allocation[:, 1]

    def both(s):
        g, c = oracle(s, params)
        static = plan_outcomes(s.job, g, c, g, c, False, params)
        g1, c1 = replan(s, params)
        choice = replan.plan(ENV.place(s, g1, c1, params), params)
        k = jnp.maximum(choice - 1, 0)
        planned = plan_outcomes(s.job, g1, c1, then_gpus[k], then_cpus[k], choice > 0, params)
        return jnp.sum(static[0]), static[1], jnp.sum(planned[0]), planned[1], choice

    static_met, static_obj, met, obj, choice = (np.asarray(x) for x in jax.jit(jax.vmap(both))(first))
    assert np.all(met >= static_met)
    same = met == static_met
    assert np.all(obj[same] <= static_obj[same] * (1 + 1e-5))
    # It does move on some jobs, and strictly gains on some (a preemption above all).
    assert np.mean(choice > 0) > 0.05
    assert np.mean((met > static_met) | (obj < static_obj * (1 - 1e-3))) > 0.05


@functools.partial(jax.jit, static_argnums=(3,))
def _run_with_one_move(s0, keys, params, horizon: int, move: jax.Array):
    """Each job of ``s0`` run noise-free to its end, keeping, except ``move`` right after its event."""

    def run(state, key):
        def epoch(s, i):
            action = jnp.where(s.epoch == s.job.shift_epoch, move, KEEP)
            u = d.uniforms(jax.random.fold_in(key, i), d.STEP_DRAWS)
            after = ENV.transition(u, s, action, params)[0]
            done = s.epoch >= s.job.epochs
            return jax.tree.map(lambda old, new: jnp.where(done, old, new), s, after), None

        return jax.lax.scan(epoch, state, jnp.arange(horizon))[0]

    return jax.vmap(run)(s0, keys)


@pytest.mark.parametrize("kind", [shifts.SLOW_NODE, shifts.CONTENTION])
@pytest.mark.parametrize("leave", [True, False])
@pytest.mark.parametrize("move", [ADD_GPU, RELOCATE_ACTION])
def test_the_plans_model_matches_a_noise_free_run_that_leaves_the_nodes(
    kind: int, leave: bool, move: int
) -> None:
    # Held at the request through the event (after epoch 1), then one more GPU for the rest, or
    # relocated right after it: the plan's time and cost (objective) are the env's, the slowdown
    # gone from the move on (kept through it without the fresh-nodes rule).
    params = _one_kind(kind, moves_leave_contention=leave, **QUIET)
    s0 = jax.tree.map(lambda x: x[:128], _reset_batch(jax.random.split(jax.random.key(5), 128), params))
    horizon = int(np.asarray(s0.job.epochs).max())
    keys = jax.random.split(jax.random.key(6), 128)
    ends = _run_with_one_move(s0, keys, params, horizon, jnp.int32(move))
    relocate = move == RELOCATE_ACTION

    def planned(s, end):  # where the move landed (clipped to the cluster as the env clips it)
        return plan_outcomes(s.job, s.gpus, s.cpus, end.gpus, end.cpus, True, params, relocate)[1]

    job = s0.job
    w_time, w_cost = np.asarray(job.preference[:, 0]), np.asarray(job.preference[:, 1])
    ran = (
        w_time * np.asarray(ends.elapsed_s) / np.asarray(job.time_ref_s)
        + w_cost * np.asarray(ends.cost_usd) / np.asarray(job.cost_ref_usd)
    ) / np.maximum(w_time + w_cost, 1e-9)
    happened = np.asarray(shifts.happens(job))
    left = np.asarray(ends.event_left)
    moved = (np.asarray(ends.gpus) != np.asarray(s0.gpus)) | relocate
    np.testing.assert_array_equal(left, happened & moved & leave)
    assert left.mean() > 0.5 or not leave
    np.testing.assert_allclose(ran, np.asarray(jax.jit(jax.vmap(planned))(s0, ends)), rtol=2e-4)

"""Hidden truth and the online model: the agent never sees a job's true constants, only its profile
and what it measured; ``true_time_ratio`` is exact; the posterior is Bayesian linear regression."""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.extend as jex
import jax.numpy as jnp
import numpy as np
import pytest

from slamorl_jax.env import (
    DEFAULT_ACTION_SET,
    FEATURE_NAMES,
    INIT_STRATEGIES,
    NO_OP_ACTION,
    EnvParams,
    EnvState,
    JobAllocationEnv,
    draws,
    num_actions,
    observe,
    scenario_params,
    validate_params,
    with_derived_tables,
)
from slamorl_jax.env.action_sets import NUM_TARGETS
from slamorl_jax.env.actions import NUM_ACTIONS as NUM_MOVES
from slamorl_jax.env.job_model import epoch_metrics, job_constants_table
from slamorl_jax.env.job_truth import DEFAULT_DEVIATION_LIMIT_SD, true_constants, true_time_ratio
from slamorl_jax.env.online_model import empty_stats, posterior_deviation, record_epoch
from slamorl_jax.env.params import with_values
from slamorl_jax.env.shifts import no_shift_probs
from slamorl_jax.env.static_allocations import lattice_metrics, search_lattice

NUM_JOBS = 64
COMPUTE_DEV = FEATURE_NAMES.index("compute_dev")
SYNC_DEV = FEATURE_NAMES.index("sync_dev")
THROUGHPUT = FEATURE_NAMES.index("throughput")  # a measured reading


@pytest.fixture(scope="module")
def params(env: JobAllocationEnv) -> EnvParams:
    """Defaults with ``mixed`` starts (cold, requested and random allocations in one batch)."""
    return validate_params(with_values(env.default_params, init_strategy=INIT_STRATEGIES.index("mixed")))


@pytest.fixture(scope="module")
def batch_reset(env: JobAllocationEnv) -> Callable:
    """jit(vmap(reset)) over keys."""
    return jax.jit(jax.vmap(env.reset, in_axes=(0, None)))


@pytest.fixture(scope="module")
def batch_step(env: JobAllocationEnv) -> Callable:
    """jit(vmap(step)) over keys, states and actions."""
    return jax.jit(jax.vmap(env.step, in_axes=(0, 0, 0, None)))


@pytest.fixture(scope="module")
def batch_observe() -> Callable:
    """jit(vmap(observe)) over states."""
    return jax.jit(jax.vmap(observe, in_axes=(0, None)))


def keys(seed: int, n: int = NUM_JOBS) -> jax.Array:
    return jax.random.split(jax.random.key(seed), n)


def with_other_truth(state: EnvState, deviation: jax.Array) -> EnvState:
    """``state`` whose job has other hidden fields: the true constants of ``deviation`` (the profile's
    compute and sync scaled by it), that deviation, and other true references (time_ref_s, cost_ref_usd)."""
    job = state.job
    return state.replace(
        job=job.replace(
            constants=true_constants(job.profile, deviation),
            deviation=deviation,
            time_ref_s=job.time_ref_s * 1.7,
            cost_ref_usd=job.cost_ref_usd * 0.4,
        )
    )


def other_deviation(deviation: jax.Array, params: EnvParams) -> jax.Array:
    """Deviations far from ``deviation`` but inside the range the truth is drawn from (+-2.5 spreads,
    which the online model's posterior is clipped to, so two histories stay apart in it): each term
    moved 1.5 spreads towards the other side of 0."""
    spread = jnp.stack([params.compute_spread, params.sync_spread])
    return deviation - 1.5 * spread * jnp.where(deviation >= 0.0, 1.0, -1.0)


# --- the observation never reads the hidden truth ---------------------------------------------


def test_observe_takes_no_input_from_the_hidden_fields(params: EnvParams, batch_reset: Callable) -> None:
    """Structurally: in the jaxpr of ``observe`` as a function of the hidden job fields (true
    constants, deviation, true references), none of those inputs is used by any operation."""
    _, states = batch_reset(keys(0, 2), params)
    state = jax.tree.map(lambda x: x[0], states)
    hidden = (state.job.constants, state.job.deviation, state.job.time_ref_s, state.job.cost_ref_usd)

    def observe_of_hidden(hidden: tuple) -> jax.Array:
        constants, deviation, time_ref, cost_ref = hidden
        job = state.job.replace(
            constants=constants, deviation=deviation, time_ref_s=time_ref, cost_ref_usd=cost_ref
        )
        return observe(state.replace(job=job), params)

    closed = jax.make_jaxpr(observe_of_hidden)(hidden)
    inputs = set(closed.jaxpr.invars)
    assert len(inputs) == len(jax.tree.leaves(hidden))

    def used(jaxpr: jex.core.Jaxpr) -> set:
        """Variables read by the top-level equations or returned (a sub-jaxpr's inputs are read here)."""
        found = {v for eqn in jaxpr.eqns for v in eqn.invars if not isinstance(v, jex.core.Literal)}
        found |= {v for v in jaxpr.outvars if not isinstance(v, jex.core.Literal)}
        return found

    assert not inputs & used(closed.jaxpr), "observe reads a hidden field of the job"


def test_observation_is_bitwise_unchanged_by_other_truth(
    params: EnvParams, batch_reset: Callable, batch_step: Callable, batch_observe: Callable
) -> None:
    """Reset states, and states a few epochs in, observe bitwise the same with other true constants."""
    _, states = batch_reset(keys(1), params)
    for t in range(3):
        obs = np.asarray(batch_observe(states, params))
        swapped = with_other_truth(states, other_deviation(states.job.deviation, params))
        true_compute = np.asarray(states.job.constants.compute_s)
        assert not np.allclose(np.asarray(swapped.job.constants.compute_s), true_compute)
        np.testing.assert_array_equal(np.asarray(batch_observe(swapped, params)), obs)
        actions = jnp.full((NUM_JOBS,), NUM_MOVES + 5 * t, jnp.int32)  # targets: 1, 2, 3 GPUs
        _, states, *_ = batch_step(keys(10 + t), states, actions, params)


@pytest.mark.parametrize("scenario", ["deadline-critical", "budget-constrained", "mixed", "shifting"])
def test_jobs_drawn_with_other_truth_start_with_the_same_targets_and_observation(
    env: JobAllocationEnv, scenario: str
) -> None:
    """The same jobs drawn twice, only their hidden deviations apart (the fastest and the slowest the
    spread allows): the same SLA targets, mid-run event and first observation, bit for bit. The
    deadline and budget floors were the true job's fastest and cheapest epochs, so a floor that bound
    revealed the true speed in the first observation (349 of 512 deadline-critical jobs differed)."""
    params = scenario_params(scenario, env.catalog)
    u = jax.vmap(lambda k: jnp.stack(draws.uniforms(k, draws.RESET_DRAWS)))(keys(21, 512))
    apart = [
        u.at[:, draws.COMPUTE_DEVIATION].set(q).at[:, draws.SYNC_DEVIATION].set(q) for q in (0.001, 0.999)
    ]
    reset = jax.jit(jax.vmap(env.reset_from_draws, in_axes=(0, None)))
    fast, slow = (reset(x, params) for x in apart)
    assert np.all(np.asarray(fast.job.deviation) < 0) and np.all(np.asarray(slow.job.deviation) > 0)
    for name in ("sla_targets", "shift_kind", "shift_epoch", "shift_value"):
        jax.tree.map(np.testing.assert_array_equal, getattr(fast.job, name), getattr(slow.job, name))
    observe_all = jax.jit(jax.vmap(observe, in_axes=(0, None)))
    np.testing.assert_array_equal(
        np.asarray(observe_all(fast, params)), np.asarray(observe_all(slow, params))
    )


def test_other_truth_changes_observations_only_through_measured_epochs(
    params: EnvParams, batch_reset: Callable, batch_step: Callable, batch_observe: Callable
) -> None:
    """Two copies of each job, stepped with the same key and action, whose true constants differ:
    their observations differ after the epoch; a state with one copy's truth and the other copy's
    measurements (readings, progress, online-model sums) observes exactly as the other copy."""
    _, a = batch_reset(keys(2), params)
    b = with_other_truth(a, other_deviation(a.job.deviation, params))
    np.testing.assert_array_equal(np.asarray(batch_observe(a, params)), np.asarray(batch_observe(b, params)))
    actions = jnp.asarray(np.arange(NUM_JOBS) % num_actions(DEFAULT_ACTION_SET), jnp.int32)
    _, a_next, _, done_a, *_ = batch_step(keys(3), a, actions, params)
    _, b_next, _, done_b, *_ = batch_step(keys(3), b, actions, params)
    assert not np.any(np.asarray(done_a) | np.asarray(done_b))  # every job has >= 2 epochs
    obs_a, obs_b = np.asarray(batch_observe(a_next, params)), np.asarray(batch_observe(b_next, params))
    # The measured epochs differ, and so do the observations (throughput and the model's features).
    assert np.all(np.asarray(a_next.epoch_time_s) != np.asarray(b_next.epoch_time_s))
    assert np.all(np.any(np.asarray(a_next.model_stats) != np.asarray(b_next.model_stats), axis=-1))
    assert np.all(obs_a[:, THROUGHPUT] != obs_b[:, THROUGHPUT])
    # The model's features differ, except where both posteriors sit at the same clip bound (+-2.5
    # spreads: contention can push a measured epoch beyond what the range of the truth explains).
    model = [COMPUTE_DEV, SYNC_DEV]
    differ = np.any(obs_a[:, model] != obs_b[:, model], axis=-1)
    mu_a = np.stack(posterior_deviation(a_next.model_stats, params), axis=-1)
    mu_b = np.stack(posterior_deviation(b_next.model_stats, params), axis=-1)
    limit = DEFAULT_DEVIATION_LIMIT_SD * np.asarray([float(params.compute_spread), float(params.sync_spread)])
    same_bound = np.all((mu_a == mu_b) & np.isclose(np.abs(mu_a), limit, rtol=1e-6), axis=-1)
    assert np.all(differ | same_bound)
    assert np.mean(differ) >= 0.9
    # Same measurement history, other truth: the same observation, bit for bit.
    hybrid = b_next.replace(job=a_next.job)
    assert not np.array_equal(np.asarray(hybrid.job.deviation), np.asarray(b_next.job.deviation))
    np.testing.assert_array_equal(np.asarray(batch_observe(hybrid, params)), obs_b)


# --- the truth itself -------------------------------------------------------------------------


def lattice_ratios(params: EnvParams, deviations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(true / profile uncontended epoch time by ``epoch_metrics``, ``true_time_ratio``) for every
    deviation x (workload, GPU type) x search-lattice allocation."""
    profile = job_constants_table(params)
    gpus, cpus, _ = search_lattice(params)

    @jax.jit
    def ratios(deviations: jax.Array) -> tuple[jax.Array, jax.Array]:
        def one(deviation: jax.Array) -> tuple[jax.Array, jax.Array]:
            truth = lattice_metrics(true_constants(profile, deviation), gpus, cpus, params)
            prof = lattice_metrics(profile, gpus, cpus, params)
            formula = true_time_ratio(
                prof.compute_share, prof.sync_share, profile.gamma[..., None, None], deviation
            )
            return truth.epoch_time_s / prof.epoch_time_s, formula

        return jax.vmap(one)(deviations)

    direct, formula = ratios(jnp.asarray(deviations, jnp.float32))
    return np.asarray(direct), np.asarray(formula)


def deviation_grid(compute: tuple[float, ...], sync: tuple[float, ...]) -> np.ndarray:
    """Every (compute, sync) pair."""
    return np.asarray([[c, s] for c in compute for s in sync])


def ratio_clusters(params: EnvParams) -> list[EnvParams]:
    """This cluster and an 8-GPU NVLink one (other node counts and sync scales)."""
    nvlink = with_values(
        params, gpus_per_node=8, cpus_per_node=96, intra_node_gbps=2400.0, inter_node_gbps=400.0
    )
    return [params, validate_params(with_derived_tables(nvlink))]


def test_true_time_ratio_is_exact_over_the_lattice(params: EnvParams) -> None:
    """``true_time_ratio`` (from the profile's compute and sync shares) equals true / profile epoch time
    over the search lattice, for every workload and GPU type, on two clusters, to float32 precision:
    over the deviations the default spreads draw (up to 2.5 SD) and for deviations up to +-1."""
    c_max = DEFAULT_DEVIATION_LIMIT_SD * float(params.compute_spread)
    s_max = DEFAULT_DEVIATION_LIMIT_SD * float(params.sync_spread)
    usual = deviation_grid((-c_max, -0.1, 0.0, 0.3, c_max), (-s_max, 0.0, 0.1, s_max))
    wider = deviation_grid((-1.0, -0.5, 0.5, 1.0), (-1.0, -0.5, 0.5, 1.0))
    for p in ratio_clusters(params):
        for deviations in (usual, wider):
            direct, formula = lattice_ratios(p, deviations)
            np.testing.assert_allclose(formula, direct, rtol=1e-5)


def test_true_time_ratio_for_the_largest_valid_deviations(params: EnvParams) -> None:
    """Deviations up to the largest validation allows (spreads 2, clipped at 2.5 SD: +-5), on a PCIe
    and an NVLink cluster (where sync is tiny and ``1 - compute_share`` would round it away: the ratio
    was off by 4 % at (0, +5) and 99 % at (-5, +5) before the sync share was computed directly)."""
    extreme = deviation_grid((-5.0, 0.0, 5.0), (-5.0, 0.0, 5.0))
    for p in ratio_clusters(params):
        direct, formula = lattice_ratios(p, extreme)
        np.testing.assert_allclose(formula, direct, rtol=1e-4)


def test_compute_and_sync_shares(params: EnvParams) -> None:
    """The profile's compute share lies in (0, 1], is 1 on one GPU (no sync), and is below 1 for a
    data-parallel job across nodes; the sync share, computed on its own, is 0 without sync, positive
    with it, and the two sum to 1 to float32 precision; on an NVLink cluster, where the sync share is
    tiny, it keeps its value (``1 - compute_share`` rounds it to 0 or to a multiple of 2**-24)."""
    profile = job_constants_table(params)
    gpus, cpus, _ = search_lattice(params)
    m = lattice_metrics(profile, gpus, cpus, params)
    share, sync = np.asarray(m.compute_share), np.asarray(m.sync_share)
    assert np.all((share > 0.0) & (share <= 1.0))
    np.testing.assert_array_equal(share[..., 0, :], 1.0)  # one GPU
    np.testing.assert_array_equal(sync[..., 0, :], 0.0)
    data_parallel = np.asarray(params.workloads.data_parallel)
    np.testing.assert_array_equal(share[~data_parallel], 1.0)  # one replica whatever the GPUs
    np.testing.assert_array_equal(sync[~data_parallel], 0.0)
    assert np.all(share[data_parallel][..., 4, :] < 1.0)  # 5 GPUs: two nodes
    assert np.all(sync[data_parallel][..., 1:, :] > 0.0)  # 2 GPUs or more: sync
    np.testing.assert_allclose(share + sync, 1.0, rtol=0, atol=1e-6)
    # The NVLink cluster: sync shares far below float32's resolution of 1 - s are kept, in float64.
    nvlink = ratio_clusters(params)[1]
    m = lattice_metrics(job_constants_table(nvlink), *search_lattice(nvlink)[:2], nvlink)
    share, sync = np.asarray(m.compute_share, np.float64), np.asarray(m.sync_share, np.float64)
    tiny = (sync > 0.0) & (sync < 1e-6)
    assert np.any(tiny)
    np.testing.assert_allclose(share + sync, 1.0, rtol=0, atol=1e-6)


def test_references_are_the_truth_and_plans_the_profile(params: EnvParams, batch_reset: Callable) -> None:
    """time_ref_s / cost_ref_usd are the TRUE job at its request; throughput_ref and the reset readings
    are the PROFILE's forecast (request and first allocation)."""
    _, s = batch_reset(keys(4, 256), params)
    job = s.job
    truth = epoch_metrics(job.constants, job.requested_gpus, job.requested_cpus, params)
    profile = epoch_metrics(job.profile, job.requested_gpus, job.requested_cpus, params)
    epochs = np.asarray(job.epochs, np.float64)
    time_ref = epochs * np.asarray(truth.epoch_time_s)
    np.testing.assert_allclose(np.asarray(job.time_ref_s), time_ref, rtol=2e-5)
    np.testing.assert_allclose(
        np.asarray(job.cost_ref_usd), time_ref * np.asarray(truth.price_per_hour) / 3600.0, rtol=2e-5
    )
    np.testing.assert_allclose(np.asarray(job.throughput_ref), np.asarray(profile.throughput), rtol=1e-6)
    start = epoch_metrics(job.profile, s.gpus, s.cpus, params)
    np.testing.assert_allclose(np.asarray(s.epoch_time_s), np.asarray(start.epoch_time_s), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(s.gpu_util), np.asarray(start.gpu_util), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(s.model_stats), 0.0)
    # Deviations are drawn within +-2.5 spreads, and both signs occur.
    spread = np.asarray([float(params.compute_spread), float(params.sync_spread)])
    deviation = np.asarray(job.deviation)
    assert np.all(np.abs(deviation) <= DEFAULT_DEVIATION_LIMIT_SD * spread + 1e-6)
    assert np.all(deviation.min(axis=0) < 0.0) and np.all(deviation.max(axis=0) > 0.0)
    # The limit is a param: at 0.5 spreads many draws sit on it (about 62 % of a logistic's beyond).
    _, narrow = batch_reset(keys(4, 256), with_values(params, deviation_limit_sd=0.5))
    bound = 0.5 * spread
    narrow_deviation = np.asarray(narrow.job.deviation)
    assert np.all(np.abs(narrow_deviation) <= bound + 1e-6)
    assert np.mean(np.isclose(np.abs(narrow_deviation), bound, rtol=1e-5)) > 0.3
    stats = record_epoch(
        empty_stats(), jnp.float32(40.0), jnp.float32(1.0), jnp.float32(1.0), jnp.float32(0.0)
    )
    mu = np.asarray(posterior_deviation(stats, with_values(params, deviation_limit_sd=0.5)))
    assert abs(mu[0]) == pytest.approx(0.5 * spread[0], rel=1e-6)  # the posterior keeps to the same range


# --- the online model --------------------------------------------------------------------------


def model_params(params: EnvParams, compute: float, sync: float, noise: float) -> EnvParams:
    """``params`` with the online model's prior spreads and noise."""
    return validate_params(
        with_values(params, compute_spread=compute, sync_spread=sync, forecast_noise=noise)
    )


def test_posterior_is_zero_without_measurements(params: EnvParams, batch_reset: Callable) -> None:
    """No epoch measured: the posterior mean is exactly 0, the two model features exactly 0.5."""
    mu = posterior_deviation(empty_stats(), params)
    assert float(mu[0]) == 0.0 and float(mu[1]) == 0.0
    obs, _ = batch_reset(keys(5), params)
    np.testing.assert_array_equal(np.asarray(obs)[:, [COMPUTE_DEV, SYNC_DEV]], 0.5)


@pytest.mark.parametrize("share", [1.0, 0.6, 0.15])
def test_posterior_of_one_measurement_by_hand(params: EnvParams, share: float) -> None:
    """One epoch with compute share s and log residual r: with prior covariance diag(sc^2, ss^2) and
    noise sn^2, the posterior mean is ``(sc^2 s, ss^2 (1 - s)) r / (sn^2 + sc^2 s^2 + ss^2 (1 - s)^2)``."""
    sc, ss, sn = 0.3, 0.2, 0.1
    p = model_params(params, sc, ss, sn)
    profile_s, measured_s = 40.0, 52.0
    r = math.log(measured_s / profile_s)
    q = 1.0 - share
    stats = record_epoch(
        empty_stats(), jnp.float32(measured_s), jnp.float32(profile_s), jnp.float32(share), jnp.float32(q)
    )
    # One row rotated into an empty (R | z) is the row itself: R = [[s, q], [0, 0]], z = (r, 0).
    np.testing.assert_allclose(np.asarray(stats), [share, q, 0.0, r, 0.0], rtol=1e-6, atol=1e-7)
    denominator = sn**2 + sc**2 * share**2 + ss**2 * q**2
    expected = (sc**2 * share * r / denominator, ss**2 * q * r / denominator)
    np.testing.assert_allclose(np.asarray(posterior_deviation(stats, p)), expected, rtol=1e-5, atol=1e-7)


def test_posterior_converges_with_two_compute_shares(params: EnvParams) -> None:
    """Noise-free epochs at two allocations of different compute shares identify both deviations
    (small prior weight); one allocation alone identifies only its mix of the two."""
    p = model_params(params, 1.0, 1.0, 0.05)
    deviation = (0.25, -0.15)

    def measured(stats: jax.Array, share: float, count: int) -> jax.Array:
        r = share * deviation[0] + (1.0 - share) * deviation[1]  # the model's exact log residual
        for _ in range(count):
            stats = record_epoch(
                stats,
                jnp.float32(30.0 * math.exp(r)),
                jnp.float32(30.0),
                jnp.float32(share),
                jnp.float32(1.0 - share),
            )
        return stats

    both = measured(measured(empty_stats(), 1.0, 40), 0.3, 40)
    np.testing.assert_allclose(np.asarray(posterior_deviation(both, p)), deviation, atol=2e-3)
    one = measured(empty_stats(), 0.3, 80)
    mu = np.asarray(posterior_deviation(one, p))
    np.testing.assert_allclose(0.3 * mu[0] + 0.7 * mu[1], 0.3 * deviation[0] + 0.7 * deviation[1], atol=1e-3)
    assert np.max(np.abs(mu - deviation)) > 0.05


def test_env_learns_the_compute_deviation_on_one_gpu(
    env: JobAllocationEnv, params: EnvParams, batched_rollout: Callable
) -> None:
    """In the env, with noise-free uncontended epochs on one GPU (compute share 1, so each epoch
    measures exactly exp(compute deviation)), the posterior after n epochs is the closed form
    ``sc^2 n dc / (sn^2 + n sc^2)`` and the sync deviation stays 0."""
    sc, sn = float(params.compute_spread), float(params.forecast_noise)
    quiet = validate_params(
        with_values(
            params,
            init_strategy=INIT_STRATEGIES.index("cold"),
            epoch_time_noise=0.0,
            contention_start_prob=0.0,
            contention_end_prob=1.0,
            shift_probs=no_shift_probs(),  # no slower node or contention spell mid-run
        )
    )
    logits = np.full(env.num_actions, -1e9, np.float32)
    logits[NO_OP_ACTION] = 0.0
    out = batched_rollout(6, quiet, logits)
    assert np.all(out["gpus_before"] == 1)
    n = out["epoch_before"].astype(np.float64)
    expected = sc**2 * n * out["deviation"][..., 0] / (sn**2 + n * sc**2)
    np.testing.assert_allclose(out["mu_before"][..., 0], expected, rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(out["mu_before"][..., 1], 0.0)
    assert n.max() >= 10  # jobs ran many epochs
    # The observation shows it: compute_dev = 0.5 + 0.5 tanh(2 mu), sync_dev = 0.5.
    final = out["final_observation"]
    after = sc**2 * (n + 1) * out["deviation"][..., 0] / (sn**2 + (n + 1) * sc**2)
    np.testing.assert_allclose(final[..., COMPUTE_DEV], 0.5 + 0.5 * np.tanh(2.0 * after), atol=1e-5)
    np.testing.assert_allclose(final[..., SYNC_DEV], 0.5, atol=1e-6)


def float64_posterior(
    s: np.ndarray, q: np.ndarray, r: np.ndarray, compute: float, sync: float, noise: float
) -> np.ndarray:
    """The posterior mean of ``online_model``'s docstring after every epoch of the measurements
    themselves (compute shares ``s``, sync shares ``q``, log residuals ``r``, epochs on the leading
    axis), solved in float64 from the normal equations' raw sums, each term clipped to
    +-DEFAULT_DEVIATION_LIMIT_SD spreads."""
    s, q, r = (np.asarray(v, np.float64) for v in (s, q, r))
    sums = np.cumsum(np.stack([s * s, s * q, q * q, s * r, q * r], axis=-1), axis=0)
    inv = 1.0 / noise**2
    a, b, c = 1.0 / compute**2 + inv * sums[..., 0], inv * sums[..., 1], 1.0 / sync**2 + inv * sums[..., 2]
    y1, y2 = inv * sums[..., 3], inv * sums[..., 4]
    det = a * c - b * b
    mu = np.stack([(c * y1 - b * y2) / det, (a * y2 - b * y1) / det], axis=-1)
    limit = DEFAULT_DEVIATION_LIMIT_SD * np.asarray([compute, sync])
    return np.clip(mu, -limit, limit)


def test_posterior_is_finite_for_valid_extreme_params(params: EnvParams) -> None:
    """The float32 posterior stays finite (its determinant positive) for the valid extremes of the
    spreads and the noise at one allocation, where det(S) is 0 (it used to be NaN: the prior precision
    0.25 was lost against 2.5e7 in float32, so det = 0), and within the clip."""
    for compute, sync, noise in ((2.0, 2.0, 1e-3), (0.0, 2.0, 1e-3), (2.0, 0.0, 1e-3), (0.0, 0.0, 10.0)):
        p = model_params(params, compute, sync, noise)
        stats = empty_stats()
        for share in (1.0, 0.999, 0.5, 0.5, 1e-3):
            for _ in range(40):
                stats = record_epoch(
                    stats, jnp.float32(1.2), jnp.float32(1.0), jnp.float32(share), jnp.float32(1.0 - share)
                )
            mu = np.asarray(posterior_deviation(stats, p))
            spread = np.maximum([compute, sync], 1e-3)
            assert np.all(np.isfinite(mu)) and np.all(
                np.abs(mu) <= DEFAULT_DEVIATION_LIMIT_SD * spread * (1 + 1e-6)
            )


def test_posterior_is_stable_for_valid_extreme_params(params: EnvParams) -> None:
    """100 epochs at one allocation (share 0.5), forecast_noise 1e-3, spreads 2 (all valid): the float32
    posterior agrees with a float64 solve of the same measurements, (0.1823, 0.1823). On the raw sums
    it was NaN (the prior precision 0.25 lost against 2.5e7, so det = 0), then (0, 0) (the numerators'
    n^2 (S22 S1r - S12 S2r) cancelling to rounding noise)."""
    p = model_params(params, 2.0, 2.0, 1e-3)
    stats = empty_stats()
    for _ in range(100):
        stats = record_epoch(stats, jnp.float32(1.2), jnp.float32(1.0), jnp.float32(0.5), jnp.float32(0.5))
    r = float(np.log(np.float32(1.2)))
    expected = float64_posterior(np.full(100, 0.5), np.full(100, 0.5), np.full(100, r), 2.0, 2.0, 1e-3)[-1]
    np.testing.assert_allclose(np.asarray(posterior_deviation(stats, p)), expected, rtol=1e-3)


@jax.jit
def posterior_histories(
    s: jax.Array, q: jax.Array, r: jax.Array, params: EnvParams
) -> tuple[jax.Array, jax.Array]:
    """The model's sums and posterior after every epoch of histories of shares ``s``, ``q`` and log
    residuals ``r`` (each ``[epochs, histories]``), compiled once for every params value."""

    def body(stats: jax.Array, x: tuple) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
        s, q, r = x
        stats = record_epoch(stats, jnp.exp(r) * 40.0, jnp.full_like(r, 40.0), s, q)
        return stats, (stats, jnp.stack(posterior_deviation(stats, params), axis=-1))

    start = jnp.zeros((s.shape[1], len(empty_stats())), jnp.float32)
    return jax.lax.scan(body, start, (s, q, r))[1]


@pytest.mark.parametrize(
    ("compute", "sync", "noise"),
    [
        (0.23, 0.14, 0.1),
        (0.8, 0.6, 0.1),
        (2.0, 2.0, 1e-3),
        (0.0, 2.0, 0.01),
        (2.0, 1e-3, 10.0),
    ],
)
def test_posterior_matches_float64_over_measurement_histories(
    params: EnvParams, compute: float, sync: float, noise: float
) -> None:
    """Random histories of up to 200 epochs (each at one of a few allocations: shares from the lattice's
    range, one GPU and the tiny sync shares of a fast interconnect included; log residuals up to +-3):
    the float32 posterior, at every epoch, equals a float64 solve of the same measurements to 1e-3 of
    the prior's range (2.5 spreads), for the defaults and for valid extremes of spreads and noise."""
    p = model_params(params, compute, sync, noise)
    rng = np.random.default_rng(0)
    num_histories, num_epochs = 64, 200
    shares = np.asarray([[1.0, 0.0], [0.9999999, 1e-7], [0.93, 0.07], [0.6, 0.4], [0.2, 0.8]], np.float32)
    picks = rng.integers(0, len(shares), (num_epochs, num_histories))
    few = rng.random((num_histories,)) < 0.5  # half the histories stay at one or two allocations
    picks[:, few] = picks[:, few] % 2 + 1
    s, q = shares[picks, 0], shares[picks, 1]
    r = rng.uniform(-3.0, 3.0, (num_epochs, num_histories)).astype(np.float32)

    _, mu = jax.device_get(posterior_histories(jnp.asarray(s), jnp.asarray(q), jnp.asarray(r), p))
    assert np.all(np.isfinite(mu))
    spread = np.maximum(np.asarray([compute, sync]), 1e-3)  # online_model.MIN_SPREAD
    expected = float64_posterior(s, q, r, *spread, noise)
    np.testing.assert_allclose(mu, expected, rtol=0, atol=1e-3 * DEFAULT_DEVIATION_LIMIT_SD * spread.max())
    assert np.all(np.abs(mu) <= DEFAULT_DEVIATION_LIMIT_SD * spread * (1 + 1e-6))


def test_posterior_is_clipped_to_the_range_of_the_truth(params: EnvParams) -> None:
    """Measurements that imply a deviation far beyond 2.5 spreads (tight prior, sharp noise, an epoch
    e^2 slower than the profile) give a posterior clipped to +-2.5 spreads, and finite features."""
    p = model_params(params, 0.1, 0.05, 1e-3)
    stats = empty_stats()
    for share in (1.0, 0.3):
        stats = record_epoch(
            stats,
            jnp.float32(40.0 * math.e**2),
            jnp.float32(40.0),
            jnp.float32(share),
            jnp.float32(1 - share),
        )
    mu = np.asarray(posterior_deviation(stats, p))
    np.testing.assert_allclose(
        mu, [DEFAULT_DEVIATION_LIMIT_SD * 0.1, DEFAULT_DEVIATION_LIMIT_SD * 0.05], rtol=1e-6
    )
    low = record_epoch(empty_stats(), jnp.float32(1.0), jnp.float32(40.0), jnp.float32(1.0), jnp.float32(0.0))
    mu = np.asarray(posterior_deviation(low, p))
    np.testing.assert_allclose(mu, [-DEFAULT_DEVIATION_LIMIT_SD * 0.1, 0.0], rtol=1e-6)


def test_forecast_stays_finite_when_the_model_is_badly_wrong(
    env: JobAllocationEnv, batch_reset: Callable, batch_step: Callable
) -> None:
    """A tiny cluster (2 GPUs and 1 CPU per node, 1 Gb/s links), compute_spread 0, sync_spread 2,
    forecast_noise 0.01 (all valid); the job's sync deviation 3.9 (within 2.5 spreads), its only epoch
    on 3 GPUs (two nodes, compute share 0.998): the final observation must be finite (it was NaN: the
    posterior sync mean reached ~100, a sync-bound target's forecast overflowed to inf, and 0 epochs
    left x inf = NaN; the posterior is now clipped to the range of the truth)."""
    p = with_values(
        env.default_params,
        gpus_per_node=2,
        max_nodes=2,
        max_gpus_per_job=3,
        cpu_step=1,
        cpus_per_node=1,
        intra_node_gbps=1.0,
        inter_node_gbps=1000.0,
        workload_probs=np.eye(env.catalog.num_workloads)[3],
        gpu_type_probs=np.eye(env.catalog.num_gpu_types)[3],
        compute_spread=0.0,
        sync_spread=2.0,
        forecast_noise=0.01,
        epoch_time_noise=0.0,
        contention_start_prob=0.0,
    )
    shape = p.workloads.epochs_min.shape
    one_epoch = with_values(p.workloads, epochs_min=np.ones(shape), epochs_max=np.ones(shape))
    p = validate_params(with_derived_tables(p.replace(workloads=one_epoch)))
    _, state = batch_reset(keys(20), p)  # the module's compiled batch
    deviation = jnp.broadcast_to(jnp.asarray([0.0, 3.9], jnp.float32), state.job.deviation.shape)
    state = state.replace(
        job=state.job.replace(constants=true_constants(state.job.profile, deviation), deviation=deviation)
    )
    last_target = jnp.full((NUM_JOBS,), NUM_MOVES + NUM_TARGETS - 1, jnp.int32)  # 16 GPUs -> 3
    _, _, _, terminated, _, info = batch_step(keys(21), state, last_target, p)
    assert np.all(np.asarray(terminated)) and np.all(np.asarray(info["final_state"].gpus) == 3)
    final = np.asarray(info["final_observation"])
    bad = sorted({FEATURE_NAMES[i] for i in np.argwhere(~np.isfinite(final))[:, 1]})
    assert not bad, bad
    assert np.all((final >= 0.0) & (final <= 1.0))
    mu_sync = np.asarray(posterior_deviation(info["final_state"].model_stats, p)[1])
    np.testing.assert_allclose(mu_sync, DEFAULT_DEVIATION_LIMIT_SD * 2.0, rtol=1e-6)

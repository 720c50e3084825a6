"""Job-model sanity on the shipped calibrated catalogue: CPUs, GPUs, interconnects, SLAs, start, pauses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slamorl_jax.env import (
    INIT_STRATEGIES,
    NO_OP_ACTION,
    EnvParams,
    JobAllocationEnv,
    encode_action,
    load_catalog,
    validate_params,
    with_derived_tables,
    with_scenario,
)
from slamorl_jax.env.catalog import gpu_type_index
from slamorl_jax.env.job_model import EpochMetrics, epoch_metrics, job_constants_table
from slamorl_jax.env.objectives import SLA_NAMES
from slamorl_jax.env.params import with_values
from slamorl_jax.env.shifts import no_shift_probs

NUM_KEYS = 6
TIME_SLA = SLA_NAMES.index("time")


def one_hot(size: int, index: int) -> np.ndarray:
    """A probability vector putting all mass on ``index``."""
    return np.eye(size, dtype=np.float32)[index]


def lattice(params: EnvParams, gpus: Any, cpus: Any) -> EpochMetrics:
    """Noise-free metrics of every (workload, GPU type) on the allocations ``gpus`` x ``cpus``.

    Fields have shape ``(W, T, *broadcast(gpus, cpus).shape)``.
    """
    gpus, cpus = jnp.asarray(gpus), jnp.asarray(cpus)
    extra = max(gpus.ndim, cpus.ndim)
    table = jax.tree.map(lambda x: x[(...,) + (None,) * extra], job_constants_table(params))
    return epoch_metrics(table, gpus, cpus, params)


def workload_named(part: str) -> int:
    """Index of the one Pollux workload whose name contains ``part``."""
    names = load_catalog().workload_names
    matches = [i for i, name in enumerate(names) if part in name and "gavel" not in name]
    assert len(matches) == 1, (part, names)
    return matches[0]


@pytest.fixture(scope="module")
def params(env: JobAllocationEnv) -> EnvParams:
    """The calibration cluster (4 T4 per node on PCIe, 50 Gb/s network)."""
    return validate_params(env.default_params)


@pytest.fixture(scope="module")
def quiet(params: EnvParams) -> EnvParams:
    """Defaults without epoch-time and utilisation noise, contention or events (exact bookkeeping)."""
    return validate_params(
        with_values(
            params,
            epoch_time_noise=0.0,
            util_noise=0.0,
            contention_start_prob=0.0,
            contention_end_prob=1.0,
            shift_probs=no_shift_probs(),  # no mid-run events (shifts.py)
        )
    )


@pytest.fixture(scope="module")
def jitted(env: JobAllocationEnv) -> tuple[Callable, Callable]:
    """``jit(reset)`` and ``jit(step)``, compiled once for the module."""
    return jax.jit(env.reset), jax.jit(env.step)


# --- throughput model ---------------------------------------------------------------------------


def test_more_cpus_never_lower_throughput(params: EnvParams) -> None:
    """Throughput is non-decreasing in CPUs for every GPU count."""
    step, per_node = int(params.cpu_step), int(params.cpus_per_node)
    max_nodes = int(params.max_nodes)
    gpus = np.arange(1, int(params.max_gpus_per_job) + 1)[:, None]
    cpus = np.arange(step, max_nodes * per_node + 1, step)[None, :]
    throughput = np.asarray(lattice(params, gpus, cpus).throughput)
    valid = cpus <= -(-gpus // int(params.gpus_per_node)) * per_node
    gain = np.diff(throughput, axis=-1)
    both_valid = valid[:, 1:] & valid[:, :-1]
    assert np.all(gain[..., both_valid] >= -1e-6 * throughput[..., 1:][..., both_valid])
    # Image and audio models starve on the fewest CPUs; CPU-flat models do not care.
    one_gpu = throughput[:, :, 0, :]  # (W, T, cpus) on 1 GPU
    most = int(valid[0].sum()) - 1  # the most CPUs one GPU's node offers
    c_sat = load_catalog().cpu_c_sat
    assert (c_sat > 0).any() and (c_sat == 0).any()
    np.testing.assert_array_less(one_gpu[c_sat > 0][..., 0], one_gpu[c_sat > 0][..., most])
    np.testing.assert_allclose(one_gpu[c_sat == 0][..., 0], one_gpu[c_sat == 0][..., most], rtol=1e-5)


def test_second_gpu_in_a_node_raises_data_parallel_throughput(params: EnvParams) -> None:
    """Data-parallel jobs speed up from 1 to 2 GPUs in one node."""
    assert int(params.gpus_per_node) >= 2
    data_parallel = np.asarray(load_catalog().data_parallel)
    assert data_parallel.sum() >= 10
    cpus_per_gpu = 12
    m = lattice(params, np.array([1, 2]), np.array([cpus_per_gpu, 2 * cpus_per_gpu]))
    throughput = np.asarray(m.throughput)[data_parallel]  # (DP workloads, T, 2)
    assert np.all(throughput[..., 1] > throughput[..., 0])


def test_extra_gpus_only_cost_more_for_non_data_parallel_workloads(params: EnvParams) -> None:
    """Non-data-parallel jobs: more GPUs, same throughput, higher price."""
    data_parallel = np.asarray(load_catalog().data_parallel)
    assert (~data_parallel).sum() >= 1
    gpus = np.arange(1, int(params.max_gpus_per_job) + 1)
    m = lattice(params, gpus, np.full_like(gpus, 16))
    throughput = np.asarray(m.throughput)[~data_parallel]
    price = np.asarray(m.price_per_hour)[~data_parallel]
    np.testing.assert_allclose(throughput, np.broadcast_to(throughput[..., :1], throughput.shape), rtol=1e-6)
    assert np.all(np.diff(price, axis=-1) > 0)
    # The idle GPUs show up in the utilisation.
    assert np.all(np.diff(np.asarray(m.gpu_util)[~data_parallel], axis=-1) <= 1e-7)


def test_price_is_gpus_plus_vcpus_plus_memory(params: EnvParams) -> None:
    """Price per hour = GPUs x $/GPU-h + vCPUs x $/vCPU-h + GiB x $/GiB-h."""
    gpus, cpus = 2, 8
    m = lattice(params, gpus, cpus)
    memory = gpus * float(params.host_memory_gib_per_gpu) + cpus * float(params.memory_gib_per_vcpu)
    expected = (
        gpus * np.asarray(params.gpu_price_per_hour)
        + cpus * float(params.vcpu_price_per_hour)
        + memory * float(params.gib_price_per_hour)
    )
    np.testing.assert_allclose(np.asarray(m.memory_alloc_gib), memory, rtol=1e-6)
    for w in range(np.asarray(m.price_per_hour).shape[0]):
        np.testing.assert_allclose(np.asarray(m.price_per_hour)[w], expected, rtol=1e-5)


def test_nvlink_infiniband_cluster_has_cheap_sync_and_no_node_cliff(params: EnvParams) -> None:
    """Fast links cut sync time and remove bert's node-boundary cliff."""
    dgx = validate_params(
        with_derived_tables(with_values(params, intra_node_gbps=2400.0, inter_node_gbps=800.0))
    )
    bert, t4 = workload_named("bert"), gpu_type_index("T4")
    gpus = np.array([1, 2, 4, 5, 8])  # 4 GPUs per node: 5 and 8 GPUs span two nodes
    cpus = 12 * gpus
    pcie = np.asarray(lattice(params, gpus, cpus).throughput)
    fast = np.asarray(lattice(dgx, gpus, cpus).throughput)
    data_parallel = np.asarray(load_catalog().data_parallel)
    # One GPU has nothing to sync; every multi-GPU data-parallel job gets faster.
    np.testing.assert_allclose(fast[..., 0], pcie[..., 0], rtol=1e-6)
    assert np.all(fast[data_parallel][..., 1:] > pcie[data_parallel][..., 1:])
    # Sync terms of the job constants shrink with the links.
    for name in ("sync_local_alpha_s", "sync_local_beta_s", "sync_node_alpha_s", "sync_node_beta_s"):
        slow_sync = np.abs(np.asarray(getattr(job_constants_table(params), name)))
        fast_sync = np.abs(np.asarray(getattr(job_constants_table(dgx), name)))
        assert np.all(fast_sync <= slow_sync) and np.any(fast_sync < slow_sync), name
    # bert on PCIe + 50 Gb/s: crossing the node boundary loses throughput (measured 3.85x on 4, 2.90x on 8).
    four, five, eight = pcie[bert, t4, 2], pcie[bert, t4, 3], pcie[bert, t4, 4]
    assert five < four and eight < four
    # On NVLink + InfiniBand there is no cliff: 8 GPUs over two nodes beat 4 in one.
    assert fast[bert, t4, 4] > fast[bert, t4, 3] > fast[bert, t4, 2]


# --- SLAs, initial allocation, re-allocation ---------------------------------------------------


def test_time_severity_looks_ahead_of_the_deadline(
    env: JobAllocationEnv, quiet: EnvParams, jitted: tuple[Callable, Callable]
) -> None:
    """Time severity is positive once the projection overshoots, before the deadline passes."""
    reset, step = jitted
    catalog = env.catalog
    imagenet = workload_named("imagenet")
    p = with_values(
        with_scenario(quiet, "deadline-critical"),
        workload_probs=one_hot(catalog.num_workloads, imagenet),
        gpu_type_probs=one_hot(catalog.num_gpu_types, gpu_type_index("T4")),
        init_strategy=INIT_STRATEGIES.index("cold"),
    )
    validate_params(p)
    for seed in range(NUM_KEYS):
        obs0, state = reset(jax.random.key(seed), p)
        obs, next_state, _, terminated, _, info = step(
            jax.random.key(100 + seed), state, jnp.int32(NO_OP_ACTION), p
        )
        assert not bool(terminated)
        deadline = float(state.job.sla_targets.deadline_s)
        elapsed = float(next_state.elapsed_s)
        remaining = int(state.job.epochs) - int(next_state.epoch)
        projected = elapsed + remaining * float(next_state.epoch_time_s)
        # The deadline is far away, but one slow GPU will overshoot it: the severity says so now.
        assert elapsed < deadline < projected
        expected = min((projected - deadline) / deadline, 1.0)
        severity = float(info["severities"][TIME_SLA])
        assert severity > 0.0
        np.testing.assert_allclose(severity, expected, rtol=1e-4)
        assert bool(info["deadline_met"])  # the job-level check (elapsed so far) is still met
        assert float(obs[7]) < 1.0  # time used / deadline
        assert float(obs[9 + TIME_SLA]) == 0.0  # time SLA flagged as not met
        np.testing.assert_allclose(float(obs[15 + TIME_SLA]), severity, rtol=1e-6)
        # Already at reset, before any time has passed.
        assert float(obs0[15 + TIME_SLA]) > 0.0 and float(state.elapsed_s) == 0.0


def test_cold_and_requested_starts(
    env: JobAllocationEnv, params: EnvParams, jitted: tuple[Callable, Callable]
) -> None:
    """Cold start is (1 GPU, cpu_step CPUs); 'requested' starts at the job's request."""
    reset, _ = jitted
    cold = with_values(params, init_strategy=INIT_STRATEGIES.index("cold"))
    odd_step = validate_params(with_derived_tables(with_values(cold, cpu_step=3)))
    requested = with_values(params, init_strategy=INIT_STRATEGIES.index("requested"))
    largest = with_values(params, init_strategy=INIT_STRATEGIES.index("max"))
    requested_gpus = set()
    for seed in range(NUM_KEYS * 2):
        key = jax.random.key(seed)
        _, s_cold = reset(key, cold)
        assert (int(s_cold.gpus), int(s_cold.cpus)) == (1, int(cold.cpu_step))
        _, s_odd = reset(key, odd_step)
        assert (int(s_odd.gpus), int(s_odd.cpus)) == (1, 3)
        _, s_req = reset(key, requested)
        # The job (and its request) does not depend on the start strategy.
        assert int(s_req.job.requested_gpus) == int(s_cold.job.requested_gpus)
        assert int(s_req.job.requested_cpus) == int(s_cold.job.requested_cpus)
        assert (int(s_req.gpus), int(s_req.cpus)) == (
            int(s_req.job.requested_gpus),
            int(s_req.job.requested_cpus),
        )
        requested_gpus.add(int(s_req.gpus))
        _, s_max = reset(key, largest)
        assert int(s_max.gpus) == int(params.max_gpus_per_job)
        nodes = -(-int(s_max.gpus) // int(params.gpus_per_node))
        assert int(s_max.cpus) == nodes * int(params.cpus_per_node)
    assert len(requested_gpus) > 1  # requests really vary, so the check above is not vacuous


def test_a_request_above_the_largest_job_takes_its_cpus_per_gpu_from_the_gpus_it_gets(
    params: EnvParams,
) -> None:
    """A 32-GPU bin on a 16-GPU cluster requests 16 GPUs with the drawn CPUs per GPU (every imagenet
    request): the CPUs came from the unclipped 32 GPUs, 8 CPUs per GPU for a drawn 4."""
    from slamorl_jax.env.job_generator import requested_allocation

    bins = params.requested_gpu_bins[:, None]  # every bin x every drawn CPUs per GPU (job_table's grid)
    ratios = params.requested_cpus_per_gpu_values[None, :]
    gpus, cpus = requested_allocation(bins, ratios, jnp.asarray(True), params)
    assert np.asarray(gpus)[:, 0].tolist() == [1, 2, 4, 8, 16, 16]
    assert np.asarray(cpus)[-1, 1] == 64  # the 32-GPU bin at 4 CPUs per GPU: 16 x 4 (it was 128)
    per_gpu = np.asarray(cpus) / np.asarray(gpus)  # no more CPUs per GPU than drawn (to the step)
    assert np.all(per_gpu <= np.asarray(ratios) + float(params.cpu_step) / 2)


def test_reallocation_pauses_and_bills_the_job(
    env: JobAllocationEnv, quiet: EnvParams, jitted: tuple[Callable, Callable]
) -> None:
    """A GPU change adds reallocation_pause_s, a CPU-only change cpu_reallocation_pause_s (both billed)."""
    reset, step = jitted
    pause, cpu_pause = 120.0, 7.0
    p = with_values(
        quiet,
        reallocation_pause_s=pause,
        cpu_reallocation_pause_s=cpu_pause,
        init_strategy=INIT_STRATEGIES.index("cold"),
    )
    p = with_values(p, workload_probs=one_hot(env.catalog.num_workloads, workload_named("imagenet")))
    validate_params(p)
    _, state = reset(jax.random.key(3), p)
    cases = [
        (NO_OP_ACTION, (1, 4), 0.0),  # keep the allocation: no pause
        (encode_action(1, 0), (2, 4), pause),  # one more GPU: checkpoint-restart pause
        (encode_action(0, 1), (2, 8), cpu_pause),  # one more CPU step: data-loader restart
        (NO_OP_ACTION, (2, 8), 0.0),
        (encode_action(-1, -1), (1, 4), pause),  # both change: the GPU pause
        (encode_action(-1, -1), (1, 4), 0.0),  # clipped at the minimum: nothing changes, no pause
    ]
    for t, (action, allocation, paused) in enumerate(cases):
        changed = paused > 0
        _, next_state, reward, terminated, _, info = step(jax.random.key(t), state, jnp.int32(action), p)
        assert not bool(terminated)
        assert (int(next_state.gpus), int(next_state.cpus)) == allocation
        expected = epoch_metrics(state.job.constants, allocation[0], allocation[1], p)
        interval = float(expected.epoch_time_s) + paused
        np.testing.assert_allclose(float(next_state.elapsed_s - state.elapsed_s), interval, rtol=1e-5)
        cost = interval * float(expected.price_per_hour) / 3600.0
        np.testing.assert_allclose(float(next_state.cost_usd - state.cost_usd), cost, rtol=1e-5)
        assert bool(info["reallocated"]) == changed
        assert int(next_state.reallocations) - int(state.reallocations) == int(changed)
        np.testing.assert_allclose(float(reward[0]), -interval / float(state.job.time_ref_s), rtol=1e-5)
        state = next_state

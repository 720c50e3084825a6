"""The job generator: draws one training job, its user's request and SLAs (see ``scenarios.py``).

Everything is a pure function of the reset uniforms (``draws.py``) and ``EnvParams``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from slamorl_jax.env import draws as d
from slamorl_jax.env.actions import clip_allocation, cpu_cap, floor_div
from slamorl_jax.env.job_model import EpochMetrics, billed_usd, epoch_metrics, job_constants_table
from slamorl_jax.env.job_truth import deviation_draws, true_constants, true_time_ratio
from slamorl_jax.env.lookup import take_small, unpack_row
from slamorl_jax.env.params import INIT_STRATEGIES, MIXED_INIT_STRATEGIES, EnvParams, max_gpus
from slamorl_jax.env.shifts import draw_shift
from slamorl_jax.env.state import JobSpec, SlaTargets


def requested_allocation(
    gpu_bins: jax.Array, cpus_per_gpu: jax.Array, data_parallel: jax.Array, params: EnvParams
) -> tuple[jax.Array, jax.Array]:
    """The user's static request for GPU-count bins and CPUs-per-GPU values (broadcast): a job that
    is not data-parallel asks for one GPU; a bin above the cluster's largest job (Pollux's 32-GPU
    bin on 16) asks for the most GPUs a job may hold; CPUs are the value x those GPUs, rounded to the
    ``cpu_step`` lattice, then clipped. (Before 2026-12-05 the CPUs came from the unclipped bin: an
    ImageNet request held 16 GPUs with 6.25-12 CPUs per GPU for the drawn 3.25-12.)"""
    gpus = jnp.minimum(jnp.where(data_parallel, gpu_bins, 1), max_gpus(params))
    step = params.cpu_step.astype(jnp.float32)
    cpus = (jnp.round(cpus_per_gpu * gpus.astype(jnp.float32) / step) * step).astype(jnp.int32)
    return clip_allocation(
        gpus, cpus, max_gpus(params), params.gpus_per_node, params.cpus_per_node, params.cpu_step
    )


def job_table(params: EnvParams) -> dict:
    """Everything about a job that depends only on its discrete draws, for every combination.

    Shape (W, T, B, R): workload x GPU type x requested GPU bin x requested CPUs-per-GPU value.
    Holds the workload profile's constants, the request and the profile's epoch metrics for it and
    for the cold and max starts (``random`` and ``mixed`` starts are evaluated per job by
    :func:`initial_metrics`), and the profile's fastest and cheapest static epochs. It depends on
    ``params`` alone and is cached in them, packed, as ``EnvParams.job_rows``
    (``derived.with_derived_tables``); each reset reads one row.
    """
    consts = job_constants_table(params)  # (W, T)
    num_workloads, num_types = consts.compute_s.shape
    bins = params.requested_gpu_bins[None, None, :, None]
    ratios = params.requested_cpus_per_gpu_values[None, None, None, :]
    data_parallel = params.workloads.data_parallel[:, None, None, None]
    req_gpus, req_cpus = requested_allocation(bins, ratios, data_parallel, params)
    shape = (num_workloads, num_types, bins.shape[2], ratios.shape[3])
    req_gpus = jnp.broadcast_to(req_gpus, shape)
    req_cpus = jnp.broadcast_to(req_cpus, shape)
    expand = jax.tree.map(lambda x: x[:, :, None, None], consts)
    g_max = max_gpus(params)
    cap = cpu_cap(g_max, params.gpus_per_node, params.cpus_per_node, params.cpu_step)

    def full(x: jax.Array) -> jax.Array:
        return jnp.broadcast_to(x, shape)

    return {
        "constants": jax.tree.map(full, expand),
        "requested_gpus": req_gpus,
        "requested_cpus": req_cpus,
        "requested": jax.tree.map(full, epoch_metrics(expand, req_gpus, req_cpus, params)),
        "initial_cold": jax.tree.map(full, epoch_metrics(expand, 1, params.cpu_step, params)),
        "initial_max": jax.tree.map(full, epoch_metrics(expand, g_max, cap, params)),
        "epochs_min": full(params.workloads.epochs_min[:, None, None, None]),
        "epochs_max": full(params.workloads.epochs_max[:, None, None, None]),
        "fastest_epoch": full(params.fastest_epoch_s[:, :, None, None]),
        "cheapest_epoch": full(params.cheapest_epoch_usd[:, :, None, None]),
    }


def sample_preference(u: tuple[jax.Array, ...], kind: jax.Array, params: EnvParams) -> jax.Array:
    """The job's preference: fixed, else uniform on the simplex (``random_preference_prob``), the
    scenario kind's opposed preference (the next ``opposed_preference_prob``) or its preset, all
    from one uniform."""
    random_pref = d.uniform_simplex(*(u[i] for i in d.PREFERENCE))
    preset = take_small(params.kind_preference, kind)
    opposed = take_small(params.opposed_preference, kind)
    use_random = u[d.RANDOM_PREFERENCE] < params.random_preference_prob
    use_opposed = u[d.RANDOM_PREFERENCE] < params.random_preference_prob + params.opposed_preference_prob
    fixed = params.fixed_preference / jnp.sum(params.fixed_preference)
    return jnp.stack(
        [
            jnp.where(
                params.use_fixed_preference,
                fixed[i],
                jnp.where(use_random, r, jnp.where(use_opposed, o, p)),
            )
            for i, (r, o, p) in enumerate(zip(random_pref, opposed, preset, strict=True))
        ]
    )


def sample_job_row(u: jax.Array | tuple[jax.Array, ...], params: EnvParams) -> tuple[JobSpec, dict]:
    """Draw a job from the ``RESET_DRAWS`` uniforms ``u``; also return its :func:`job_table` row."""
    u = d.as_tuple(u)
    workload = d.categorical(u[d.WORKLOAD], params.workload_probs)
    gpu_type = d.categorical(u[d.GPU_TYPE], params.gpu_type_probs)
    kind = d.categorical(u[d.SCENARIO], params.scenario_probs)
    gpu_probs = params.workloads.requested_gpu_probs
    gpu_cdf = jnp.cumsum(gpu_probs / jnp.sum(gpu_probs, axis=1, keepdims=True), axis=1)
    gpu_bin = d.categorical_from_cdf(u[d.REQUESTED_GPUS], gpu_cdf[workload])
    cpu_bin = d.categorical(u[d.REQUESTED_CPUS], params.requested_cpus_per_gpu_probs)
    template = jax.eval_shape(job_table, params)
    _, num_types, num_bins, num_ratios = template["requested_gpus"].shape
    index = ((workload * num_types + gpu_type) * num_bins + gpu_bin) * num_ratios + cpu_bin
    row = unpack_row(params.job_rows[index], template)

    profile = row["constants"]
    deviation = deviation_draws(u[d.COMPUTE_DEVIATION], u[d.SYNC_DEVIATION], params)
    truth = true_constants(profile, deviation)
    expected = row["requested"]  # the profile's forecast of the request: what the user plans with
    # True / profile epoch time at the request: the reward scale and evaluation reference, never an
    # input of the targets (the agent sees those).
    ratio_request = true_time_ratio(expected.compute_share, expected.sync_share, profile.gamma, deviation)
    epochs = d.uniform_int(u[d.EPOCHS], row["epochs_min"], row["epochs_max"])
    epochs_f = epochs.astype(jnp.float32)
    expected_time = epochs_f * expected.epoch_time_s
    expected_cost = billed_usd(expected_time, expected.price_per_hour)
    low = take_small(params.sla_factor_low, kind)
    high = take_small(params.sla_factor_high, kind)
    f = [lo + (hi - lo) * u[i] for lo, hi, i in zip(low, high, d.SLA_FACTORS, strict=True)]
    # Floors that keep the tight SLAs within reach of the profile's fastest and cheapest static
    # allocations, as a user plans them: from the profile, not the job's hidden truth, which the
    # targets would otherwise reveal (a floor that binds would be the true speed, read off the first
    # observation). A job slower than its profile may therefore miss a floored SLA whatever it does.
    margin = params.feasibility_margin
    deadline_floor = margin * epochs_f * row["fastest_epoch"]
    budget_floor = margin * epochs_f * row["cheapest_epoch"]
    targets = SlaTargets(
        deadline_s=jnp.maximum(f[0] * expected_time, deadline_floor),
        budget_usd=jnp.maximum(f[1] * expected_cost, budget_floor),
        min_throughput=jnp.minimum(
            f[2] * expected.throughput, profile.samples_per_epoch / row["fastest_epoch"] / margin
        ),
        max_memory_gib=f[3] * expected.memory_used_gib,
        min_gpu_util=f[4],
        min_cpu_util=f[5],
    )
    time_ref = expected_time * ratio_request
    shift_kind, shift_epoch, shift_value = draw_shift(
        u, epochs, targets.deadline_s, targets.budget_usd, deadline_floor, budget_floor, params
    )
    job = JobSpec(
        workload=workload,
        gpu_type=gpu_type,
        scenario=kind,
        epochs=epochs,
        constants=truth,
        profile=profile,
        deviation=deviation,
        requested_gpus=row["requested_gpus"],
        requested_cpus=row["requested_cpus"],
        preference=sample_preference(u, kind, params),
        sla_targets=targets,
        time_ref_s=time_ref,
        cost_ref_usd=billed_usd(time_ref, expected.price_per_hour),
        throughput_ref=expected.throughput,
        shift_kind=shift_kind,
        shift_epoch=shift_epoch,
        shift_value=shift_value,
    )
    return job, row


def sample_job(u: jax.Array | tuple[jax.Array, ...], params: EnvParams) -> JobSpec:
    """Draw a job from the ``RESET_DRAWS`` uniforms ``u`` (see ``scenarios.py`` for the distribution)."""
    return sample_job_row(u, params)[0]


def initial_allocation(
    u: jax.Array | tuple[jax.Array, ...], job: JobSpec, params: EnvParams
) -> tuple[jax.Array, jax.Array]:
    """Allocation at the first epoch by ``params.init_strategy`` (``params.INIT_STRATEGIES``).

    ``cold`` = the minimum (1 GPU, ``cpu_step`` CPUs), the cold start; ``requested`` = the user's
    request; ``random`` = uniform over GPUs and CPU steps; ``max`` = the largest allocation;
    ``mixed`` = one of cold, requested and random drawn with ``params.init_mix_probs``.
    """
    u = d.as_tuple(u)
    g_max = max_gpus(params)
    one = jnp.ones((), jnp.int32)
    random_gpus = d.uniform_int(u[d.INIT_GPUS], one, g_max)
    random_levels = cpu_cap(random_gpus, params.gpus_per_node, params.cpus_per_node, params.cpu_step)
    random_cpus = params.cpu_step * d.uniform_int(
        u[d.INIT_CPUS], one, floor_div(random_levels, params.cpu_step)
    )
    big = jnp.int32(1 << 20)
    mixed = take_small(
        jnp.asarray([INIT_STRATEGIES.index(name) for name in MIXED_INIT_STRATEGIES], jnp.int32),
        d.categorical(u[d.INIT_MIX], params.init_mix_probs),
    )
    strategy = jnp.where(params.init_strategy == INIT_STRATEGIES.index("mixed"), mixed, params.init_strategy)
    assert INIT_STRATEGIES[:4] == ("cold", "requested", "random", "max")
    gpus = jnp.select(
        [strategy == 0, strategy == 1, strategy == 2], [one, job.requested_gpus, random_gpus], g_max
    )
    cpus = jnp.select(
        [strategy == 0, strategy == 1, strategy == 2],
        [params.cpu_step, job.requested_cpus, random_cpus],
        big,
    )
    return clip_allocation(gpus, cpus, g_max, params.gpus_per_node, params.cpus_per_node, params.cpu_step)


def initial_metrics(
    job: JobSpec, row: dict, gpus: jax.Array, cpus: jax.Array, params: EnvParams, branch: bool = True
) -> EpochMetrics:
    """The profile's metrics for the first allocation: read from the job's table row, except for the
    ``random`` and ``mixed`` strategies, which evaluate the model. With ``branch`` a ``lax.cond`` on
    the shared params evaluates it only then; without, both are computed and one selected (no
    branch on device values: ``JobAllocationEnv.branch_on_init_strategy``)."""
    per_job = jnp.logical_or(
        params.init_strategy == INIT_STRATEGIES.index("random"),
        params.init_strategy == INIT_STRATEGIES.index("mixed"),
    )
    strategy = params.init_strategy
    from_table = jax.tree.map(
        lambda cold, requested, big: jnp.select([strategy == 0, strategy == 1], [cold, requested], big),
        row["initial_cold"],
        row["requested"],
        row["initial_max"],
    )
    if branch:
        return jax.lax.cond(
            per_job, lambda: epoch_metrics(job.profile, gpus, cpus, params), lambda: from_table
        )
    modelled = epoch_metrics(job.profile, gpus, cpus, params)
    return jax.tree.map(lambda model, table: jnp.where(per_job, model, table), modelled, from_table)

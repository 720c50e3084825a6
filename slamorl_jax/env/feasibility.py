"""How often the job generator's SLAs can be met: by some static allocation, and by the request.

A job is *feasible* when at least one allocation of the full lattice (every GPU count and every CPU
step a job may hold), kept for the whole run, meets all six job-level SLAs in the noise- and
contention-free model. ``python -m slamorl_jax.env.feasibility`` prints the fractions per scenario.
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

from slamorl_jax.env import draws as d
from slamorl_jax.env.job_generator import sample_job
from slamorl_jax.env.job_model import EpochMetrics
from slamorl_jax.env.params import EnvParams
from slamorl_jax.env.scenarios import SCENARIOS, scenario_params
from slamorl_jax.env.state import JobSpec
from slamorl_jax.env.static_allocations import full_lattice, lattice_metrics


def static_run_meets_slas(job: JobSpec, m: EpochMetrics) -> jax.Array:
    """Whether running the whole job on each evaluated allocation meets all six job-level SLAs."""
    t = jax.tree.map(lambda x: jnp.asarray(x)[..., None], job.sla_targets)
    epochs = job.epochs.astype(jnp.float32)[..., None]
    total_time = epochs * m.epoch_time_s
    total_cost = total_time * m.price_per_hour / 3600.0
    return (
        (total_time <= t.deadline_s)
        & (total_cost <= t.budget_usd)
        & (m.throughput >= t.min_throughput)
        & (m.memory_used_gib <= t.max_memory_gib)
        & (m.gpu_util >= t.min_gpu_util)
        & (m.cpu_util >= t.min_cpu_util)
    )


def feasibility_report(params: EnvParams, num_jobs: int = 20_000, seed: int = 0) -> dict[str, float]:
    """Fractions of ``num_jobs`` generated jobs that some static allocation / the request satisfies."""
    gpus, cpus = full_lattice(params)
    keys = jax.random.split(jax.random.key(seed), num_jobs)

    @jax.jit
    def evaluate(keys: jax.Array) -> tuple[jax.Array, jax.Array]:
        jobs = jax.vmap(lambda k: sample_job(d.uniforms(k, d.RESET_DRAWS), params))(keys)
        lattice_ok = static_run_meets_slas(
            jobs, lattice_metrics(jobs.constants, jnp.asarray(gpus), jnp.asarray(cpus), params)
        )
        request_metrics = jax.vmap(
            lambda job: lattice_metrics(
                job.constants, job.requested_gpus[None], job.requested_cpus[None], params
            )
        )(jobs)
        return jnp.any(lattice_ok, axis=-1), static_run_meets_slas(jobs, request_metrics)[..., 0]

    chunks = [evaluate(keys[i : i + 1024]) for i in range(0, num_jobs, 1024)]
    feasible = np.concatenate([np.asarray(c[0]) for c in chunks])
    request_ok = np.concatenate([np.asarray(c[1]) for c in chunks])
    return {
        "feasible_fraction": float(feasible.mean()),
        "requested_meets_all_fraction": float(request_ok.mean()),
        "num_jobs": float(num_jobs),
    }


def main(argv: list[str] | None = None) -> None:
    """Print the feasibility table of every named scenario (Markdown)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--num-jobs", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.num_jobs < 1:
        parser.error("--num-jobs must be >= 1")
    print("| scenario | jobs | feasible (some static allocation meets all 6 SLAs) | request meets all 6 |")
    print("|---|---|---|---|")
    for name in SCENARIOS:
        r = feasibility_report(scenario_params(name), args.num_jobs, args.seed)
        print(
            f"| {name} | {int(r['num_jobs'])} | {r['feasible_fraction']:.1%} "
            f"| {r['requested_meets_all_fraction']:.1%} |"
        )


if __name__ == "__main__":
    main()

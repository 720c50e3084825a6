"""How often the job generator's SLAs can be met: by some static allocation, and by the request.

A job is *feasible* when at least one allocation of the full lattice (every GPU count and every CPU
step a job may hold), kept for the whole run, meets all six job-level SLAs in the noise- and
contention-free model; a job with a mid-run event (``shifts.py``) meets it on the way
(``plans.plan_outcomes``: a preemption moves the kept allocation, a cut is judged at the end), so
for ``shifting`` this is the share a static choice made in hindsight can serve.
``python -m slamorl_jax.env.feasibility`` prints the fractions per scenario (``--catalog=PATH``: on
a calibrated catalogue of one's own, before training on it with ``train --catalog``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from slamorl_jax.cli_start import program_name, require_backend  # first of ours: quiet Ctrl-C

require_backend()  # run as a program: a platform the machine lacks is one line, before the env's imports
# ruff: noqa: E402  (the imports below start JAX's backend)
from slamorl_jax.cli_args import OneLineArgumentParser, bounded, run_command, seed_value, summary
from slamorl_jax.env import draws as d
from slamorl_jax.env.catalog import catalog_from_flag
from slamorl_jax.env.job_generator import sample_job
from slamorl_jax.env.params import EnvParams
from slamorl_jax.env.plans import plan_outcomes
from slamorl_jax.env.scenarios import SCENARIOS, scenario_params
from slamorl_jax.env.state import JobSpec
from slamorl_jax.env.static_allocations import full_lattice
from slamorl_jax.env.validation import validate_params_once
from slamorl_jax.markdown import markdown_table

MAX_JOBS = 10**7  # the jobs' keys are split at once: 10 M keys take 80 MB


def static_run_meets_slas(job: JobSpec, gpus: jax.Array, cpus: jax.Array, params: EnvParams) -> jax.Array:
    """Whether running one job on each allocation ``(gpus, cpus)`` (``[L]``), kept through its
    event if it has one, meets all six job-level SLAs (noise- and contention-free)."""
    return jnp.all(plan_outcomes(job, gpus, cpus, gpus, cpus, False, params)[0], axis=0)


def feasibility_report(params: EnvParams, num_jobs: int = 20_000, seed: int = 0) -> dict[str, float]:
    """Fractions of ``num_jobs`` generated jobs that some static allocation / the request satisfies
    (``ValueError`` for params :func:`~slamorl_jax.env.validate_params` refuses)."""
    validate_params_once(params)
    gpus, cpus = full_lattice(params)
    keys = jax.random.split(jax.random.key(seed), num_jobs)

    @jax.jit
    def evaluate(keys: jax.Array) -> tuple[jax.Array, jax.Array]:
        jobs = jax.vmap(lambda k: sample_job(d.uniforms(k, d.RESET_DRAWS), params))(keys)
        g, c = jnp.asarray(gpus), jnp.asarray(cpus)
        lattice_ok = jax.vmap(lambda job: static_run_meets_slas(job, g, c, params))(jobs)
        request_ok = jax.vmap(
            lambda job: static_run_meets_slas(job, job.requested_gpus[None], job.requested_cpus[None], params)
        )(jobs)
        return jnp.any(lattice_ok, axis=-1), request_ok[..., 0]

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
    parser = OneLineArgumentParser(prog="python -m slamorl_jax.env.feasibility", description=summary(__doc__))
    parser.add_argument(
        "--num-jobs",
        type=bounded(int, 1, MAX_JOBS),
        default=20_000,
        help=f"jobs per scenario, 1 to {MAX_JOBS:,} (default: %(default)s)",
    )
    parser.add_argument("--seed", type=seed_value, default=0, help="the jobs' seed (default: %(default)s)")
    parser.add_argument(
        "--catalog",
        default=None,
        help="a calibrated catalogue of your own (as train --catalog takes it; default: the shipped one)",
    )
    args = parser.parse_args(argv)
    try:
        catalog = None if args.catalog is None else catalog_from_flag(args.catalog)
    except ValueError as err:
        parser.error(str(err))
    try:
        reports = {
            name: feasibility_report(scenario_params(name, catalog), args.num_jobs, args.seed)
            for name in SCENARIOS
        }
    except ValueError as err:  # params validate_params refuses
        parser.error(f"--catalog: {err}")
    headers = [
        "scenario",
        "jobs",
        "feasible (some static allocation meets all 6 SLAs)",
        "request meets all 6",
    ]
    rows = [
        [
            name,
            int(r["num_jobs"]),
            f"{r['feasible_fraction']:.1%}",
            f"{r['requested_meets_all_fraction']:.1%}",
        ]
        for name, r in reports.items()
    ]
    print(markdown_table(headers, rows))


if __name__ == "__main__":
    run_command(main, program_name("slamorl_jax.env.feasibility"))

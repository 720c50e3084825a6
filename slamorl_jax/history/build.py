"""Building a history store from simulated jobs: each job and the allocation that served it best.

:func:`records_from_states` turns a batch of jobs (``EnvState``s, e.g. the ``final_state`` of finished
episodes or fresh resets) and one allocation per job into records; :func:`oracle_records` draws fresh
jobs of some env params and records each with its best static allocation in hindsight
(``evaluation.baselines.BestStatic``, the evaluation's oracle: the allocation that meets the most
job-level SLAs of the job's noise-free run, then the best preference-weighted time and cost). In a
real deployment that is the allocation found best once the job finished; the jobs a store is built
from must not be the jobs it is then evaluated on (use another seed).
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import numpy as np

from slamorl_jax.env.best_static import BestStatic
from slamorl_jax.env.catalog import Catalog, load_catalog
from slamorl_jax.env.job_env import JobAllocationEnv
from slamorl_jax.env.params import EnvParams
from slamorl_jax.env.state import EnvState
from slamorl_jax.history.records import HistoryRecord, record_from_mapping


def records_from_states(
    states: EnvState, gpus: jax.Array, cpus: jax.Array, catalog: Catalog | None = None
) -> list[HistoryRecord]:
    """One record per job of the batch ``states`` (leading axis), served best by ``(gpus, cpus)``;
    ``ValueError`` naming the job for a record :func:`~slamorl_jax.history.records.load_records` would
    refuse (a count below 1, an allocation of another shape than the batch), so nothing is saved that
    cannot be read back."""
    catalog = catalog or load_catalog()
    job = jax.device_get(states.job)
    gpus, cpus = np.asarray(gpus), np.asarray(cpus)
    jobs = len(job.epochs)
    if gpus.shape != (jobs,) or cpus.shape != (jobs,):
        raise ValueError(
            f"gpus and cpus must hold one count per job ({jobs},), got {gpus.shape} and {cpus.shape}"
        )
    records = []
    for i in range(jobs):
        record = HistoryRecord(
            workload=catalog.workload_names[int(job.workload[i])],
            gpu_type=catalog.gpu_types[int(job.gpu_type[i])],
            epochs=int(job.epochs[i]),
            deadline_s=float(job.sla_targets.deadline_s[i]),
            budget_usd=float(job.sla_targets.budget_usd[i]),
            preference=tuple(float(w) for w in job.preference[i]),
            best_gpus=int(gpus[i]),
            best_cpus=int(cpus[i]),
        )
        record_from_mapping(dataclasses.asdict(record), f"job {i}", catalog)  # checked as a loaded one
        records.append(record)
    return records


@functools.lru_cache(maxsize=8)
def _oracle_batch(env: JobAllocationEnv, oracle: BestStatic, num_jobs: int):
    """Jitted: fresh jobs and their oracle allocations."""

    @jax.jit
    def run(params: EnvParams, key: jax.Array) -> tuple[EnvState, jax.Array, jax.Array]:
        _, states = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(key, num_jobs), params)
        gpus, cpus = jax.vmap(oracle, in_axes=(0, None))(states, params)
        return states, gpus, cpus

    return run


def oracle_records(
    params: EnvParams,
    key: jax.Array,
    num_jobs: int,
    env: JobAllocationEnv | None = None,
    catalog: Catalog | None = None,
) -> list[HistoryRecord]:
    """``num_jobs`` fresh jobs of ``params`` (drawn from ``key``), each with its hindsight-best static
    allocation."""
    env = env or JobAllocationEnv()
    states, gpus, cpus = _oracle_batch(env, BestStatic.for_params(params), num_jobs)(params, key)
    return records_from_states(states, gpus, cpus, catalog or env.catalog)

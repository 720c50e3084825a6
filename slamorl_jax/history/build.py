"""Building a history store from simulated jobs: each job and the allocation that served it.

Two sources. :func:`oracle_records` draws fresh jobs of some env params and records each with its
best static allocation in hindsight (``env.best_static.BestStatic``, the evaluation's oracle: the
allocation that meets the most job-level SLAs of the job's noise-free run, then the best preference-
weighted time and cost), which knows each job's hidden true speed: a bound on what a store can hold,
not what a platform could log. :func:`policy_records` runs fresh jobs to the end with a policy and
records each finished one with the allocation it ran its longest stretch of epochs on, or its last
(:func:`records_from_episodes`): what a platform logs of the jobs it ran, with no hindsight.
:func:`records_from_states` turns a batch of jobs (``EnvState``s) and one allocation per job into
records. The jobs a store is built from must not be the jobs it is then evaluated on (use another
seed).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import numpy as np

from slamorl_jax.env.best_static import BestStatic
from slamorl_jax.env.catalog import Catalog, load_catalog
from slamorl_jax.env.job_env import JobAllocationEnv
from slamorl_jax.env.params import EnvParams
from slamorl_jax.env.state import EnvState
from slamorl_jax.episodes import (
    BUDGET_USD,
    DEADLINE_S,
    FINAL_CPUS,
    FINAL_GPUS,
    LONGEST_CPUS,
    LONGEST_GPUS,
    Policy,
    StartRule,
    run_episodes,
    with_init_strategy,
)
from slamorl_jax.history.names import RECORDED
from slamorl_jax.history.records import HistoryRecord, record_from_mapping


def records_from_states(
    states: EnvState, gpus: jax.Array, cpus: jax.Array, catalog: Catalog | None = None
) -> list[HistoryRecord]:
    """One record per job of the batch ``states`` (leading axis), served best by ``(gpus, cpus)``;
    ``ValueError`` naming the job for a record :func:`~slamorl_jax.history.records.load_records` would
    refuse (a count below 1, an allocation of another shape than the batch), so nothing is saved that
    cannot be read back."""
    job = jax.device_get(states.job)
    jobs = {
        "workload": job.workload,
        "gpu_type": job.gpu_type,
        "epochs": job.epochs,
        DEADLINE_S: job.sla_targets.deadline_s,
        BUDGET_USD: job.sla_targets.budget_usd,
        "preference": job.preference,
    }
    return _records(jobs, gpus, cpus, catalog)


# Which allocation of a finished job its record holds (``records_from_episodes``): the ``episodes``
# figures of the allocation it ran its longest stretch of epochs on (the default: where it settled),
# or its last epoch on (what it ended on, which may be a late move).
RECORDED_ALLOCATIONS = dict(
    zip(RECORDED, ((LONGEST_GPUS, LONGEST_CPUS), (FINAL_GPUS, FINAL_CPUS)), strict=True)
)


def records_from_episodes(
    figures: dict[str, np.ndarray], catalog: Catalog | None = None, allocation: str = "longest"
) -> list[HistoryRecord]:
    """One record per job of ``episodes.run_episodes``' ``figures`` that ran to completion, with the
    allocation it ran its longest stretch of consecutive epochs on (``allocation="longest"``; the later
    on a tie) or its last epoch on (``"final"``): what a platform logs of a finished job, no hindsight;
    a store of a policy's own runs. Jobs cut short (``truncated``) are left out; ``ValueError`` when
    none finished or for an unknown ``allocation``, or as :func:`records_from_states`."""
    if allocation not in RECORDED_ALLOCATIONS:
        raise ValueError(f"allocation must be one of {', '.join(RECORDED_ALLOCATIONS)}, got {allocation!r}")
    finished = np.asarray(figures["finished"], dtype=bool)
    if not finished.any():
        raise ValueError("no job ran to completion: nothing to record (raise max_steps_in_episode)")
    jobs = {name: np.asarray(figures[name])[finished] for name in _JOB_FIELDS}
    gpus, cpus = (np.asarray(figures[name])[finished] for name in RECORDED_ALLOCATIONS[allocation])
    return _records(jobs, gpus, cpus, catalog)


# What a record says of its job (``episodes``' figure names).
_JOB_FIELDS = ("workload", "gpu_type", "epochs", DEADLINE_S, BUDGET_USD, "preference")


def _records(jobs: dict[str, Any], gpus: Any, cpus: Any, catalog: Catalog | None) -> list[HistoryRecord]:
    """Records of the jobs described by the :data:`_JOB_FIELDS` columns of ``jobs`` (one entry per
    job) at the allocations ``gpus``/``cpus``, each checked as a loaded one."""
    catalog = catalog or load_catalog()
    jobs = {name: np.asarray(jobs[name]) for name in _JOB_FIELDS}
    gpus, cpus = np.asarray(gpus), np.asarray(cpus)
    count = len(jobs["epochs"])
    if gpus.shape != (count,) or cpus.shape != (count,):
        raise ValueError(
            f"gpus and cpus must hold one count per job ({count},), got {gpus.shape} and {cpus.shape}"
        )
    records = []
    for i in range(count):
        record = HistoryRecord(
            workload=catalog.workload_names[int(jobs["workload"][i])],
            gpu_type=catalog.gpu_types[int(jobs["gpu_type"][i])],
            epochs=int(jobs["epochs"][i]),
            deadline_s=_shortest(jobs[DEADLINE_S][i]),
            budget_usd=_shortest(jobs[BUDGET_USD][i]),
            preference=tuple(_shortest(w) for w in jobs["preference"][i]),
            best_gpus=int(gpus[i]),
            best_cpus=int(cpus[i]),
        )
        record_from_mapping(dataclasses.asdict(record), f"job {i}", catalog)  # checked as a loaded one
        records.append(record)
    return records


def _shortest(value: Any) -> float:
    """A float32 figure as the shortest decimal that reads back as the same float32 (2993.1758, not
    its exact 2993.17578125): a store's file shows the env's numbers as written, not their binary
    noise."""
    return float(str(np.float32(value)))


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


def policy_records(
    env: JobAllocationEnv,
    params: EnvParams,
    policy: Policy,
    policy_params: Any,
    key: jax.Array,
    num_jobs: int,
    catalog: Catalog | None = None,
    allocation: str = "longest",
    start: str = "requested",
    start_rule: StartRule | None = None,
) -> list[HistoryRecord]:
    """``num_jobs`` fresh jobs of ``params`` (drawn from ``key``) run to the end by ``policy``
    (``episodes.run_episodes``), each started by the init strategy ``start`` (the user's request, as a
    platform starts its jobs, whatever ``params.init_strategy`` says) and each finished one recorded
    with the ``allocation`` it ran (:func:`records_from_episodes`): a store that knows only what the
    policy's own runs measured. A ``start_rule`` (``episodes``' start rules, e.g. a ``HistoryStart``
    of an earlier store) then moves each job before its first epoch."""
    params = with_init_strategy(params, start)
    figures = run_episodes(env, params, policy, key, num_jobs, policy_params, start=start_rule)
    return records_from_episodes(figures, catalog or env.catalog, allocation)

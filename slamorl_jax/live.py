"""The next allocation for a running training job, from what the job reports after an epoch.

A platform tool knows a running job's workload and GPU type (catalogue names), allocation, progress,
spend, last-epoch readings, SLAs, preference and the epochs it has run so far (:class:`LiveJob`);
:func:`recommend` turns them into the policy's inputs with the environment's own formulas
(``observation.observe``: the paper's 21 features and the forecast block; ``job_env.epoch_readings``:
forward-looking severities, adaptive weights) and returns the next allocation
(:class:`Recommendation`). The forecasts use the workload's calibrated profile on the policy's
cluster, corrected online by the job's ``history`` of measured epochs (``env/online_model.py``),
exactly as the env corrects them for a simulated job.

The observation is relative to the cluster the policy was trained on (its config's cluster: GPUs
and CPUs per node, nodes per job, CPU step). The "throughput" feature is the last epoch's throughput
relative to the job's reference throughput: by default the profile's forecast for the requested
allocation (``requested_gpus``/``requested_cpus``, default the current allocation).

:func:`recommend` refuses (``ValueError``) a finished job and an allocation the policy's cluster cannot
hold (current, requested or in ``history``; ``live_checks.check_in_cluster``) instead of clipping it,
and lists the readings outside the ranges the policy was trained on in
``Recommendation.outside_training`` (``live_checks.outside_training``); the recommended allocation
always fits the cluster.

A job's report, its JSON form and its checks are ``live_job.py``'s (:class:`LiveJob`); turning
a report into the state the policy sees is ``live_encoding.py``'s.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from slamorl_jax.agent.decision import greedy_actions
from slamorl_jax.env import action_sets
from slamorl_jax.env.catalog import (
    WORKLOAD_FIELDS,
    Catalog,
    gpu_type_index,
    job_figures,
    load_catalog,
    workload_index,
)
from slamorl_jax.env.forecast_summary import forecast_dicts, forecast_summary
from slamorl_jax.env.objectives import SLA_NAMES
from slamorl_jax.env.observation import FEATURE_NAMES, observe
from slamorl_jax.env.params import EnvParams, cluster_bounds
from slamorl_jax.env.state import EnvState
from slamorl_jax.env.target_grid import on_target_grid
from slamorl_jax.env.validation import validate_params_once
from slamorl_jax.live_checks import ClusterLimits, check_in_cluster, outside_training_many, uses_dual_weights
from slamorl_jax.live_encoding import live_state as live_state  # the live tools' one-job state
from slamorl_jax.live_encoding import live_states, padded_size
from slamorl_jax.live_job import LiveJob
from slamorl_jax.policy_checkpoint import LoadedPolicy


@dataclasses.dataclass(frozen=True)
class Recommendation:
    """The policy's decision for a live job and what it was based on."""

    gpus: int
    cpus: int
    gpu_delta: int
    cpu_delta: int
    action: int
    action_name: str
    action_probabilities: tuple[float, ...]
    weights: dict[str, float]
    severities: dict[str, float]
    observation: dict[str, float]
    # Readings outside what the policy was trained on (live_checks.outside_training); empty = none.
    outside_training: tuple[str, ...] = ()
    # Restart the job on other nodes at the same allocation (a targets_relocate policy's relocate
    # action: its nodes look slow, action_sets.py); False for every other action.
    relocate: bool = False
    # The per-SLA dual multipliers after this report: the job's ``multipliers`` next time. ``None``
    # for a policy of another weight mode, which neither reads nor carries them.
    multipliers: dict[str, float] | None = None
    # The policy's most probable action would have moved the job, but its probability was below the
    # policy's ``hold_below`` (``agent.decision``), so the answer keeps the allocation.
    held: bool = False
    # What the forecast the observation was built from projects, in seconds, dollars and SLAs, for
    # keeping the allocation, for the forecast's first choice and for the answer (``None`` where the
    # answer is not one of its candidates: a one-step move no target reaches, a relocation);
    # ``env/forecast_summary.py``.
    forecast: dict[str, Any] | None = None

    @property
    def in_training_range(self) -> bool:
        """Whether every reading of the job lies within what the policy was trained on."""
        return not self.outside_training

    def as_dict(self, brief: bool = False) -> dict[str, Any]:
        """JSON-ready form (with ``in_training_range``); ``brief``: without the probability of every
        action and the observation's features (hundreds of numbers), with the chosen action's
        probability (``action_probability``) instead."""
        whole = {**dataclasses.asdict(self), "in_training_range": self.in_training_range}
        if not brief:
            return whole
        chosen = self.action_probabilities[self.action]
        del whole["action_probabilities"], whole["observation"]
        return {**whole, "action_probability": chosen}


def check_recommendable(
    job: LiveJob, params: EnvParams | ClusterLimits, catalog: Catalog | None = None
) -> None:
    """``ValueError`` for a workload or GPU type ``catalog`` lacks (the policy's,
    ``LoadedPolicy.catalog``; default: the shipped one; the message lists its names), a finished
    job, an allocation outside the cluster of ``params`` (or its
    :class:`~slamorl_jax.live_checks.ClusterLimits`, read once for many jobs), or dual multipliers
    above the params' cap (``dual_max``)."""
    catalog = catalog or load_catalog()
    workload_index(job.workload, catalog)
    gpu_type_index(job.gpu_type, catalog)
    limits = params if isinstance(params, ClusterLimits) else ClusterLimits.of(params)
    if job.epochs_done >= job.epochs_total:
        raise ValueError(
            f"the job has finished (epochs_done = epochs_total = {job.epochs_total}): nothing to recommend"
        )
    check_in_cluster("current allocation", job.gpus, job.cpus, limits)
    if job.requested_gpus is not None or job.requested_cpus is not None:
        name = "requested allocation"
        if job.requested_gpus is None or job.requested_cpus is None:  # the other is the current's
            left_out = "requested_gpus" if job.requested_gpus is None else "requested_cpus"
            name += f" ({left_out} left out: the current allocation's)"
        check_in_cluster(name, *job.request, limits)
    for field in ("history", "probes"):
        for i, (gpus, cpus, _) in enumerate(getattr(job, field) or ()):
            check_in_cluster(f"{field}[{i}]", gpus, cpus, limits)
    if job.multipliers is not None and max(job.multipliers) > limits.dual_max:
        raise ValueError(
            f"multipliers must be at most the policy's cap on them ({limits.dual_max:g}; its answers' "
            f"never exceed it), got {list(job.multipliers)}"
        )


def recommend(policy: LoadedPolicy, job: LiveJob, params: EnvParams | None = None) -> Recommendation:
    """The greedy policy's next allocation for ``job`` (on ``params``' cluster; default: the policy's).

    Raises ``ValueError`` for a job :func:`check_recommendable` refuses and ``TypeError`` for
    arguments of the wrong type (read a mapping with :meth:`LiveJob.from_dict` first)."""
    if not isinstance(job, LiveJob):
        raise TypeError(f"job must be a LiveJob, got {type(job).__name__}")
    return _recommend_checked(policy, [job], params, lambda i: "")[0]


def recommend_many(
    policy: LoadedPolicy,
    jobs: Sequence[LiveJob],
    params: EnvParams | None = None,
    names: Sequence[str] | None = None,
) -> list[Recommendation]:
    """:func:`recommend` for every job of ``jobs``, in one compiled call: a platform answers all its
    running jobs at once (the same answer each job gets alone: the same action and allocation, the
    probabilities to float32 rounding; ``tests/test_live_batch.py``).

    ``ValueError`` naming the job (``job 3: ...``, or ``names[3]: ...`` when the caller names its
    jobs, e.g. by the line they came from) for a job :func:`check_recommendable` refuses,
    ``TypeError`` for arguments of the wrong type; no jobs, no answers."""
    if isinstance(jobs, (str, bytes, Mapping)) or not isinstance(jobs, Sequence):
        raise TypeError(f"jobs must be a sequence of LiveJob, got {type(jobs).__name__}")
    if not jobs:
        return []  # a platform with no running job
    for i, job in enumerate(jobs):
        if not isinstance(job, LiveJob):
            raise TypeError(f"jobs[{i}] must be a LiveJob, got {type(job).__name__}")
    if names is not None and len(names) != len(jobs):
        raise ValueError(f"names holds {len(names)} names for {len(jobs)} jobs")
    return _recommend_checked(policy, list(jobs), params, lambda i: f"{names[i] if names else f'job {i}'}: ")


def _recommend_checked(
    policy: LoadedPolicy, jobs: list[LiveJob], params: EnvParams | None, where: Callable[[int], str]
) -> list[Recommendation]:
    """The recommendations for ``jobs`` (of the right type); ``where(i)`` starts job ``i``'s refusal."""
    if not isinstance(policy, LoadedPolicy):
        raise TypeError(f"policy must be a LoadedPolicy, got {type(policy).__name__}")
    if params is not None and not isinstance(params, EnvParams):
        raise TypeError(f"params must be EnvParams (or None for the policy's), got {type(params).__name__}")
    if params is not None:
        # Caller's params: a field changed without its derived tables recomputed (with_values or
        # replace, then no with_derived_tables) gave another answer from the stale tables, silently.
        validate_params_once(params)
        policy.check_env_params(params)  # a policy saved with its own env params runs on them
        if not on_target_grid(params, policy.config.target_cpus_per_gpu):  # its features mean that grid
            grid = [float(x) for x in np.asarray(params.target_cpus_per_gpu)]
            raise ValueError(
                f"params' targets are at {grid} CPUs per GPU, the policy was trained on "
                f"{list(policy.config.target_cpus_per_gpu)}: build params with "
                "env.target_grid.with_target_grid(params, policy.config.target_cpus_per_gpu)"
            )
    params = params if params is not None else policy.env_params
    catalog = policy.catalog  # the job's names are read in the catalogue the policy learnt
    if (rows := int(np.shape(params.workloads.gamma)[0])) != catalog.num_workloads:
        raise ValueError(
            f"params hold {rows} workloads, the policy's catalogue {catalog.num_workloads}: build them "
            "on its catalogue (default_params(policy.catalog))"
        )
    limits = ClusterLimits.of(params)
    for i, job in enumerate(jobs):
        try:
            check_recommendable(job, limits, catalog)
        except ValueError as err:
            raise ValueError(f"{where(i)}{err}") from None
    # The batch padded to a power of two (copies of the first job, answers dropped): one compiled
    # program serves every batch size up to it.
    states = live_states(jobs, params, catalog, size=padded_size(len(jobs)))
    decided = _decide(policy.network, policy.config.actions, policy.params, states, params, policy.hold_below)
    obs, probabilities, action, gpus, cpus, relocate, held, summary = jax.device_get(decided)
    weights, severities, multipliers = jax.device_get((states.weights, states.severities, states.multipliers))
    for i in range(len(jobs)):  # a NaN would pick action 0 silently and print as invalid JSON
        if not (np.isfinite(obs[i]).all() and np.isfinite(weights[i]).all()):
            bad = [name for name, value in zip(FEATURE_NAMES, obs[i], strict=True) if not np.isfinite(value)]
            raise ValueError(
                f"{where(i)}the job's figures give a non-finite observation "
                f"({', '.join(bad[:3]) or 'weights'}): check the readings for values too small or too "
                "large to compare"
            )
    forecasts = forecast_dicts(summary, len(jobs))
    names = action_sets.action_names(policy.config.actions, params)
    cluster_note = _other_cluster(policy, params)  # one for the whole batch
    profile_note = _profile_check(policy, params)
    notes = [
        profile_note(job) + own + cluster_note + policy.untrained_names(job.workload, job.gpu_type)
        for own, job in zip(outside_training_many(jobs, params, catalog), jobs, strict=True)
    ]
    dual = uses_dual_weights(params)
    return [
        Recommendation(
            gpus=int(gpus[i]),
            cpus=int(cpus[i]),
            gpu_delta=int(gpus[i]) - job.gpus,
            cpu_delta=int(cpus[i]) - job.cpus,
            action=int(action[i]),
            action_name=names[int(action[i])],
            action_probabilities=_floats(probabilities[i]),
            weights=dict(zip(("time", "cost", "sla"), _floats(weights[i]), strict=True)),
            severities=dict(zip(SLA_NAMES, _floats(severities[i]), strict=True)),
            observation=dict(zip(FEATURE_NAMES, _floats(obs[i]), strict=True)),
            outside_training=notes[i],
            relocate=bool(relocate[i]),
            held=bool(held[i]),
            multipliers=dict(zip(SLA_NAMES, _floats(multipliers[i]), strict=True)) if dual else None,
            forecast=forecasts[i],
        )
        for i, job in enumerate(jobs)
    ]


@functools.partial(jax.jit, static_argnames=("network", "action_set"))
def _decide(
    network: Any,
    action_set: str,
    policy_params: Any,
    states: EnvState,
    params: EnvParams,
    hold_below: float | jax.Array = 0.0,
) -> tuple[jax.Array, ...]:
    """The greedy decision for a batch of live states, holding below ``hold_below`` (``agent.decision``;
    traced, so one program serves every threshold): ``(obs, action probabilities, action, gpus, cpus,
    relocate, held, forecast summary)``, each with the batch's leading axis; ``held`` where the rule
    kept the allocation the argmax would move."""
    obs = jax.vmap(observe, in_axes=(0, None))(states, params)
    logits = network.apply(policy_params, obs, states.weights)[0]
    action, argmax = greedy_actions(logits, jnp.asarray(hold_below, jnp.float32)), greedy_actions(logits)
    apply = jax.vmap(action_sets.apply, in_axes=(0, 0, 0, None))
    gpus, cpus = apply(action, states.gpus, states.cpus, params)
    relocate = action_sets.relocates(action, action_set)
    argmax_gpus, argmax_cpus = apply(argmax, states.gpus, states.cpus, params)
    argmax_moves = (
        (argmax_gpus != states.gpus)
        | (argmax_cpus != states.cpus)
        | action_sets.relocates(argmax, action_set)
    )
    held = (action != argmax) & argmax_moves
    summary = jax.vmap(forecast_summary, in_axes=(0, None, 0, 0, 0))(states, params, gpus, cpus, relocate)
    return obs, jax.nn.softmax(logits, axis=-1), action, gpus, cpus, relocate, held, summary


def _other_cluster(policy: LoadedPolicy, params: EnvParams) -> tuple[str, ...]:
    """A note for every answer when ``params``' cluster is not the one the policy was trained on: its
    observation scales allocations to the cluster, so it reads other numbers for the same job."""
    try:
        trained = policy.env_params
    except ValueError:  # saved with env params of its own: check_env_params compared them already
        return ()
    if params is trained:
        return ()
    ours, theirs = (tuple(int(x) for x in jax.device_get(cluster_bounds(p))) for p in (params, trained))
    if ours == theirs:
        return ()

    def shape(bounds: tuple[int, ...]) -> str:
        return f"{bounds[0]} GPUs a job, {bounds[1]} GPUs and {bounds[2]} CPUs a node, CPU step {bounds[3]}"

    return (f"the cluster ({shape(ours)}) is not the policy's ({shape(theirs)}): another observation scale",)


def _profile_check(policy: LoadedPolicy, params: EnvParams) -> Callable[[LiveJob], tuple[str, ...]]:
    """Per job, a note where ``params``' row of its workload (its index in the policy's catalogue)
    holds other figures than the catalogue gives it (``catalog.job_figures``): params built on
    another catalogue, whose rows are other workloads, read the job as another one. Nothing to
    check for the policy's own params (built on its catalogue, or those it was saved with)."""
    # (a policy saved with params of its own builds no env_params: check_env_params compared them)
    try:
        own = policy.trained_env_params is not None or params is policy.env_params
    except ValueError:
        own = True
    if own:
        return lambda job: ()
    catalog, tables = policy.catalog, jax.device_get(params.workloads)  # once for the batch

    def note(job: LiveJob) -> tuple[str, ...]:
        w, t = workload_index(job.workload, catalog), gpu_type_index(job.gpu_type, catalog)
        given = {name: getattr(tables, name)[w] for name in WORKLOAD_FIELDS}
        given["compute_speed"] = tables.compute_speed[w, t]
        ours = job_figures(catalog, job.workload, job.gpu_type)
        if not (differ := [name for name, value in given.items() if float(value) != ours[name]]):
            return ()
        shown = ", ".join(differ[:3]) + (", ..." if len(differ) > 3 else "")
        return (
            f"params' figures for {job.workload} on {job.gpu_type} ({shown}) differ from the policy's "
            "catalogue's: edited, or built on another catalogue, which reads the job as another "
            "workload (build params on policy.catalog)",
        )

    return note


def _floats(x: jax.Array | Sequence[float]) -> tuple[float, ...]:
    return tuple(float(v) for v in np.asarray(x).reshape(-1))

"""Mid-job changes of a job's world (the ``shifting`` scenario): one event per job, drawn at reset.

A job draws an event kind (``EnvParams.shift_probs`` over :data:`SHIFT_KINDS`), the epoch it
happens after and a size, all from its reset draws, so every run of a seed meets the same event
at the same epoch whatever the policy does. The event happens at the end of epoch ``at``
(``JobSpec.shift_epoch``; ``at`` uniform in ``[round(shift_at_low x E), round(shift_at_high x E)]``,
at least 1, ``E`` the job's epochs); it never happens when ``at >= E`` (a one-epoch job) or the
kind is ``none``. The size is uniform in ``[shift_size_low, shift_size_high]`` of its kind:

==============  ============================================================  =============
kind            what happens from epoch ``at + 1`` on                          size (default)
==============  ============================================================  =============
``none``        nothing                                                        -
``contention``  a long spell: the job is contended for the rest of its run      -
                unless it leaves its nodes (a noisy neighbour that stays;
                compute and inter-node sync slow down by
                ``contention_*_slowdown``, as in a contended epoch)
``slow_node``   a failed node is replaced by a slower one: the job's true      1.25 - 2.0
                compute time per step x size (seen only through its epochs)
                until it leaves its nodes
``price_rise``  spot prices rise: the job's GPU price per hour x size          1.5 - 3.0
``deadline_cut`` the user moves the deadline earlier: deadline x size, never    0.6 - 0.9
                below ``feasibility_margin`` x the profile's fastest static
                run's time (the user's plan; a job slower than its profile
                may miss it whatever it does, as the generator's floors)
``budget_cut``  the user cuts the budget: budget x size, never below the       0.6 - 0.9
                margin x the profile's cheapest static run's cost
``preemption``  the job is preempted and restarts on ``floor(size x GPUs)``    0.5
                GPUs (at least 1; CPUs per GPU kept, on the CPU lattice)
                before epoch ``at + 1``, paying the checkpoint-restart pause
                (``reallocation_pause_s``) with that epoch; the decision taken
                before it applies from there (a target moves the job on, a
                relative move or keep starts from the new allocation)
==============  ============================================================  =============

**Leaving the nodes.** A contention spell and a slow node belong to the nodes the job runs on, not
to the job: a GPU change checkpoints the job and restarts it on a fresh placement, which the
scheduler picks away from the node that slowed it, so the first GPU change at or after the event
(the agent's move, paying ``reallocation_pause_s``) ends either for good (``EnvState.event_left``;
``EnvParams.moves_leave_contention = False`` keeps both, and random contention, through moves, as
the environment before 7553e9f did).
A CPU-only change restarts the data loaders in place and leaves nothing. (Our assumption, as are the
rates: it is what makes re-planning worth more than one static choice in hindsight, which holds its
allocation through the event; ``env/plans.py`` models it for the oracles.) The env's own random
contention (``job_env.py``) is left the same way: a GPU change lands the job on nodes that start
uncontended, then contended with ``contention_start_prob`` an epoch as any.

What the agent sees: a cut deadline or budget and a new price at once (the SLA features, the
forecasts and the readings use them from the next observation); a preemption as its new
allocation one decision later (it happens while the job restarts for its next epoch); a slower
node and a contention spell only through the epochs it measures (the online
model, ``online_model.py``, and the observation's ``surprise``: the last epoch against the model's
forecast of it, ``forecast.py``). The job-level SLAs are judged against the targets in force at the end.
Probabilities and sizes are our documented assumptions (no public trace gives per-job rates of
these events); the ``shifting`` scenario (``scenarios.py``) gives every job one event, kinds
equally likely, and ``mixed`` gives 30 % of its jobs one.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from slamorl_jax.env import draws as d
from slamorl_jax.env.actions import clip_allocation
from slamorl_jax.env.lookup import take_small
from slamorl_jax.env.params import EnvParams, cluster_bounds
from slamorl_jax.env.pauses import move_pause_s
from slamorl_jax.env.state import JobSpec

SHIFT_KINDS = ("none", "contention", "slow_node", "price_rise", "deadline_cut", "budget_cut", "preemption")
NUM_SHIFT_KINDS = len(SHIFT_KINDS)
NONE, CONTENTION, SLOW_NODE, PRICE_RISE, DEADLINE_CUT, BUDGET_CUT, PREEMPTION = range(NUM_SHIFT_KINDS)
# Default per-kind size ranges (module docstring; unused kinds 0).
DEFAULT_SHIFT_SIZE_LOW = (0.0, 0.0, 1.25, 1.5, 0.6, 0.6, 0.5)
DEFAULT_SHIFT_SIZE_HIGH = (0.0, 0.0, 2.0, 3.0, 0.9, 0.9, 0.5)
DEFAULT_SHIFT_AT = (0.2, 0.7)  # the event's epoch, as fractions of the job's epochs
DEFAULT_MIXED_SHIFT_PROB = 0.3  # share of ``mixed`` jobs with an event (kinds equally likely)


def no_shift_probs() -> tuple[float, ...]:
    """``shift_probs`` of a scenario without events."""
    return (1.0,) + (0.0,) * (NUM_SHIFT_KINDS - 1)


def event_probs(share: float) -> tuple[float, ...]:
    """``shift_probs`` where a share ``share`` of jobs meets one event, every kind equally likely."""
    each = share / (NUM_SHIFT_KINDS - 1)
    return (1.0 - share,) + (each,) * (NUM_SHIFT_KINDS - 1)


def draw_shift(
    u: tuple[jax.Array, ...],
    epochs: jax.Array,
    deadline_s: jax.Array,
    budget_usd: jax.Array,
    deadline_floor_s: jax.Array,
    budget_floor_usd: jax.Array,
    params: EnvParams,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The job's event ``(kind, epoch it happens after, value)`` from its reset draws ``u``.

    ``value`` is what the event sets: the new deadline (s) or budget ($) of a cut (floored as the
    module docstring says), the compute or price factor, the share of GPUs a preemption keeps.
    """
    kind = d.categorical(u[d.SHIFT_KIND], params.shift_probs)
    epochs_f = epochs.astype(jnp.float32)
    low = jnp.maximum(jnp.round(params.shift_at_low * epochs_f).astype(jnp.int32), 1)
    high = jnp.maximum(jnp.round(params.shift_at_high * epochs_f).astype(jnp.int32), low)
    at = d.uniform_int(u[d.SHIFT_EPOCH], low, high)
    size_low = take_small(params.shift_size_low, kind)
    size = size_low + (take_small(params.shift_size_high, kind) - size_low) * u[d.SHIFT_SIZE]
    value = jnp.select(
        [kind == DEADLINE_CUT, kind == BUDGET_CUT],
        [
            jnp.minimum(deadline_s, jnp.maximum(size * deadline_s, deadline_floor_s)),
            jnp.minimum(budget_usd, jnp.maximum(size * budget_usd, budget_floor_usd)),
        ],
        size,
    )
    return kind, at, value


def happens(job: JobSpec) -> jax.Array:
    """Whether the job's event happens at all (a kind, and an epoch before the job's last)."""
    return jnp.logical_and(job.shift_kind != NONE, job.shift_epoch < job.epochs)


def fires(job: JobSpec, epoch_after: jax.Array) -> jax.Array:
    """Whether the event happens at the end of the epoch that brings the job to ``epoch_after``."""
    return jnp.logical_and(happens(job), epoch_after == job.shift_epoch)


def preempts(job: JobSpec, epoch_before: jax.Array) -> jax.Array:
    """Whether a preemption restarts the job before the epoch that starts after ``epoch_before``."""
    return jnp.logical_and(
        jnp.logical_and(happens(job), job.shift_kind == PREEMPTION), epoch_before == job.shift_epoch
    )


def preemption(
    gpus: jax.Array, cpus: jax.Array, keep_share: jax.Array, preempted: jax.Array, params: EnvParams
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Where a job on ``(gpus, cpus)`` restarts where ``preempted`` (else where it is), and the
    restart pause it pays (``reallocation_pause_s`` when the allocation changes, else 0)."""
    forced_gpus, forced_cpus = preempted_allocation(gpus, cpus, keep_share, params)
    after_gpus = jnp.where(preempted, forced_gpus, gpus)
    after_cpus = jnp.where(preempted, forced_cpus, cpus)
    moved = move_pause_s(gpus, cpus, after_gpus, after_cpus, params) > 0
    return after_gpus, after_cpus, jnp.where(moved, params.reallocation_pause_s, 0.0)


def on_the_nodes(job: JobSpec, epoch_before: jax.Array) -> jax.Array:
    """Whether the job's event is one of its nodes' (a contention spell or a slow node) and has
    happened before the epoch that starts after ``epoch_before`` epochs."""
    node_kind = jnp.logical_or(job.shift_kind == CONTENTION, job.shift_kind == SLOW_NODE)
    return jnp.logical_and(jnp.logical_and(happens(job), node_kind), epoch_before >= job.shift_epoch)


def leaves(job: JobSpec, epoch_before: jax.Array, relocated: jax.Array) -> jax.Array:
    """Whether a job restarted on a fresh placement (``relocated``: its GPUs changed) before the epoch
    after ``epoch_before`` leaves its event behind (module docstring)."""
    return jnp.logical_and(on_the_nodes(job, epoch_before), relocated)


def node_slowdown(job: JobSpec, epoch_before: jax.Array, left: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(spell, compute factor)`` of the epoch that starts after ``epoch_before`` epochs: whether a
    contention spell slows it, and what its true compute time per step is multiplied by (a slow
    node's size, else 1); neither once the job has ``left`` its nodes."""
    holds = jnp.logical_and(on_the_nodes(job, epoch_before), jnp.logical_not(left))
    spell = jnp.logical_and(holds, job.shift_kind == CONTENTION)
    slow = jnp.logical_and(holds, job.shift_kind == SLOW_NODE)
    return spell, jnp.where(slow, job.shift_value, 1.0)


def shifted_job(job: JobSpec, fire: jax.Array) -> JobSpec:
    """``job`` after its event where ``fire`` (the targets and prices it changes; a slow node and a
    contention spell act through :func:`node_slowdown` instead, as they end when the job leaves)."""
    kind, value = job.shift_kind, job.shift_value

    def scaled(x: jax.Array, which: int) -> jax.Array:
        return jnp.where(jnp.logical_and(fire, kind == which), x * value, x)

    def replaced(x: jax.Array, which: int) -> jax.Array:
        return jnp.where(jnp.logical_and(fire, kind == which), value, x)

    return job.replace(
        constants=job.constants.replace(
            gpu_price_per_hour=scaled(job.constants.gpu_price_per_hour, PRICE_RISE),
        ),
        profile=job.profile.replace(gpu_price_per_hour=scaled(job.profile.gpu_price_per_hour, PRICE_RISE)),
        sla_targets=job.sla_targets.replace(
            deadline_s=replaced(job.sla_targets.deadline_s, DEADLINE_CUT),
            budget_usd=replaced(job.sla_targets.budget_usd, BUDGET_CUT),
        ),
    )


def preempted_allocation(
    gpus: jax.Array, cpus: jax.Array, keep_share: jax.Array, params: EnvParams
) -> tuple[jax.Array, jax.Array]:
    """Where a preemption restarts a job on ``(gpus, cpus)``: ``floor(keep_share x gpus)`` GPUs (at
    least 1), the same CPUs per GPU rounded to the CPU lattice, clipped to the cluster."""
    new_gpus = jnp.maximum(jnp.floor(keep_share * gpus.astype(jnp.float32)).astype(jnp.int32), 1)
    step = params.cpu_step.astype(jnp.float32)
    per_gpu = cpus.astype(jnp.float32) / gpus.astype(jnp.float32)
    new_cpus = (jnp.round(per_gpu * new_gpus.astype(jnp.float32) / step) * step).astype(jnp.int32)
    return clip_allocation(new_gpus, new_cpus, *cluster_bounds(params))

"""Action sets: the paper's 9 one-step moves, absolute targets, and the default that adds relocate.

=========  =======  ============================================================================
set        actions  meaning
=========  =======  ============================================================================
``paper``  9        GPU {-1, 0, +1} x CPU {-step, 0, +step} (SLA-MORL's design, ``actions.py``);
                    index ``3 * (gpu_delta + 1) + (cpu_steps + 1)``, 4 keeps the allocation
``targets`` 89      the same 9 moves at indices 0-8, then 80 absolute targets at 9-88: every
                    GPU count of ``EnvParams.target_gpus`` x every CPUs-per-GPU value of
                    ``EnvParams.target_cpus_per_gpu`` (GPU-major: index ``9 + 5 * i + j``)
``targets_  90      ``targets``, then **relocate** at 89: the same allocation on fresh nodes (the
relocate``          job checkpoints and restarts elsewhere, paying the GPU re-allocation pause);
(default)           the default since 2026-12-03 (docs/scenarios.md)
=========  =======  ============================================================================

Relocating is what a platform does for a job its nodes slow down (a noisy neighbour, a degraded
node): the same GPUs and CPUs, placed elsewhere. In the env it leaves what a GPU change leaves (the
nodes' random contention, and a contention spell or a slower node of ``shifts.py``) at the price of
one checkpoint-restart pause (``reallocation_pause_s``, billed and counted as a re-allocation),
without changing the allocation; under ``EnvParams.moves_leave_contention = False`` it leaves
nothing and still pays the pause. The other sets can leave the nodes only by changing the GPU count.

A target ``(g, x)`` asks for ``g`` GPUs and ``round(g * x / cpu_step) * cpu_step`` CPUs; like every
action it is then clipped to the cluster (``actions.clip_allocation``), so a target above the
cluster's size asks for all of it. One target re-allocates once (one pause) to anywhere on a coarse
grid; the moves fine-tune from there. The default grid (``defaults.py``) is sized to the default
cluster (4 GPUs a node, at most 16 a job): every GPU count 1-16 (the best count is often odd or
just past a node boundary: 5 GPUs for ResNet-18 on V100s, 11 for YOLOv3), and 0 (the fewest CPUs
the cluster allows, one CPU step), 2, 4, 8 and 12 CPUs per GPU, which bracket Synergy's saturation
points (3-7.3 CPUs per GPU for image and audio models) and the calibration runs' 8 and 12, and
reach the jobs that need almost no CPUs (the Transformer, the LSTM); the CPU moves fine-tune in
between. ``python -m benchmarks.target_grid`` measures what a grid costs a static choice on it
against the oracle's full lattice: without the fewest-CPU option the best static target takes
1.9 % more time than the oracle per deadline-critical job and 4.1 % per balanced one, with it 1.0 %
and 1.3 % (``benchmarks/results/target_grid.md``). A coarser
grid of 8 GPU counts (1, 2, 3, 4, 6, 8, 12, 16) left the policy at 4 GPUs where 5 were 1.6x faster:
it could not see where a one-GPU move would lead.

Out-of-range action indices are clipped to the set (the env documents this); the paper's moves have
the same indices in both sets, so a controller that uses only them works on either.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from slamorl_jax.env.actions import NO_OP_ACTION, clip_allocation
from slamorl_jax.env.actions import NUM_ACTIONS as NUM_MOVES
from slamorl_jax.env.actions import apply_action as apply_move
from slamorl_jax.env.params import EnvParams, cluster_bounds

ACTION_SETS = ("paper", "targets", "targets_relocate")
DEFAULT_ACTION_SET = "targets_relocate"
# The set every other set's actions keep their meaning in (each is a prefix of it): evaluation and
# the benchmarks run policies of any set, and every baseline, on one env of this set.
WIDEST_ACTION_SET = "targets_relocate"
NUM_TARGET_GPUS = 16
NUM_TARGET_CPUS_PER_GPU = 5
NUM_TARGETS = NUM_TARGET_GPUS * NUM_TARGET_CPUS_PER_GPU
RELOCATE_ACTION = NUM_MOVES + NUM_TARGETS  # in ``targets_relocate``: the same allocation, fresh nodes
RELOCATE_NAME = "relocate (same allocation, fresh nodes)"


def check_action_set(name: str) -> str:
    """Return ``name`` if it is an action set, else raise a ``ValueError`` listing the valid ones."""
    if name not in ACTION_SETS:
        raise ValueError(f"unknown action set {name!r}; choose one of: {', '.join(ACTION_SETS)}")
    return name


def has_targets(name: str) -> bool:
    """Whether the named set has the absolute targets (at indices ``NUM_MOVES`` on)."""
    return check_action_set(name) != "paper"


def can_relocate(name: str) -> bool:
    """Whether the named set has the relocate action (``RELOCATE_ACTION``)."""
    return check_action_set(name) == "targets_relocate"


def num_actions(name: str) -> int:
    """Number of actions of the named set."""
    return NUM_MOVES + (NUM_TARGETS if has_targets(name) else 0) + (1 if can_relocate(name) else 0)


def relocates(action: jax.Array | int, name: str) -> jax.Array:
    """Whether ``action`` (already clipped to the set) is the named set's relocate action (bool)."""
    return jnp.logical_and(can_relocate(name), jnp.asarray(action, jnp.int32) == RELOCATE_ACTION)


def emitted_relocation(action: jax.Array | int, name: str) -> jax.Array:
    """Whether ``action`` as a policy emits it (any integer; the env step clips it to the set first)
    relocates the job (bool): what episode summaries and benchmarks count as a relocation."""
    return relocates(clip_action(action, name), name)


def action_names(
    name: str, params: EnvParams | None = None, cpus_per_gpu: tuple[float, ...] | None = None
) -> tuple[str, ...]:
    """Human-readable name of every action of the set (targets name their grid point): the grid of
    ``params``, or else the default GPU counts x ``cpus_per_gpu`` (default: the default grid's). A
    target beyond what a job may hold on ``params``' cluster says where it lands (``target 16 GPUs
    (8 here)``: the env clips it)."""
    from slamorl_jax.env.actions import ACTION_NAMES

    if check_action_set(name) == "paper":
        return ACTION_NAMES
    if params is None:
        from slamorl_jax.env.defaults import DEFAULT_TARGET_CPUS_PER_GPU, DEFAULT_TARGET_GPUS

        gpus, ratios, most = DEFAULT_TARGET_GPUS, cpus_per_gpu or DEFAULT_TARGET_CPUS_PER_GPU, None
    else:
        gpus = [int(g) for g in jax.device_get(params.target_gpus)]
        ratios = [float(x) for x in jax.device_get(params.target_cpus_per_gpu)]
        most = int(jax.device_get(cluster_bounds(params)[0]))

    def gpus_name(count: int) -> str:
        return f"{count} GPUs" if most is None or count <= most else f"{count} GPUs ({most} here)"

    targets = tuple(
        f"target {gpus_name(int(g))} x {_cpus_per_gpu_name(float(x))}" for g in gpus for x in ratios
    )
    return ACTION_NAMES + targets + ((RELOCATE_NAME,) if can_relocate(name) else ())


def _cpus_per_gpu_name(ratio: float) -> str:
    """A target's CPU part: ``4 CPUs/GPU``, or ``fewest CPUs`` for 0 (one CPU step)."""
    return f"{ratio:g} CPUs/GPU" if ratio > 0 else "fewest CPUs"


def target_allocations(params: EnvParams) -> tuple[jax.Array, jax.Array]:
    """``(gpus, cpus)`` of every target, shape ``(NUM_TARGETS,)``, clipped to the cluster."""
    gpus = jnp.repeat(params.target_gpus, NUM_TARGET_CPUS_PER_GPU)
    ratios = jnp.tile(params.target_cpus_per_gpu, NUM_TARGET_GPUS)
    return target_cpus(gpus, ratios, params)


def target_cpus(gpus: jax.Array, cpus_per_gpu: jax.Array, params: EnvParams) -> tuple[jax.Array, jax.Array]:
    """A target's clipped allocation: ``gpus`` GPUs and ``cpus_per_gpu`` CPUs each on the step lattice."""
    step = params.cpu_step.astype(jnp.float32)
    cpus = (jnp.round(gpus.astype(jnp.float32) * cpus_per_gpu / step) * step).astype(jnp.int32)
    return clip_allocation(gpus, cpus, *cluster_bounds(params))


def apply(
    action: jax.Array | int, gpus: jax.Array, cpus: jax.Array, params: EnvParams
) -> tuple[jax.Array, jax.Array]:
    """Allocation after ``action`` of any set (indices 0-8 move, 9-88 go to a target, relocate keeps
    the allocation), clipped.

    Targets come from ``params.target_allocation`` (a derived table of :func:`target_allocations`)."""
    action = jnp.asarray(action, jnp.int32)
    move_gpus, move_cpus = apply_move(jnp.minimum(action, NUM_MOVES - 1), gpus, cpus, *cluster_bounds(params))
    k = jnp.clip(action - NUM_MOVES, 0, NUM_TARGETS - 1)
    # One row gather: compare-and-select over 80 rows would be copied into every fusion that reads
    # the allocation (XLA recomputes cheap producers per consumer), many times a step.
    goal = jnp.take(params.target_allocation, k, axis=0)
    goal_gpus, goal_cpus = goal[..., 0], goal[..., 1]
    is_target = jnp.logical_and(action >= NUM_MOVES, action < RELOCATE_ACTION)
    move_gpus = jnp.where(action == RELOCATE_ACTION, gpus, move_gpus)  # relocate: the same allocation
    move_cpus = jnp.where(action == RELOCATE_ACTION, cpus, move_cpus)
    return jnp.where(is_target, goal_gpus, move_gpus), jnp.where(is_target, goal_cpus, move_cpus)


def traced_as_array(action: Any) -> Any:
    """A list or tuple of actions holding traced values (``[a]`` under ``jit``) as one array, which
    NumPy cannot read; anything else as it is (host lists keep their own integer type)."""
    if isinstance(action, list | tuple) and any(
        isinstance(leaf, jax.Array) for leaf in jax.tree.leaves(action)
    ):
        return jnp.asarray(action)
    return action


def check_action_dtype(action: jax.Array | int) -> None:
    """``TypeError`` unless ``action`` holds integers (not floats, bools or strings).

    The dtype is static, so under ``jit`` this runs once at trace time and costs the step nothing; a
    float index would otherwise be truncated silently (2.7 acting as 2)."""
    action = traced_as_array(action)
    dtype = action.dtype if hasattr(action, "dtype") else np.asarray(action).dtype
    if not jnp.issubdtype(dtype, jnp.integer):
        raise TypeError(f"action must be an integer action index, got {dtype} {action!r:.60}")


def clip_action(action: jax.Array | int, name: str) -> jax.Array:
    """``action`` clipped to the valid indices of the named set (``TypeError`` unless it holds
    integers: :func:`check_action_dtype`)."""
    action = traced_as_array(action)
    check_action_dtype(action)
    last = num_actions(name) - 1
    # Clipped in its own integer type before the int32 cast, which would wrap a large index (a host
    # int64, or a JAX uint32 of 2**31 or more) to a negative one, clipped to action 0.
    if not isinstance(action, jax.Array):
        return jnp.asarray(np.clip(np.asarray(action), 0, last), jnp.int32)
    return jnp.asarray(jnp.clip(action, 0, last), jnp.int32)


def nearest_action(
    name: str, gpus: jax.Array, cpus: jax.Array, goal_gpus: jax.Array, goal_cpus: jax.Array, params: EnvParams
) -> jax.Array:
    """The action of set ``name`` whose allocation from ``(gpus, cpus)`` lands nearest to
    ``(goal_gpus, goal_cpus)`` (one job; int32 scalar): the smallest ``|log2(g / goal_g)| +
    |log2(c / goal_c)|``, the goal clipped to the cluster first. An allocation the set reaches
    exactly gets its action; staying is always keep, then the lowest index wins a tie (a one-step
    move before the target that lands in the same place). Learning from logged decisions
    (``agent/imitation.py``) labels each decision with it."""
    goal_gpus, goal_cpus = clip_allocation(
        jnp.asarray(goal_gpus, jnp.int32), jnp.asarray(goal_cpus, jnp.int32), *cluster_bounds(params)
    )
    actions = jnp.arange(num_actions(name), dtype=jnp.int32)
    to_gpus, to_cpus = apply(actions, gpus, cpus, params)
    log2 = lambda x: jnp.log2(x.astype(jnp.float32))  # noqa: E731
    distance = jnp.abs(log2(to_gpus) - log2(goal_gpus)) + jnp.abs(log2(to_cpus) - log2(goal_cpus))
    distance = jnp.where(actions == NO_OP_ACTION, distance - 1e-3, distance)  # keep before a duplicate
    return jnp.argmin(distance).astype(jnp.int32)

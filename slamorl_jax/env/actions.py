"""The 9 re-allocation actions: GPU {-1, 0, +1} x CPU {-step, 0, +step}.

Action ``a`` decodes to ``gpu_delta = a // 3 - 1`` and ``cpu_delta = (a % 3 - 1) * cpu_step``, so
``a = 4`` keeps the allocation. The new allocation is clipped to the cluster: ``1 <= gpus <= max_gpus``
and ``cpu_step <= cpus <= nodes(gpus) * cpus_per_node`` with CPUs kept on multiples of ``cpu_step``.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

NUM_ACTIONS = 9
NO_OP_ACTION = 4
GPU_DELTAS = np.repeat(np.array([-1, 0, 1], dtype=np.int32), 3)
CPU_STEP_DELTAS = np.tile(np.array([-1, 0, 1], dtype=np.int32), 3)
ACTION_NAMES = tuple(
    f"gpu{int(dg):+d}/cpu{'-step' if dc < 0 else '+step' if dc > 0 else '+0'}"
    for dg, dc in zip(GPU_DELTAS, CPU_STEP_DELTAS, strict=True)
)


def encode_action(gpu_delta: int, cpu_step_delta: int) -> int:
    """Action index for a GPU change in {-1, 0, 1} and a CPU change in steps {-1, 0, 1}."""
    if gpu_delta not in (-1, 0, 1) or cpu_step_delta not in (-1, 0, 1):
        raise ValueError("gpu_delta and cpu_step_delta must each be -1, 0 or 1")
    return 3 * (gpu_delta + 1) + (cpu_step_delta + 1)


def floor_div(a: jnp.ndarray, b: jnp.ndarray | int) -> jnp.ndarray:
    """``a // b`` for small non-negative integers (< 2**24), computed in float32.

    XLA on CPU has no vector integer division, so ``//`` on int32 runs as a slow scalar loop; the
    float32 quotient of such small integers is exact enough that its floor is the integer quotient.
    """
    quotient = jnp.asarray(a).astype(jnp.float32) / jnp.asarray(b).astype(jnp.float32)
    return jnp.floor(quotient + 1e-4).astype(jnp.int32)


def cpu_cap(
    gpus: jnp.ndarray, gpus_per_node: ArrayLike, cpus_per_node: ArrayLike, cpu_step: ArrayLike
) -> jnp.ndarray:
    """Most CPUs a job of ``gpus`` GPUs can hold: its nodes' CPUs, floored to a ``cpu_step`` multiple."""
    nodes = floor_div(gpus + gpus_per_node - 1, gpus_per_node)
    return floor_div(nodes * cpus_per_node, cpu_step) * cpu_step


def clip_allocation(
    gpus: jnp.ndarray,
    cpus: jnp.ndarray,
    max_gpus: ArrayLike,
    gpus_per_node: ArrayLike,
    cpus_per_node: ArrayLike,
    cpu_step: ArrayLike,
) -> tuple[jnp.ndarray, jnp.ndarray]:
    """Clip an allocation into the cluster's bounds, CPUs snapped down to the ``cpu_step`` lattice."""
    gpus = jnp.clip(gpus, 1, max_gpus)
    cpus = jnp.clip(
        floor_div(cpus, cpu_step) * cpu_step, cpu_step, cpu_cap(gpus, gpus_per_node, cpus_per_node, cpu_step)
    )
    return gpus, cpus


def apply_action(
    action: jnp.ndarray,
    gpus: jnp.ndarray,
    cpus: jnp.ndarray,
    max_gpus: ArrayLike,
    gpus_per_node: ArrayLike,
    cpus_per_node: ArrayLike,
    cpu_step: ArrayLike,
) -> tuple[jnp.ndarray, jnp.ndarray]:
    """Allocation after ``action``: deltas applied, then clipped to the cluster."""
    action = jnp.asarray(action, dtype=jnp.int32)
    gpu_delta = floor_div(action, 3) - 1
    cpu_delta = (action - 3 * floor_div(action, 3) - 1) * cpu_step
    return clip_allocation(
        gpus + gpu_delta, cpus + cpu_delta, max_gpus, gpus_per_node, cpus_per_node, cpu_step
    )


def move_toward(
    gpus: jnp.ndarray, cpus: jnp.ndarray, dest_gpus: jnp.ndarray, dest_cpus: jnp.ndarray
) -> jnp.ndarray:
    """The paper move (action 0-8) from ``(gpus, cpus)`` toward ``(dest_gpus, dest_cpus)``: each
    coordinate by the sign of its difference (CPUs in steps; both on the CPU-step lattice)."""
    gpu_delta = jnp.sign(dest_gpus - gpus)
    cpu_delta = jnp.sign(dest_cpus - cpus)
    return (3 * (gpu_delta + 1) + (cpu_delta + 1)).astype(jnp.int32)

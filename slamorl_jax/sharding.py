"""The env batch sharded over a 1-D device mesh; parameters and optimiser state replicated.

One mesh axis, ``ENV_AXIS``, spans every device JAX sees (every device of every process after
``jax.distributed.initialize``). Arrays whose leading axis is the env batch (env state,
observations, episode returns, rollout buffers, minibatch rows) are split along it; everything else
(network parameters, optimiser state, PRNG keys, counters) is replicated. The learner stays one
global program: XLA's partitioner runs each device's share of the envs and inserts the all-reduces
that average gradients over every env, so results depend on the device count only through the
order of floating-point sums. On one device every sharding is trivial and the program is the
single-device one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

ENV_AXIS = "envs"


def env_mesh(devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A 1-D mesh named ``ENV_AXIS`` over ``devices`` (default: every device of every process)."""
    devices = jax.devices() if devices is None else list(devices)
    return Mesh(np.asarray(devices), (ENV_AXIS,))


def check_divisible(num_envs: int, device_count: int) -> None:
    """``num_envs`` splits evenly over ``device_count`` devices (else one-line ``ValueError``)."""
    if num_envs % device_count:
        raise ValueError(
            f"--num_envs={num_envs:,} must be a multiple of the {device_count} devices it is "
            f"sharded over (e.g. {max(device_count, num_envs // device_count * device_count):,})"
        )


def batch_sharding(mesh: Mesh, axis: int = 0) -> NamedSharding:
    """Arrays split along ``axis`` over the mesh (the axes before it replicated)."""
    return NamedSharding(mesh, PartitionSpec(*([None] * axis), ENV_AXIS))


def replicated(mesh: Mesh) -> NamedSharding:
    """Arrays held whole on every device of the mesh."""
    return NamedSharding(mesh, PartitionSpec())


def constrain_batch(tree: Any, mesh: Mesh | None, axis: int = 0) -> Any:
    """``tree``'s leaves split along ``axis`` inside a jitted function; unchanged without a mesh or
    where that axis does not divide by the device count (XLA then chooses)."""
    if mesh is None:
        return tree
    sharding = batch_sharding(mesh, axis)

    def leaf(x: jax.Array) -> jax.Array:
        if x.ndim <= axis or x.shape[axis] % mesh.size:
            return x
        return jax.lax.with_sharding_constraint(x, sharding)

    return jax.tree.map(leaf, tree)


def tree_shardings(tree: Any, mesh: Mesh, batch_fields: Sequence[str]) -> Any:
    """Shardings for a dataclass-like pytree: fields named in ``batch_fields`` split along their
    leading axis, every other leaf replicated."""
    names = {field: batch_sharding(mesh) for field in batch_fields}

    def leaf(path: tuple, _: Any) -> NamedSharding:
        top = getattr(path[0], "name", None) if path else None
        return names.get(top, replicated(mesh))

    return jax.tree_util.tree_map_with_path(leaf, tree)

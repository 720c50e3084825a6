"""The jitted ``init`` and ``update_chunk`` of a :class:`Trainer`, laid out over its device mesh.

Without a mesh they are plain ``jax.jit`` (the single-device program, unchanged). With one, the
training state's env-batch fields live split over the devices (:data:`BATCH_FIELDS`), everything
else replicated, and the chunk keeps that layout from call to call, so no state moves between
devices outside the collectives the partitioner inserts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from slamorl_jax.agent.trainer import Trainer, TrainState
from slamorl_jax.env.params import EnvParams
from slamorl_jax.sharding import replicated, tree_shardings

BATCH_FIELDS = ("env_state", "obs", "episode_returns")


@dataclasses.dataclass(frozen=True)
class JittedLearner:
    """``init(key, env_params)`` and ``chunk(state, env_params)`` (``state`` donated) of a trainer."""

    init: Callable[[jax.Array, EnvParams], TrainState]
    chunk: Callable[[TrainState, EnvParams], tuple[TrainState, dict]]
    place: Callable[[Any], Any]  # host values (env params, a key) as the jitted functions take them


def state_shardings(trainer: Trainer, env_params: EnvParams) -> Any:
    """The :class:`TrainState` of sharding objects for ``trainer``'s mesh."""
    abstract = jax.eval_shape(trainer.init, jax.random.key(0), env_params)
    return tree_shardings(abstract, trainer.mesh, BATCH_FIELDS)


def jit_learner(trainer: Trainer, env_params: EnvParams) -> JittedLearner:
    """Jitted ``init`` and ``update_chunk`` for ``trainer`` (sharded when it has a mesh)."""
    if trainer.mesh is None:
        return JittedLearner(
            init=jax.jit(trainer.init),
            chunk=jax.jit(trainer.update_chunk, donate_argnums=0),
            place=lambda tree: tree,
        )
    whole = replicated(trainer.mesh)
    state = state_shardings(trainer, env_params)
    return JittedLearner(
        init=jax.jit(trainer.init, in_shardings=(whole, whole), out_shardings=state),
        chunk=jax.jit(
            trainer.update_chunk,
            in_shardings=(state, whole),
            out_shardings=(state, whole),
            donate_argnums=0,
        ),
        place=lambda tree: replicate(tree, trainer.mesh),
    )


def replicate(tree: Any, mesh: jax.sharding.Mesh) -> Any:
    """Host-identical values (the same on every process) as arrays replicated over ``mesh``."""
    whole = replicated(mesh)

    def leaf(x: Any) -> Any:
        if isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            data = np.asarray(jax.device_get(jax.random.key_data(x)))
            return jax.random.wrap_key_data(jax.device_put(data, whole), impl=jax.random.key_impl(x))
        return jax.device_put(np.asarray(jax.device_get(x)), whole)

    return jax.tree.map(leaf, tree)

"""The env's spaces, as gymnax's own space classes (so gymnax wrappers and converters accept them).

``Discrete``, ``Box`` and ``Dict`` are gymnax's (``gymnax.environments.spaces``), re-exported here for
code that imported them from this module. The functions build the action, observation, reward and
state spaces of :class:`slamorl_jax.env.job_env.JobAllocationEnv`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np
from gymnax.environments.spaces import Box, Dict, Discrete

from slamorl_jax.env.objectives import NUM_OBJECTIVES
from slamorl_jax.env.observation import NUM_FEATURES
from slamorl_jax.env.params import EnvParams

__all__ = ["Box", "Dict", "Discrete", "action_space", "observation_space", "reward_space", "state_space"]


def action_space(num_actions: int) -> Discrete:
    """Action indices ``0 .. num_actions - 1`` (int32)."""
    return Discrete(num_actions)


def observation_space() -> Box:
    """``NUM_FEATURES`` float32 features in [0, 1]."""
    return Box(np.zeros(NUM_FEATURES, np.float32), np.ones(NUM_FEATURES, np.float32), (NUM_FEATURES,))


def reward_space(params: EnvParams) -> Box:
    """Bounds of the (time, cost, sla) reward vector under concrete ``params`` (``TypeError`` for
    params traced under ``jit`` or stacked for a sweep: the bounds are fixed numbers of one setting)."""
    try:
        clip = float(params.reward_clip)
        per_sla, all_six = np.float32(float(params.sla_met_bonus)), np.float32(float(params.all_slas_bonus))
    except (TypeError, jax.errors.ConcretizationTypeError):
        raise TypeError(
            "reward_space needs the concrete params of one configuration: call it outside jit, on one "
            "setting of a stacked sweep"
        ) from None
    low = np.array([-clip, -clip, -1.0], dtype=np.float32)
    # The most the end-of-job term can pay, as the env computes it in float32: rounded once (a fused
    # multiply-add) or twice (the product, then the sum), which may be one ulp above the first.
    top = max(np.float32(6.0 * float(per_sla) + float(all_six)), per_sla * np.float32(6.0) + all_six)
    high = np.array([0.0, 0.0, top], dtype=np.float32)
    return Box(low, high, (NUM_OBJECTIVES,))


def state_space(state_shapes: Any) -> Dict:
    """A gymnax ``Dict`` space mirroring an ``EnvState`` (or its ``jax.eval_shape``), field by field.

    Nested dataclasses become nested ``Dict`` spaces; every array field a ``Box`` of its shape and
    dtype bounded by what the dtype can hold (flags: [0, 1]). It states the state's structure,
    shapes and dtypes; the env's own invariants (allocation on the cluster, epochs done <= epochs) are
    not part of it. ``contains`` is false for a NaN anywhere.
    """
    spaces = {}
    for field in dataclasses.fields(state_shapes):
        value = getattr(state_shapes, field.name)
        if dataclasses.is_dataclass(value):
            spaces[field.name] = state_space(value)
        else:
            spaces[field.name] = _array_box(value)
    return Dict(spaces)


def _array_box(leaf: jax.ShapeDtypeStruct | jax.Array) -> Box:
    """The box of every array of ``leaf``'s shape and dtype."""
    dtype = np.dtype(leaf.dtype)
    if dtype == np.bool_:
        low, high = 0, 1
    elif np.issubdtype(dtype, np.integer):
        low, high = np.iinfo(dtype).min, np.iinfo(dtype).max
    else:
        low, high = -np.inf, np.inf
    shape = tuple(leaf.shape)
    return Box(np.full(shape, low, dtype), np.full(shape, high, dtype), shape, dtype)

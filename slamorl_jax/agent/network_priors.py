"""The actor's priors as ``NetworkConfig`` fields, from the action set and the observation layout:
which feature flags each action as the forecast's first choice (:func:`suggestion_features`), the
relocate prior (:func:`relocate_prior`) and its payback rule (:func:`payback_fields`), and the
paper moves' prior (:func:`paper_move_prior`). ``TrainConfig.network`` assembles them."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from slamorl_jax.env.action_sets import NUM_MOVES, NUM_TARGETS, RELOCATE_ACTION, has_targets, num_actions
from slamorl_jax.env.actions import NO_OP_ACTION
from slamorl_jax.env.defaults import (
    DEFAULT_CONTENTION_END_PROB,
    DEFAULT_CONTENTION_START_PROB,
    DEFAULT_TARGET_CPUS_PER_GPU,
)
from slamorl_jax.env.observation import FEATURE_NAMES
from slamorl_jax.env.relocation_payback import contention_persistence
from slamorl_jax.env.target_grid import with_target_grid


def suggestion_features(actions: str) -> tuple[int, ...]:
    """Per action of the set, the observation feature that flags it as the forecast's first choice
    (keep's flag for the no-op, each target's own flag), -1 for the one-step moves and relocate
    (the forecast never names it)."""
    index = {name: i for i, name in enumerate(FEATURE_NAMES)}
    out = [-1] * num_actions(actions)
    out[NO_OP_ACTION] = index["keep_suggested"]
    for k in range(NUM_TARGETS if has_targets(actions) else 0):
        out[NUM_MOVES + k] = index[f"target{k}_suggested"]
    return tuple(out)


def payback_fields(threshold: float) -> dict[str, Any]:
    """``NetworkConfig``'s payback-rule fields for ``threshold`` pauses (``networks.relocation_pays``):
    the observation's ``pause_share`` and ``epochs_left`` features and the default contention
    chain's one-epoch autocorrelation (``env/relocation_payback.py``). The rates are the env's
    defaults (no flag sets them), read when the network is built, not saved with a run: a change of
    ``env/defaults.py``'s rates changes every saved policy's rule with them."""
    return {
        "relocate_payback": float(threshold),
        "payback_features": (FEATURE_NAMES.index("pause_share"), FEATURE_NAMES.index("epochs_left")),
        "contention_persistence": contention_persistence(
            DEFAULT_CONTENTION_START_PROB, DEFAULT_CONTENTION_END_PROB
        ),
    }


def relocate_prior() -> tuple[int, int]:
    """``NetworkConfig.relocate_prior``: the relocate action and the observation's surprise feature."""
    return (RELOCATE_ACTION, FEATURE_NAMES.index("surprise"))


@functools.cache
def paper_move_prior(cpus_per_gpu: tuple[float, ...] = DEFAULT_TARGET_CPUS_PER_GPU) -> dict[str, Any]:
    """``NetworkConfig``'s move-prior fields for the default cluster and the target grid of
    ``cpus_per_gpu`` (the grid the observation's forecast block describes, ``observation_layout``)."""
    from slamorl_jax.env.defaults import default_params
    from slamorl_jax.env.observation import allocation_scales

    params = with_target_grid(default_params(), cpus_per_gpu)
    index = {name: i for i, name in enumerate(FEATURE_NAMES)}
    targets = np.asarray(params.target_allocation)
    return {
        "move_prior_flags": (
            index["keep_suggested"],
            *(index[f"target{k}_suggested"] for k in range(len(targets))),
        ),
        "move_prior_targets": tuple((int(g), int(c)) for g, c in targets),
        "move_prior_scale": tuple(float(scale) for scale in allocation_scales(params)),
    }

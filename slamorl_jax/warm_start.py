"""Warm-starting a training run from another checkpoint's policy (``train --init_from=PATH``).

The new run's actor-critic starts from the parameters of the policy at ``PATH`` (a run's checkpoint
directory, its latest step, or one step directory; what ``load_policy`` reads), instead of a fresh
initialisation. Everything else starts fresh: the optimiser's state (Adam's moments start at zero
whatever the parameters), the learning-rate schedule, the jobs and the keys. The two networks must
have the same layout: the same tree of parameters with the same shapes and dtypes (same hidden sizes,
action set, suggestion prior or target head, observation); any difference is refused with a
:class:`~slamorl_jax.checkpoint.CheckpointError` naming the first one. The run records the source in
its config (``TrainConfig.init_from``), so its checkpoints and ``summary.json`` say where it started.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np

from slamorl_jax.agent.config import TrainConfig
from slamorl_jax.agent.networks import ActorCritic, init_params
from slamorl_jax.agent.trainer import TrainState
from slamorl_jax.checkpoint import CheckpointError, LoadedPolicy, load_policy, read_meta
from slamorl_jax.env.observation import NUM_FEATURES


def _leaves(tree: Any) -> dict[str, Any]:
    """``{path: leaf}`` of a parameter tree, paths written ``a/b/c``."""
    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    return {"/".join(str(getattr(k, "key", k)) for k in path): leaf for path, leaf in flat}


def layout_difference(source: Any, target: Any) -> str | None:
    """The first difference between two parameter trees' layouts (names, shapes, dtypes), or None."""
    a, b = _leaves(source), _leaves(target)
    for name in sorted(set(a) | set(b)):
        if name not in a:
            return f"it has no {name} (this run's network has)"
        if name not in b:
            return f"it has {name}, which this run's network has not"
        shape_a, shape_b = tuple(a[name].shape), tuple(b[name].shape)
        if shape_a != shape_b:
            return f"{name} has shape {shape_a}, this run's {shape_b}"
        dtype_a, dtype_b = np.dtype(a[name].dtype), np.dtype(b[name].dtype)
        if dtype_a != dtype_b:
            return f"{name} is {dtype_a}, this run's {dtype_b}"
    return None


def initial_params(source: str | Path | LoadedPolicy, template: Any) -> Any:
    """The policy parameters of checkpoint ``source`` (a path, or a policy already loaded), checked to
    have ``template``'s layout (``CheckpointError`` with one line otherwise)."""
    if isinstance(source, LoadedPolicy):
        policy, path = source, f"(step {source.step})"
    else:
        path = source
        try:
            policy = load_policy(source)
        except CheckpointError as err:
            raise CheckpointError(f"--init_from: {err}") from None
    difference = layout_difference(policy.params, template)
    if difference is not None:
        raise CheckpointError(
            f"--init_from {path}: its network does not match this run's ({difference}); "
            "use the same --hidden_sizes, --actions, --suggestion_prior, --paper_suggestion_prior and "
            "--target_head"
        )
    return policy.params


def check_init_from(config: TrainConfig) -> None:
    """Refuse (``CheckpointError``, one line) a ``config.init_from`` whose policy cannot start a run of
    ``config``'s network, before the run creates anything."""
    if config.init_from is None:
        return
    network = ActorCritic(config.network)
    template = jax.eval_shape(lambda: init_params(network, jax.random.key(0), NUM_FEATURES))
    initial_params(config.init_from, template)
    # Same layers and shapes under another activation would start from another function, untrained.
    trained_with = TrainConfig.from_dict(read_meta(config.init_from)[0]["config"]).activation
    if trained_with != config.activation:
        raise CheckpointError(
            f"--init_from {config.init_from}: its network uses --activation={trained_with}, this run's "
            f"{config.activation}; use the same --activation"
        )


def warm_start(
    state: TrainState, source: str | Path | LoadedPolicy, place: Callable[[Any], Any] = lambda tree: tree
) -> TrainState:
    """``state`` (a fresh run's) with its network parameters from checkpoint ``source`` (a path, or a
    policy already loaded); ``place`` lays host arrays out as the run's jitted functions take them
    (``JittedLearner.place``)."""
    params = initial_params(source, jax.device_get(state.params))
    return state.replace(params=place(params))

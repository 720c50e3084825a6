"""Warm-starting a training run from another checkpoint's policy (``train --init_from=PATH``).

The new run's actor-critic starts from the parameters of the policy at ``PATH`` (a run's checkpoint
directory, its latest step, or one step directory; what ``load_policy`` reads), instead of a fresh
initialisation. Everything else starts fresh: the optimiser's state (Adam's moments start at zero
whatever the parameters), the learning-rate schedule, the jobs and the keys. The two networks must
have the same layout: the same tree of parameters with the same shapes and dtypes (same hidden sizes,
action set, suggestion prior or target head, observation); any difference is refused with a
:class:`~slamorl_jax.checkpoint.CheckpointError` naming the flag that differs. The settings that only
shape a fresh network's starting parameters (``INIT_ONLY_SETTINGS``) are the source's: the run
records them as the source's config has them, and refuses one given with another value (it would be
recorded and never applied). The run records the source in its config (``TrainConfig.init_from``),
so its checkpoints and ``summary.json`` say where it started.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import jax
import numpy as np

from slamorl_jax.agent.config import TrainConfig
from slamorl_jax.agent.config_checks import ignored_settings
from slamorl_jax.agent.networks import ActorCritic, init_params
from slamorl_jax.agent.trainer import TrainState
from slamorl_jax.checkpoint import CheckpointError, read_meta, stored_config
from slamorl_jax.checkpoint_catalog import stored_catalog
from slamorl_jax.env.catalog import Catalog, load_catalog, same_catalog
from slamorl_jax.env.observation import NUM_FEATURES
from slamorl_jax.policy_checkpoint import LoadedPolicy, load_policy

#: The flags whose values decide the network's parameters' layout, or (``activation``) the function
#: they compute, or (``target_cpus_per_gpu``) what its target features and actions mean: a warm
#: start needs the source's.
NETWORK_SETTINGS = (
    "actions", "hidden_sizes", "target_head", "suggestion_prior", "paper_suggestion_prior", "activation",
    "target_cpus_per_gpu", "observation",
)  # fmt: skip
#: The flags that set only where a fresh network's parameters start (``relocate_gain_init`` also
#: whether the relocate prior's exist at all): a warm-started run's are the source's.
INIT_ONLY_SETTINGS = ("initializer", "suggestion_gain_init", "relocate_gain_init")


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


def _flag(name: str, value: Any) -> str:
    """``--name=value`` as the command line spells it (a tuple as comma-separated values)."""
    if isinstance(value, bool):
        return f"--{name}" if value else f"--no{name}"
    if isinstance(value, (tuple, list)):
        value = ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value)
    return f"--{name}={value}"


def init_from_config(config: TrainConfig, given: Collection[str] = ()) -> TrainConfig:
    """``config`` as a run warm-started from ``config.init_from`` trains: its ``INIT_ONLY_SETTINGS``
    those of the source's config. ``CheckpointError`` (one line, before the run creates anything)
    for a source that cannot start ``config``'s network, naming the flag that differs, or for a flag
    named in ``given`` (those typed on the command line) among ``INIT_ONLY_SETTINGS`` with another
    value than the source's. ``config`` as it is without ``init_from``."""
    if config.init_from is None:
        return config
    path = config.init_from
    try:
        meta, _, _ = read_meta(path)
    except CheckpointError as err:
        raise CheckpointError(f"--init_from: {err}") from None
    source = stored_config(meta)
    for name in INIT_ONLY_SETTINGS:
        if name in given and getattr(config, name) != getattr(source, name):
            raise CheckpointError(
                f"--{name} has no effect with --init_from: the network starts from {path}'s parameters "
                f"(started from {_flag(name, getattr(source, name))}); leave it out"
            )
    config = dataclasses.replace(config, **{name: getattr(source, name) for name in INIT_ONLY_SETTINGS})
    network = ActorCritic(config.network)
    template = jax.eval_shape(lambda: init_params(network, jax.random.key(0), NUM_FEATURES))
    try:
        initial_params(path, template)
    except CheckpointError as err:
        # A setting either config's action set ignores is recorded, not used (an old config's, or
        # one imitate --like copied): naming it would advise a flag the command line refuses.
        unused = {*ignored_settings(source), *ignored_settings(config)}
        differing = [
            name
            for name in NETWORK_SETTINGS
            if name not in unused and getattr(source, name) != getattr(config, name)
        ]
        if not differing or not str(err).startswith(f"--init_from {path}: its network"):
            raise
        raise CheckpointError(_differs(path, differing[0], source, config)) from None
    # Same layers and shapes under another activation would start from another function, untrained;
    # on another target grid, from features and targets that meant other allocations.
    for name in ("activation", "target_cpus_per_gpu"):
        if getattr(source, name) != getattr(config, name):
            raise CheckpointError(_differs(path, name, source, config))
    return config


def _differs(path: str, name: str, source: TrainConfig, config: TrainConfig) -> str:
    """The refusal of a source whose network setting ``name`` is not this run's."""
    theirs, ours = _flag(name, getattr(source, name)), _flag(name, getattr(config, name))
    return f"--init_from {path}: its network was trained with {theirs}, this run's has {ours}; use {theirs}"


def warm_start(
    state: TrainState, source: str | Path | LoadedPolicy, place: Callable[[Any], Any] = lambda tree: tree
) -> TrainState:
    """``state`` (a fresh run's) with its network parameters from checkpoint ``source`` (a path, or a
    policy already loaded); ``place`` lays host arrays out as the run's jitted functions take them
    (``JittedLearner.place``)."""
    params = initial_params(source, jax.device_get(state.params))
    return state.replace(params=place(params))


def catalogue_note(config: TrainConfig, catalog: Catalog | None) -> str | None:
    """A line for a run that starts from ``config.init_from``'s policy on another catalogue than that
    policy was trained on (``catalog``: the run's, which ``config.catalog`` names; ``None``: the
    shipped one), else ``None``. Fine-tuning in another world is allowed; it is said aloud so that a
    ``train --catalog`` run continued with ``--init_from`` but without ``--catalog`` is not moved to
    the shipped catalogue unnoticed."""
    if config.init_from is None:
        return None
    meta, _, _ = read_meta(config.init_from)
    if same_catalog(stored_catalog(meta, config.init_from), catalog or load_catalog()):
        return None

    def named(path: str | None) -> str:
        return f"--catalog={path}" if path else "the shipped catalogue"

    source = named(stored_config(meta).catalog)
    return (
        f"note: --init_from's policy was trained on another catalogue ({source}); this run trains on "
        f"{named(config.catalog)}"
    )

"""A trained policy, loaded or saved without its training state (:func:`load_policy`,
:class:`LoadedPolicy`, :func:`export_policy`, :func:`save_policy`): what downstream tools read.

A checkpoint step of a run holds the ``policy`` item (network parameters only) beside the whole
training state (``checkpoint.py``); ``load_policy`` reads ``meta`` and ``policy`` alone, so it needs
neither an optimiser nor any training code, and a policy-only checkpoint (``export_policy``,
``save_policy``: kilobytes) holds just those two items.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp

from slamorl_jax.agent.config import TrainConfig
from slamorl_jax.agent.config_checks import validate_config
from slamorl_jax.agent.decision import check_hold_below, greedy_actions
from slamorl_jax.agent.networks import ActorCritic, init_params
from slamorl_jax.agent.trainer import config_catalog, env_params_from_config
from slamorl_jax.array_checksum import META_KEY, signed_meta, tree_digests
from slamorl_jax.checkpoint import (
    CheckpointError,
    array_layout,
    check_layout,
    checkpoint_step_dir,
    has_checkpoint,
    make_manager,
    quiet_save,
    read_meta,
    restore_item,
    run_meta,
    stored_config,
    write_failed,
    write_failure,
)
from slamorl_jax.checkpoint_catalog import catalog_meta, stored_catalog
from slamorl_jax.env.catalog import Catalog, job_figures, load_catalog, same_catalog
from slamorl_jax.env.derived import DERIVED_FIELDS
from slamorl_jax.env.draws import check_key
from slamorl_jax.env.observation import NUM_FEATURES
from slamorl_jax.env.params import EnvParams
from slamorl_jax.env.prices import price_figures
from slamorl_jax.env.validation import validate_params_once
from slamorl_jax.run_dirs import new_folder_problem, staged_new_folder

WEIGHT_SUM_TOLERANCE = 1e-3  # float32 weights summed over three objectives, with room for rounding


def _distributions(weights: jax.Array) -> bool:
    """Whether every row of ``weights`` is non-negative and sums to 1 (within the tolerance)."""
    off_one = jnp.abs(weights.sum(-1) - 1.0)
    return bool(jnp.all(weights >= 0.0)) and bool(jnp.all(off_one <= WEIGHT_SUM_TOLERANCE))


@dataclasses.dataclass(frozen=True, eq=False)  # hashed by identity, so jax.jit(policy) works
class LoadedPolicy:
    """A trained policy: ``policy(obs, weights)`` gives actions; ``key=`` samples instead of argmax.
    ``hold_below`` (0: the plain argmax) keeps the allocation where the policy's top probability is
    below it (``agent.decision``; :meth:`holding` sets it): the greedy ``policy(obs, weights)``,
    ``live.recommend``/``recommend_many`` and ``evaluation.run_suite`` follow it; sampling with
    ``key=`` and the benchmarks that take ``policy.network`` alone do not."""

    config: TrainConfig
    params: Any
    network: ActorCritic
    step: int
    _act: Callable = dataclasses.field(repr=False)
    hold_below: float = 0.0
    # Digests of the env params it was trained on where its config builds others (``save_policy``'s
    # ``env_params``; ``ENV_PARAMS_KEY`` of its meta), else ``None``.
    trained_env_params: dict[str, str] | None = dataclasses.field(default=None, repr=False)
    # The catalogue it runs on: the one it was trained on (the copy its checkpoint carries,
    # ``train --catalog``, ``checkpoint_catalog``; else the shipped one) unless :meth:`on_catalog`
    # gave another. Its workload and GPU type names are the ones the live tools accept, and
    # :attr:`env_params` are built on it.
    catalog: Catalog = dataclasses.field(default_factory=load_catalog, repr=False)
    # The catalogue it was trained on where :meth:`on_catalog` moved it to another, else ``None``.
    trained_catalog: Catalog | None = dataclasses.field(default=None, repr=False)

    def holding(self, hold_below: float) -> LoadedPolicy:
        """This policy deciding with the threshold ``hold_below`` in [0, 1] (``ValueError`` otherwise)."""
        return dataclasses.replace(self, hold_below=check_hold_below(hold_below))

    def deciding(self, hold_below: float = 0.0, relocate_payback: float | None = None) -> LoadedPolicy:
        """This policy with a hold threshold (:meth:`holding`) and, unless None, a relocation payback
        rule (:meth:`with_relocate_payback`): what the commands' ``--hold_below`` and
        ``--relocate_payback`` ask for (``ValueError`` as those methods raise it)."""
        policy = self.holding(hold_below)
        return policy if relocate_payback is None else policy.with_relocate_payback(relocate_payback)

    def on_catalog(self, catalog: Catalog | None) -> LoadedPolicy:
        """This policy running on ``catalog`` (``None``: the one it has), the same parameters: its
        :attr:`env_params` are its config's on that catalogue, and the live tools read jobs' names in
        it. A workload it never trained on is then one it can answer (how well: a policy's
        observation describes a job by its profile's forecasts, not its name;
        ``benchmarks/held_out_workloads.py`` measures it). ``TypeError`` for anything but a
        :class:`Catalog`; ``ValueError`` for a policy saved with env params of its own
        (``save_policy``'s ``env_params``), which no catalogue rebuilds."""
        if catalog is None:
            return self
        if not isinstance(catalog, Catalog):
            raise TypeError(f"catalog must be a Catalog (load_catalog(path)), got {type(catalog).__name__}")
        if self.trained_env_params is not None and not same_catalog(catalog, self.catalog):
            raise ValueError(
                "this policy was saved with env params of its own (save_policy's env_params), which "
                "another catalogue's cannot stand for: give it params built on that catalogue where "
                "it runs (recommend_many(policy, jobs, params), run_episodes(env, params, ...))"
            )
        trained = self.trained_catalog or self.catalog
        return dataclasses.replace(self, catalog=catalog, trained_catalog=trained)

    def untrained_names(self, workload: str, gpu_type: str) -> tuple[str, ...]:
        """A note per way a job (its ``workload``, its ``gpu_type``) lies outside what the policy
        trained on where :meth:`on_catalog` moved it to another catalogue: a name the training
        catalogue lacks, or figures that shape the job there otherwise (``catalog.job_figures``:
        its workload's model and the GPU type's speed on it; ``prices.price_figures``: what it pays
        under the policy's price preset); empty otherwise, and for names its :attr:`catalog` lacks
        (``live.check_recommendable`` refuses those)."""
        trained = self.trained_catalog
        if (
            trained is None
            or workload not in self.catalog.workload_names
            or gpu_type not in self.catalog.gpu_types
        ):
            return ()
        notes = []
        if workload not in trained.workload_names:
            notes.append(
                f"the policy never trained on {workload} jobs (its profile comes from another catalogue)"
            )
        if gpu_type not in trained.gpu_types:
            notes.append(
                f"the policy never trained on {gpu_type} GPUs (their speeds come from another catalogue)"
            )
        if not notes:
            now, then = (
                {**job_figures(c, workload, gpu_type), **price_figures(self.config.prices, c, gpu_type)}
                for c in (self.catalog, trained)
            )
            if changed := [name for name, value in now.items() if value != then[name]]:
                notes.append(
                    f"the policy trained on other figures for {workload} jobs on {gpu_type} GPUs "
                    f"({', '.join(changed)} differ in this catalogue)"
                )
        return tuple(notes)

    def with_relocate_payback(self, threshold: float) -> LoadedPolicy:
        """This policy with its relocation payback rule set to ``threshold`` pauses (0: off;
        ``networks.relocation_pays``), the same parameters: ``ValueError`` for a policy without the
        relocate prior (nothing to mask) or a threshold outside [0, 100]."""
        config = validate_config(dataclasses.replace(self.config, relocate_payback=float(threshold)))
        if not config.network.relocate_prior:
            raise ValueError(
                "the relocation payback rule needs a policy with the relocate prior "
                "(--actions=targets_relocate, its suggestion prior and --relocate_gain_init > 0)"
            )
        network = _network(config, self.network.config.obs_dim)
        return dataclasses.replace(self, config=config, network=network, _act=greedy_act(network))

    @functools.cached_property
    def env_params(self) -> EnvParams:
        """The env parameters the policy was trained on (its config's scenario, preference, prices and
        settings on its :attr:`catalog`: ``agent.trainer.env_params_from_config``), built once per
        loaded policy (about 8 ms each time otherwise, most of one ``live.recommend`` call).
        ``ValueError`` for a policy saved with other env params than its config builds
        (``save_policy``'s ``env_params``): a command would judge it in another world; pass them
        where it runs."""
        built = env_params_from_config(self.config, self.catalog)
        if self.trained_env_params is not None and (field := differing_field(built, self.trained_env_params)):
            raise ValueError(
                f"this policy was trained on other env params than its config builds ({field} differs); "
                "give it them where it runs (recommend_many(policy, jobs, params), run_episodes(env, "
                "params, ...)): the commands build the config's"
            )
        return built

    def check_env_params(self, params: EnvParams) -> None:
        """``ValueError`` when ``params`` differ from the env params the policy was saved with
        (``save_policy``'s ``env_params``; none saved: nothing to check)."""
        if self.trained_env_params is not None and (
            field := differing_field(params, self.trained_env_params)
        ):
            raise ValueError(f"params differ from those the policy was trained on ({field})")

    def __call__(self, obs: jax.Array, weights: jax.Array, key: jax.Array | None = None) -> jax.Array:
        """Actions for observations ``[..., NUM_FEATURES]`` and objective weights ``[..., 3]`` (the same
        leading shape); :meth:`check_inputs` says what it refuses."""
        obs, weights = self.check_inputs(obs, weights)
        if key is None:
            return self._act(self.params, obs, weights, jnp.float32(self.hold_below))
        check_key(key, hint=" (one key samples the whole batch)")
        return jax.random.categorical(key, self.network.apply(self.params, obs, weights)[0])

    def logits(self, obs: jax.Array, weights: jax.Array) -> jax.Array:
        """Unnormalised action log-probabilities."""
        return self.network.apply(self.params, *self.check_inputs(obs, weights))[0]

    def values(self, obs: jax.Array, weights: jax.Array) -> jax.Array:
        """The critic's value of each objective."""
        return self.network.apply(self.params, *self.check_inputs(obs, weights))[1]

    def check_inputs(self, obs: jax.Array, weights: jax.Array) -> tuple[jax.Array, jax.Array]:
        """``obs`` and ``weights`` as float32 arrays, or ``ValueError`` (``TypeError`` for non-numbers)
        naming the argument: ``obs`` must end in the env's ``NUM_FEATURES`` features (or exactly the
        ones the network reads: 21 for a policy from before the forecast block), ``weights`` in one
        weight per objective, with the same leading (batch) shape; and, when they are concrete
        rather than traced, every value must be finite (a NaN would pick action 0 silently) and the
        weights of each observation non-negative and summing to 1, as the env's are."""
        config = self.network.config
        widths = {
            "obs": sorted({NUM_FEATURES, config.obs_dim or NUM_FEATURES}),
            "weights": [config.num_objectives],
        }
        arrays = {}
        for name, value in (("obs", obs), ("weights", weights)):
            dtype = value.dtype if hasattr(value, "dtype") else np.asarray(value).dtype
            if not any(jnp.issubdtype(dtype, kind) for kind in (jnp.floating, jnp.integer, jnp.bool_)):
                raise TypeError(f"{name} must hold real numbers, got {dtype}")
            array = jnp.asarray(value, jnp.float32)
            if array.ndim == 0 or array.shape[-1] not in widths[name]:
                wanted = " or ".join(str(w) for w in widths[name])
                raise ValueError(f"{name} must have shape [..., {wanted}], got {array.shape}")
            concrete = not isinstance(array, jax.core.Tracer)
            if concrete and not bool(jnp.all(jnp.isfinite(array))):
                raise ValueError(f"{name} must be finite, got NaN or infinity")
            # The env's weights are a distribution over the objectives; others (3, 1, 1) changed actions.
            if concrete and name == "weights" and not _distributions(array):
                raise ValueError("weights must be non-negative and sum to 1 per observation, as the env's do")
            arrays[name] = array
        if arrays["obs"].shape[:-1] != arrays["weights"].shape[:-1]:
            raise ValueError(
                f"obs {arrays['obs'].shape} and weights {arrays['weights'].shape} must have the same leading "
                "(batch) shape: one weight vector per observation"
            )
        return arrays["obs"], arrays["weights"]


def _network(config: TrainConfig, obs_dim: int | None) -> ActorCritic:
    """``config``'s actor-critic reading ``obs_dim`` features (a policy keeps the count it was trained on)."""
    return ActorCritic(dataclasses.replace(config.network, obs_dim=obs_dim))


def _network_and_shapes(config: TrainConfig, obs_dim: int) -> tuple[ActorCritic, Any]:
    """``config``'s actor-critic reading ``obs_dim`` features and its parameters' shapes and dtypes
    (traced, not an initialisation run op by op: seconds of small compiles)."""
    network = _network(config, obs_dim)
    return network, jax.eval_shape(lambda key: init_params(network, key, obs_dim), jax.random.key(0))


def load_policy(path: str | Path) -> LoadedPolicy:
    """Load the policy of a checkpoint (a run's checkpoint directory = latest step, or a step directory).

    Returns a :class:`LoadedPolicy`: ``policy(obs, weights)`` is the greedy action,
    ``policy(obs, weights, key)`` a sampled one; ``policy.config`` is the run's :class:`TrainConfig`.
    Raises :class:`CheckpointError` for a missing, partial or incompatible checkpoint.
    """
    meta, root, step = read_meta(path)
    config = stored_config(meta)
    obs_dim = check_layout(meta, config, root / str(step))
    network, shapes = _network_and_shapes(config, obs_dim)
    # Placed on this process's first device: orbax before 0.12 restores only onto a given sharding.
    on_device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
    abstract = {
        "params": jax.tree.map(lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=on_device), shapes)
    }
    params = restore_item(meta, root, step, "policy", abstract, "the policy")["params"]

    return LoadedPolicy(
        config=config,
        params=params,
        network=network,
        step=step,
        _act=greedy_act(network),
        trained_env_params=meta.get(ENV_PARAMS_KEY),
        catalog=stored_catalog(meta, root / str(step)),
    )


def greedy_act(network: ActorCritic) -> Callable:
    """``LoadedPolicy``'s jitted greedy decision ``(params, obs, weights, hold_below) -> actions``."""

    @jax.jit
    def act(params: Any, obs: jax.Array, weights: jax.Array, hold_below: jax.Array) -> jax.Array:
        return greedy_actions(network.apply(params, obs, weights)[0], hold_below)

    return act


def export_policy(source: str | Path, destination: str | Path) -> Path:
    """Copy the policy and config of a checkpoint (latest step of a run, or a step) to ``destination``,
    a new or empty folder (:class:`CheckpointError` otherwise).

    The copy holds only the ``policy`` and ``meta`` items (kilobytes instead of the whole training
    state): enough for :func:`load_policy`, not for ``--resume``. Returns the new step directory.
    """
    policy = load_policy(source)
    # The meta of the step loaded, not the run's latest again: a run still training may have saved
    # another step since, whose config and counters would be paired with these parameters.
    meta, _, _ = read_meta(checkpoint_step_dir(source).parent / str(policy.step))
    return _save_policy_only(destination, policy.params, meta, policy.step)


def save_policy(
    destination: str | Path,
    params: Any,
    config: TrainConfig,
    extra: dict[str, Any] | None = None,
    env_params: EnvParams | None = None,
    catalog: Catalog | None = None,
) -> Path:
    """Save network parameters made outside a training run (e.g. pre-trained on logged decisions,
    ``slamorl_jax.imitate``, or trained in Python on env params of your own) as a policy-only
    checkpoint of ``config`` at step 0 in the empty directory ``destination``: what
    :func:`load_policy` and ``train --init_from`` read. Returns the step directory. ``ValueError``
    for a config :func:`validate_config` refuses or ``params`` that are not its network's (another
    tree, shape or dtype), which :func:`load_policy` would refuse later.

    ``env_params``: the env params it was trained on. Where the config builds others (another
    cluster, prices, catalogue), their digests are saved, so the loaded policy refuses to build the
    config's (:attr:`LoadedPolicy.env_params`, what the commands run it on) and checks params given
    to it (:meth:`LoadedPolicy.check_env_params`) instead of running silently in another world.

    ``catalog``: the catalogue it was trained on (default: the one ``config.catalog`` names, else
    the shipped one). One of your own is saved with the policy (``checkpoint_catalog``): the loaded
    policy's :attr:`LoadedPolicy.catalog`, its env params and the live tools' names come from it."""
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    validate_config(config)
    _, wanted = _network_and_shapes(config, config.network.obs_dim or NUM_FEATURES)
    same_tree = jax.tree.structure(params) == jax.tree.structure(wanted)
    arrays = all(hasattr(leaf, "shape") and hasattr(leaf, "dtype") for leaf in jax.tree.leaves(params))
    if not (same_tree and arrays and array_layout(params) == array_layout(wanted)):
        raise ValueError(
            f"params are not the network of this config ({config.actions!r} actions, hidden sizes "
            f"{tuple(config.hidden_sizes)}): compare them with agent.networks.init_params"
        )
    catalog = catalog if catalog is not None else config_catalog(config)
    meta = {**run_meta(config, 0), **catalog_meta(catalog), **(extra or {})}
    if env_params is not None:
        validate_params_once(env_params)
        digests = env_params_digests(env_params)
        if differing_field(env_params_from_config(config, catalog), digests) is not None:
            meta[ENV_PARAMS_KEY] = digests
    return _save_policy_only(destination, jax.device_get(params), meta, 0)


#: A policy's meta key: the digests of the env params it was trained on, where its config builds others.
ENV_PARAMS_KEY = "env_params"


def env_params_digests(params: EnvParams) -> dict[str, str]:
    """Digests of the fields of ``params`` one sets (the tables derived from them left out:
    ``validate_params`` refuses stale ones, and a rebuild may round them otherwise), each value
    first cast to its kind's dtype (float32, int32, bool), so equal values digest alike however
    they were given (a Python float, a float64 array, a device array)."""

    def canonical(leaf: Any) -> np.ndarray:
        value = np.asarray(leaf)
        kind = {"f": np.float32, "i": np.int32, "u": np.int32, "b": np.bool_}.get(value.dtype.kind)
        return value.astype(kind) if kind is not None else value

    digests = tree_digests(jax.tree.map(canonical, jax.device_get(params)))
    named = {path.lstrip("."): digest for path, digest in digests.items()}
    return {name: digest for name, digest in named.items() if name not in DERIVED_FIELDS}


def differing_field(params: EnvParams, digests: dict[str, str]) -> str | None:
    """The first field of ``digests`` (:func:`env_params_digests`) whose value in ``params`` is
    another, written ``gpus_per_node`` or ``workloads.gamma``; ``None`` where all match (a field
    ``params`` has and ``digests`` lacks, one added to ``EnvParams`` since, is not compared)."""
    actual = env_params_digests(params)
    return next((name for name in sorted(digests) if actual.get(name) != digests[name]), None)


def _save_policy_only(destination: str | Path, params: Any, meta: dict[str, Any], step: int) -> Path:
    """Write ``params`` and ``meta`` (its digests added) as step ``step`` of the empty directory
    ``destination``; the step directory."""
    destination = Path(destination)
    if has_checkpoint(destination):
        raise CheckpointError(f"{destination} already holds checkpoints; choose an empty directory")
    if problem := new_folder_problem(destination):
        raise CheckpointError(f"{destination}: {problem}")
    arrays = {"params": params}
    try:
        # Written beside the destination and renamed into it when whole: a failure or a stop signal
        # leaves no half-written step (the next try refused the folder), and a run that lost the race
        # for the folder removes only its own files.
        with staged_new_folder(destination) as stage:
            manager = make_manager(stage, keep=1)
            # A failed write is reported once, as the CheckpointError below; orbax's threads are
            # done before the stage goes (none write later).
            quiet_save(
                manager,
                step,
                policy=ocp.args.StandardSave(arrays),
                meta=ocp.args.JsonSave(signed_meta({**meta, META_KEY: {"policy": tree_digests(arrays)}})),
            )
            manager.close()
    except FileExistsError:
        raise CheckpointError(
            f"{destination} was filled by another program while this policy was saved"
        ) from None
    except (OSError, ValueError) as err:  # orbax reports a failed write (a full disk) as either
        if not write_failed(err):
            raise  # not the disk's: a program error keeps its traceback
        raise CheckpointError(f"cannot write {destination}: {write_failure(err)}") from None
    return destination.absolute() / str(step)


def params_equal(a: Any, b: Any) -> bool:
    """Exact equality of two parameter trees (same structure and bitwise-equal leaves)."""
    if jax.tree.structure(a) != jax.tree.structure(b):
        return False
    pairs = zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    return all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in pairs)

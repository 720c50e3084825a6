"""orbax checkpoints of training runs, and ``load_policy`` for downstream tools.

A checkpoint step holds three items: ``state`` (the whole :class:`TrainState`, for ``--resume``),
``policy`` (network parameters only) and ``meta`` (JSON: format version, the resolved
:class:`TrainConfig`, update and env-step counters). ``load_policy`` reads ``meta`` and ``policy``
alone, so it needs neither an optimiser nor any training code. Saves are synchronous and orbax
writes each step to a temporary directory first, so an interrupted save never replaces a good one.

``meta`` also holds a SHA-256 digest of every array of ``state`` and ``policy``
(:mod:`slamorl_jax.array_checksum`), checked when they are restored: damaged array data is refused
with a :class:`CheckpointError` naming the step and the array, never loaded as different numbers;
and one of itself, checked when it is read. Checkpoints from before the digests load unchecked. On
``--resume`` a damaged newest step is set aside and the run continues from the newest intact one
(``checkpoint_resume.py``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from absl import logging as absl_logging

from slamorl_jax.agent.config import TrainConfig, validate_config
from slamorl_jax.agent.decision import check_hold_below, greedy_actions
from slamorl_jax.agent.networks import ActorCritic, init_params
from slamorl_jax.agent.trainer import TrainState, env_params_from_config
from slamorl_jax.array_checksum import (
    META_KEY,
    first_mismatch,
    meta_digest_matches,
    signed_meta,
    tree_digests,
)
from slamorl_jax.cli_args import first_line
from slamorl_jax.env.draws import check_key
from slamorl_jax.env.observation import NUM_FEATURES, NUM_PAPER_FEATURES, observation_layout
from slamorl_jax.env.params import EnvParams
from slamorl_jax.restore_noise import quiet_if_it_fails
from slamorl_jax.run_dirs import new_folder_problem, staged_new_folder

FORMAT_VERSION = 1
# Version of the training state's structure (``TrainState``, whose env batch is an ``EnvState``):
# 2 added ``EnvState.multipliers`` (dual weights), 3 the job's mid-run event (``JobSpec.shift_*``),
# 4 the online model's statistics in square-root form (``EnvState.model_stats``: the same shape,
# another meaning). A run saved under another version cannot resume.
STATE_VERSION = 4
ITEMS = ("state", "policy", "meta")


class CheckpointError(ValueError):
    """A checkpoint is missing, partial or incompatible (the message says which and where)."""


class IncompatibleCheckpointError(CheckpointError):
    """An item whose stored arrays have other shapes or types than the ones asked for: not damage (the
    data may be intact) but another program's layout, e.g. another JAX PRNG implementation."""


# How TensorStore's errors (which orbax raises as ValueError) carry the OS's error number.
OS_ERROR_CODE = re.compile(r"os_error_code='(\d+)'")


class CheckpointWriteError(OSError):
    """A checkpoint could not be written (a full disk, a folder removed meanwhile): the machine's
    trouble, not bad input. The message says why in one line."""


def make_manager(directory: str | Path, keep: int = 3) -> ocp.CheckpointManager:
    """A keep-``keep`` manager over ``directory`` (created if needed)."""
    options = ocp.CheckpointManagerOptions(max_to_keep=keep, create=True, enable_async_checkpointing=False)
    return ocp.CheckpointManager(Path(directory).absolute(), options=options, item_names=ITEMS)


def _to_host(state: TrainState) -> TrainState:
    """``state`` with its PRNG key as raw key data (orbax stores plain arrays)."""
    return state.replace(key=jax.random.key_data(state.key))


def save(
    manager: ocp.CheckpointManager,
    state: TrainState,
    config: TrainConfig,
    extra: dict[str, Any] | None = None,
) -> int:
    """Save ``state`` at its update count and return that step."""
    step = int(state.update)
    _remove_incomplete_step(manager, step)
    host_state, policy = _to_host(state), {"params": state.params}
    meta = {
        **_meta(config, step),
        META_KEY: {"state": tree_digests(host_state), "policy": tree_digests(policy)},
        **(extra or {}),
    }
    try:
        _quiet_save(
            manager,
            step,
            force=True,
            state=ocp.args.StandardSave(host_state),
            policy=ocp.args.StandardSave(policy),
            meta=ocp.args.JsonSave(signed_meta(meta)),
        )
    except (OSError, ValueError) as err:  # orbax reports a failed write (a full disk) as either
        if not write_failed(err):
            raise  # not the disk's: a program error keeps its traceback
        raise CheckpointWriteError(
            f"cannot save the checkpoint of update {step} in {manager.directory}: {write_failure(err)}"
        ) from None
    return step


def _quiet_save(manager: ocp.CheckpointManager, step: int, force: bool = False, **items: Any) -> None:
    """``manager.save`` of ``items`` as step ``step``, waited for, orbax's logging silenced: the
    caller reports a failed write once, where orbax's threads would each log it with a traceback
    first (hundreds of lines on a full disk). On a failure the manager is closed, unheard, so those
    threads end before it is raised; it takes no more saves."""
    try:
        # a failed write's loop closes under TensorStore's callbacks too
        with absl_verbosity(absl_logging.FATAL), quiet_if_it_fails():
            manager.save(step, args=ocp.args.Composite(**items), force=force)
            manager.wait_until_finished()
    except BaseException:
        with absl_verbosity(absl_logging.FATAL), contextlib.suppress(Exception):
            manager.close()
        raise


def _meta(config: TrainConfig, step: int) -> dict[str, Any]:
    """The ``meta`` item of a checkpoint of ``config`` at update ``step`` (digests apart)."""
    return {
        "format_version": FORMAT_VERSION,
        "state_version": STATE_VERSION,
        "config": dataclasses.asdict(config),
        "update": step,
        "env_steps": step * config.batch_size,
        "observation_dim": config.network.obs_dim or NUM_FEATURES,  # the features the network reads
        "observation_layout": observation_layout(config.target_cpus_per_gpu),
        "num_actions": config.network.num_actions,
    }


def _remove_incomplete_step(manager: ocp.CheckpointManager, step: int) -> None:
    """Delete a leftover directory of ``step`` that has no ``meta`` (an interrupted or damaged save).

    Such a directory is never read (``read_meta`` skips it) but would block saving that step again.
    """
    path = Path(manager.directory) / str(step)
    if path.exists() and not (path / "meta").exists():
        shutil.rmtree(path)
        manager.reload()


def complete_steps(directory: Path) -> list[int]:
    """The numbered step directories of ``directory`` that have a ``meta`` item, oldest first."""
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit() and (p / "meta").exists())


def _step_dir_and_root(path: Path) -> tuple[Path, int]:
    """Resolve a run directory (latest step) or a step directory to (root, step)."""
    try:
        if "\0" in str(path) or not path.exists():
            raise CheckpointError(f"checkpoint path {path} does not exist")
        if not path.is_dir():
            raise CheckpointError(f"checkpoint path {path} is a file, not a checkpoint directory")
        if path.name.isdigit() and (path / "meta").exists():
            return path.parent, int(path.name)
        steps = complete_steps(path)
    except OSError as err:
        raise CheckpointError(f"cannot read checkpoint path {path}: {err.strerror or err}") from None
    if not steps and path.name.isdigit() and has_checkpoint(path.parent):
        raise CheckpointError(
            f"{path} is an incomplete step (no meta: its save did not finish); its run's complete "
            f"steps are {', '.join(map(str, complete_steps(path.parent)))}"
        )
    if not steps:
        inner = path / "checkpoints"  # a training run's folder (--run_dir) keeps its steps there
        hint = f"; a run's folder keeps them in {inner}" if has_checkpoint(inner) else ""
        raise CheckpointError(f"no complete checkpoint in {path} (expected numbered step directories{hint})")
    return path, steps[-1]


def _path(path: str | Path) -> Path:
    """``path`` made absolute; a path no file system accepts is a :class:`CheckpointError`."""
    try:
        return Path(path).absolute()
    except (OSError, ValueError, TypeError) as err:
        raise CheckpointError(f"bad checkpoint path {path!r}: {err}") from None


def checkpoint_step_dir(path: str | Path) -> Path:
    """The absolute step folder a checkpoint path (a run's checkpoint folder: its latest step; or a
    step folder) names (:class:`CheckpointError` if none)."""
    root, step = _step_dir_and_root(_path(path))
    return root / str(step)


def run_root(directory: str | Path) -> Path:
    """``directory`` made absolute, checked to be a run directory with a complete step."""
    root = _path(directory)
    _step_dir_and_root(root)
    return root


def read_meta(path: str | Path) -> tuple[dict[str, Any], Path, int]:
    """The ``meta`` JSON of the latest (or given) step, checked for format and config compatibility."""
    root, step = _step_dir_and_root(_path(path))
    meta_file = root / str(step) / "meta" / "metadata"
    try:
        meta = json.loads(meta_file.read_text())
    except (OSError, ValueError) as err:  # missing, not UTF-8, not JSON
        raise CheckpointError(f"checkpoint {root / str(step)} is partial: unreadable meta ({err})") from None
    if not isinstance(meta, dict):
        raise CheckpointError(f"checkpoint {root / str(step)} is damaged: its meta is not a JSON object")
    if not meta_digest_matches(meta):
        raise CheckpointError(
            f"checkpoint {root / str(step)} is damaged: its meta does not match the checksum saved with it"
        )
    version = meta.get("format_version")
    if version != FORMAT_VERSION:
        raise CheckpointError(
            f"checkpoint {root / str(step)} has format_version {version!r}; "
            f"this slamorl_jax reads {FORMAT_VERSION}"
        )
    try:
        validate_config(TrainConfig.from_dict(meta["config"]))
    except (KeyError, TypeError, ValueError, AttributeError) as err:  # a value of another type
        raise CheckpointError(f"checkpoint {root / str(step)} has an incompatible config: {err}") from None
    problem = _meta_field_problem(meta)
    if problem is not None:
        raise CheckpointError(f"checkpoint {root / str(step)} is damaged: its meta's {problem}")
    return meta, root, step


def _meta_field_problem(meta: dict[str, Any]) -> str | None:
    """What is malformed in the fields of ``meta`` that loading reads besides the config (counts
    that must be integers, the digests that must map each item's array paths to hex strings), or
    ``None``. A checkpoint whose digests are malformed must not load unchecked."""
    for name in ("observation_dim", "num_actions"):
        value = meta.get(name, 0)
        if isinstance(value, bool) or not isinstance(value, int):
            return f"{name} is not an integer: {value!r}"
    digests = meta.get(META_KEY, {})
    well_formed = isinstance(digests, dict) and all(
        isinstance(item, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in item.items())
        for item in digests.values()
    )
    return None if well_formed else f"{META_KEY} is not a map of array paths to digests per item"


def check_resumable(meta: dict[str, Any], where: str | Path) -> None:
    """Refuse (``CheckpointError``) to resume from a checkpoint that is not a run of this version's
    training: another training-state structure, a policy-only checkpoint (exported, imitated or
    shipped), or another observation or action set. Checked before any step is restored, so
    ``--resume`` never sets such steps aside as damaged."""
    version = meta.get("state_version", 1)  # runs saved before the version was recorded hold 1
    if version != STATE_VERSION:
        raise CheckpointError(
            f"--resume: {where} was saved by a slamorl_jax whose training state has another structure "
            f"(state_version {version!r}, this one {STATE_VERSION}: jobs now carry dual-weight "
            "multipliers, a mid-run event and a square-root online model); its policy still loads for "
            "evaluate and recommend, but to train start a new run"
        )
    digests = meta.get(META_KEY)
    if isinstance(digests, dict) and "state" not in digests:
        raise CheckpointError(
            f"--resume: {where} holds a policy only (an exported, imitated or shipped checkpoint), not "
            "a run's training state; start a new run from it with --init_from"
        )
    config = TrainConfig.from_dict(meta["config"])
    if _check_layout(meta, config, Path(where)) != (config.network.obs_dim or NUM_FEATURES):
        raise CheckpointError(
            f"--resume: {where} was trained on the paper's {NUM_PAPER_FEATURES} features only; its policy "
            "still loads for evaluate and recommend, but to train start a new run"
        )


def _short(error: BaseException) -> str:
    """One line of an orbax or TensorStore error (whose text can run to dozens of lines of spec)."""
    text = str(error).split(" See full TensorStore details")[0].strip()
    line = text.splitlines()[0] if text else type(error).__name__
    return line if len(line) <= 240 else line[:237] + "..."


def _array_layout(tree: Any) -> list[tuple[tuple[int, ...], str]]:
    """The sorted (shape, dtype) of every array of ``tree`` (arrays, shape structs or orbax metadata)."""
    return sorted((tuple(leaf.shape), np.dtype(leaf.dtype).str) for leaf in jax.tree.leaves(tree))


@contextlib.contextmanager
def absl_verbosity(level: int) -> Iterator[None]:
    """absl's (so orbax's) log verbosity set to ``level`` inside the block, restored after it."""
    verbosity = absl_logging.get_verbosity()
    absl_logging.set_verbosity(level)
    try:
        yield
    finally:
        absl_logging.set_verbosity(verbosity)


def _check_stored_layout(where: Path, item: str, abstract: Any, what: str) -> None:
    """Raise :class:`IncompatibleCheckpointError` when ``item``'s stored arrays (orbax's metadata) differ in
    shape or type from ``abstract``'s; metadata that cannot be read is left to the restore to report."""
    # orbax warns that a step's item has no step metadata
    with absl_verbosity(absl_logging.ERROR):
        try:
            with quiet_if_it_fails(), ocp.StandardCheckpointer() as checkpointer:
                stored = checkpointer.metadata(where / item)
            stored_layout = _array_layout(getattr(stored, "item_metadata", stored))
        except Exception:  # damaged or unreadable metadata: the restore itself says so
            stored_layout = []
    if not stored_layout:  # orbax reads damaged metadata as None: damage, which the restore reports
        return
    if stored_layout != _array_layout(abstract):
        raise IncompatibleCheckpointError(
            f"cannot restore {what} from {where}: its arrays have other shapes or types than this "
            "program's (another JAX PRNG implementation, network or batch size?)"
        )


def _restore_item(meta: dict[str, Any], root: Path, step: int, item: str, abstract: Any, what: str) -> Any:
    """Restore ``item`` of ``step`` onto ``abstract`` and check it against the digests in ``meta``."""
    manager = make_manager(root)
    where = root / str(step)
    _check_stored_layout(where, item, abstract, what)
    try:
        with quiet_if_it_fails():
            restored = manager.restore(
                step, args=ocp.args.Composite(**{item: ocp.args.StandardRestore(abstract)})
            )[item]
    except Exception as err:  # orbax raises many types for partial, damaged or mismatched trees
        raise CheckpointError(f"cannot restore {what} from {where}: {_short(err)}") from None
    digests = meta.get(META_KEY)
    expected = digests.get(item) if isinstance(digests, dict) else None
    if isinstance(digests, dict) and expected is None:  # digests saved, but none of this item's
        raise CheckpointError(f"checkpoint {where} is damaged: its meta holds no checksums of its {item}")
    if expected is not None:
        bad = first_mismatch(restored, expected)
        if bad is not None:
            raise CheckpointError(
                f"checkpoint {where} is damaged: array {bad} in {where / item} does not match the "
                "checksum saved with it"
            )
    return restored


def restore_state(path: str | Path, template: TrainState) -> TrainState:
    """Restore the full training state of the latest (or given) step onto ``template``'s structure."""
    meta, root, step = read_meta(path)
    _check_layout(meta, TrainConfig.from_dict(meta["config"]), root / str(step))
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, _to_host(template))
    state = _restore_item(meta, root, step, "state", abstract, "training state")
    return state.replace(key=jax.random.wrap_key_data(state.key))


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

    def holding(self, hold_below: float) -> LoadedPolicy:
        """This policy deciding with the threshold ``hold_below`` in [0, 1] (``ValueError`` otherwise)."""
        return dataclasses.replace(self, hold_below=check_hold_below(hold_below))

    def deciding(self, hold_below: float = 0.0, relocate_payback: float | None = None) -> LoadedPolicy:
        """This policy with a hold threshold (:meth:`holding`) and, unless None, a relocation payback
        rule (:meth:`with_relocate_payback`): what the commands' ``--hold_below`` and
        ``--relocate_payback`` ask for (``ValueError`` as those methods raise it)."""
        policy = self.holding(hold_below)
        return policy if relocate_payback is None else policy.with_relocate_payback(relocate_payback)

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
        settings: ``agent.trainer.env_params_from_config``), built once per loaded policy (about 8 ms
        each time otherwise, most of one ``live.recommend`` call)."""
        return env_params_from_config(self.config)

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


def _check_layout(meta: dict[str, Any], config: TrainConfig, where: Path) -> int:
    """The number of observation features the checkpoint's network reads, after checking that
    they and its actions mean what they meant when it was trained (else ``CheckpointError``)."""
    # Checkpoints from before the forecast block read the paper's 21 features, which never moved.
    obs_dim = int(meta.get("observation_dim", NUM_PAPER_FEATURES))
    same_layout = meta.get("observation_layout") == observation_layout(config.target_cpus_per_gpu)
    if obs_dim != NUM_PAPER_FEATURES and not (obs_dim == NUM_FEATURES and same_layout):
        what = (
            f"another layout of its {obs_dim} features (their order or meaning changed since)"
            if obs_dim == NUM_FEATURES
            else f"another observation ({obs_dim} features; this slamorl_jax has {NUM_FEATURES})"
        )
        raise CheckpointError(f"checkpoint {where} was trained on {what}: train it again with this version")
    if "num_actions" in meta and int(meta["num_actions"]) != config.network.num_actions:
        raise CheckpointError(
            f"checkpoint {where} was trained with {meta['num_actions']} actions in its "
            f"{config.actions!r} set; this slamorl_jax's has {config.network.num_actions}: train it again"
        )
    return obs_dim


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
    config = TrainConfig.from_dict(meta["config"])
    obs_dim = _check_layout(meta, config, root / str(step))
    network, shapes = _network_and_shapes(config, obs_dim)
    # Placed on this process's first device: orbax before 0.12 restores only onto a given sharding.
    on_device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
    abstract = {
        "params": jax.tree.map(lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=on_device), shapes)
    }
    params = _restore_item(meta, root, step, "policy", abstract, "the policy")["params"]

    return LoadedPolicy(config=config, params=params, network=network, step=step, _act=greedy_act(network))


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
    destination: str | Path, params: Any, config: TrainConfig, extra: dict[str, Any] | None = None
) -> Path:
    """Save network parameters made outside a training run (e.g. pre-trained on logged decisions,
    ``slamorl_jax.imitate``) as a policy-only checkpoint of ``config`` at step 0 in the empty directory
    ``destination``: what :func:`load_policy` and ``train --init_from`` read. Returns the step
    directory. ``ValueError`` for a config :func:`validate_config` refuses or ``params`` that are not
    its network's (another tree, shape or dtype), which :func:`load_policy` would refuse later."""
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    validate_config(config)
    _, wanted = _network_and_shapes(config, config.network.obs_dim or NUM_FEATURES)
    same_tree = jax.tree.structure(params) == jax.tree.structure(wanted)
    arrays = all(hasattr(leaf, "shape") and hasattr(leaf, "dtype") for leaf in jax.tree.leaves(params))
    if not (same_tree and arrays and _array_layout(params) == _array_layout(wanted)):
        raise ValueError(
            f"params are not the network of this config ({config.actions!r} actions, hidden sizes "
            f"{tuple(config.hidden_sizes)}): compare them with agent.networks.init_params"
        )
    return _save_policy_only(destination, jax.device_get(params), {**_meta(config, 0), **(extra or {})}, 0)


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
            _quiet_save(
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


def write_failed(error: OSError | ValueError) -> bool:
    """Whether ``error`` from an orbax save is the machine's (an ``OSError``, or TensorStore's
    ``ValueError`` carrying the OS's error number), not a program error."""
    return isinstance(error, OSError) or OS_ERROR_CODE.search(str(error)) is not None


def write_failure(error: OSError | ValueError) -> str:
    """Why a write failed, in a few words: the OS's reason (TensorStore's errors carry its code, after
    a path or two that would push it out of a one-line message), else the message's first line."""
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    code = OS_ERROR_CODE.search(str(error))
    return os.strerror(int(code.group(1))) if code else first_line(error)


def has_checkpoint(directory: str | Path) -> bool:
    """Whether ``directory`` holds at least one complete checkpoint step."""
    path = Path(directory)
    try:
        return path.is_dir() and bool(complete_steps(path))
    except OSError:
        return False


def params_equal(a: Any, b: Any) -> bool:
    """Exact equality of two parameter trees (same structure and bitwise-equal leaves)."""
    if jax.tree.structure(a) != jax.tree.structure(b):
        return False
    pairs = zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    return all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in pairs)

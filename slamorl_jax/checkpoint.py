"""orbax checkpoints of training runs (``policy_checkpoint.py`` loads and saves a policy alone).

A checkpoint step holds three items: ``state`` (the whole :class:`TrainState`, for ``--resume``),
``policy`` (network parameters only) and ``meta`` (JSON: format version, the resolved
:class:`TrainConfig`, update and env-step counters); ``policy_checkpoint.load_policy`` reads ``meta``
and ``policy`` alone. Saves are synchronous and orbax
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
import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
from absl import logging as absl_logging

from slamorl_jax.agent.config import TrainConfig
from slamorl_jax.agent.config_checks import validate_config
from slamorl_jax.agent.trainer import TrainState
from slamorl_jax.array_checksum import (
    META_KEY,
    first_mismatch,
    meta_digest_matches,
    signed_meta,
    tree_digests,
)
from slamorl_jax.cli_args import first_line
from slamorl_jax.env.observation import NUM_FEATURES, NUM_PAPER_FEATURES, observation_layout
from slamorl_jax.restore_noise import quiet_if_it_fails

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
        **run_meta(config, step),
        META_KEY: {"state": tree_digests(host_state), "policy": tree_digests(policy)},
        **(extra or {}),
    }
    try:
        quiet_save(
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


def quiet_save(manager: ocp.CheckpointManager, step: int, force: bool = False, **items: Any) -> None:
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


def run_meta(config: TrainConfig, step: int) -> dict[str, Any]:
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
    if check_layout(meta, config, Path(where)) != (config.network.obs_dim or NUM_FEATURES):
        raise CheckpointError(
            f"--resume: {where} was trained on the paper's {NUM_PAPER_FEATURES} features only; its policy "
            "still loads for evaluate and recommend, but to train start a new run"
        )


def _short(error: BaseException) -> str:
    """One line of an orbax or TensorStore error (whose text can run to dozens of lines of spec)."""
    text = str(error).split(" See full TensorStore details")[0].strip()
    line = text.splitlines()[0] if text else type(error).__name__
    return line if len(line) <= 240 else line[:237] + "..."


def array_layout(tree: Any) -> list[tuple[tuple[int, ...], str]]:
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
            stored_layout = array_layout(getattr(stored, "item_metadata", stored))
        except Exception:  # damaged or unreadable metadata: the restore itself says so
            stored_layout = []
    if not stored_layout:  # orbax reads damaged metadata as None: damage, which the restore reports
        return
    if stored_layout != array_layout(abstract):
        raise IncompatibleCheckpointError(
            f"cannot restore {what} from {where}: its arrays have other shapes or types than this "
            "program's (another JAX PRNG implementation, network or batch size?)"
        )


def restore_item(meta: dict[str, Any], root: Path, step: int, item: str, abstract: Any, what: str) -> Any:
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


def stored_config(meta: dict[str, Any]) -> TrainConfig:
    """The run's :class:`TrainConfig` in a checkpoint's ``meta``, as its policy runs: a policy saved
    before the forecast block (its meta has no ``observation_dim``) reads the paper's 21 features
    alone, which its config, saved before ``--observation`` existed, does not say; it reads as
    ``--observation=paper``, the runs whose networks read the same."""
    config = TrainConfig.from_dict(meta["config"])
    if "observation_dim" not in meta:
        config = dataclasses.replace(config, observation="paper")
    return config


def check_layout(meta: dict[str, Any], config: TrainConfig, where: Path) -> int:
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


def restore_state(path: str | Path, template: TrainState) -> TrainState:
    """Restore the full training state of the latest (or given) step onto ``template``'s structure."""
    meta, root, step = read_meta(path)
    check_layout(meta, TrainConfig.from_dict(meta["config"]), root / str(step))
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, _to_host(template))
    state = restore_item(meta, root, step, "state", abstract, "training state")
    return state.replace(key=jax.random.wrap_key_data(state.key))


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

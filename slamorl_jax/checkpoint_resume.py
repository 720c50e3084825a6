"""Resuming a run whose newest checkpoint is damaged: set it aside, continue from the newest intact one.

``checkpoint.py`` checks every restored array against the digests saved with it; here a training
run's ``--resume`` walks its steps from the newest down, renames each damaged one ``damaged-<step>``
(kept for inspection, never read or counted again, and its step number free to be saved again) with
one line saying so, and restores the first that checks out.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from slamorl_jax.agent.trainer import TrainState
from slamorl_jax.checkpoint import (
    CheckpointError,
    IncompatibleCheckpointError,
    complete_steps,
    has_checkpoint,
    read_meta,
    restore_state,
    run_root,
)
from slamorl_jax.distributed import any_process, is_primary, sync_processes
from slamorl_jax.policy_checkpoint import load_policy


def newest_readable_meta(directory: str | Path) -> dict[str, Any]:
    """The ``meta`` of the newest step of a run directory whose ``meta`` reads and checks out (a
    damaged newer step is :func:`restore_newest_intact`'s to report)."""
    root = run_root(directory)
    error = CheckpointError(step_folder_hint(root) or f"no complete checkpoint in {root}")
    for step in reversed(complete_steps(root)):
        try:
            return read_meta(root / str(step))[0]
        except CheckpointError as err:
            error = err
    raise error


DAMAGED_PREFIX = "damaged-"  # of a step set aside


def set_aside(step_dir: Path) -> Path:
    """Rename a damaged step directory to ``damaged-<step>`` (kept for inspection, never read or
    counted again); the new path."""
    target = step_dir.with_name(f"{DAMAGED_PREFIX}{step_dir.name}")
    suffix = 1
    while target.exists():
        suffix += 1
        target = step_dir.with_name(f"{DAMAGED_PREFIX}{step_dir.name}-{suffix}")
    step_dir.rename(target)
    return target


def nothing_to_resume(checkpoint_dir: Path, log_dir: Path) -> str:
    """Why ``--resume`` has no checkpoint in ``checkpoint_dir`` to continue from, beside the logs in
    ``log_dir``, and what to do: a step folder named instead of its run's folder, every step set
    aside as damaged (a fresh start there is refused too, the folder not being empty), or a run
    stopped before its first save."""
    if hint := step_folder_hint(checkpoint_dir):
        return hint
    damaged = sorted(p.name for p in checkpoint_dir.glob(f"{DAMAGED_PREFIX}*"))  # none in a missing folder
    if damaged:
        shown = ", ".join(damaged[:3]) + (" ..." if len(damaged) > 3 else "")
        return (
            f"--resume: every checkpoint in {checkpoint_dir} was set aside as damaged ({shown}), so "
            "there is nothing intact to continue: start the run again in another --run_dir (the "
            "damaged steps stay for inspection)"
        )
    return (
        f"--resume: the run in {checkpoint_dir} saved no checkpoint before it stopped, so there is "
        f"nothing to continue: remove its logs in {log_dir} and start it again"
    )


def step_folder_hint(checkpoint_dir: Path) -> str | None:
    """The refusal of a ``--resume`` given one step folder of a run (``<run>/checkpoints/1500``)
    instead of the run's folder, naming the one to pass; ``None`` for any other folder."""
    if not (checkpoint_dir.name.isdigit() and has_checkpoint(checkpoint_dir.parent)):
        return None
    return (
        f"--resume: {checkpoint_dir} is one checkpoint step of the run in {checkpoint_dir.parent}: "
        f"pass --checkpoint_dir={checkpoint_dir.parent} (or that run's --run_dir)"
    )


def restore_newest_intact(
    directory: str | Path, template: TrainState, report: Callable[[str], None]
) -> TrainState:
    """The training state of the newest step of ``directory`` that restores and checks out (its
    training state and its policy).

    Each newer damaged step is set aside (:func:`set_aside`) with one ``report`` line saying so;
    :class:`CheckpointError` when no step is intact. A step whose arrays have another layout than
    ``template``'s (:class:`IncompatibleCheckpointError`) is not damage: it stops the walk, nothing
    set aside.
    """
    root = run_root(directory)  # a missing or empty directory is an error of its own
    # Every process of a multi-process run walks the same steps in step with the others: each tries
    # a step, all learn whether any found it damaged, and process 0 alone sets it aside (the others'
    # renames raced it and failed, and the one left waiting in orbax's next collective hung).
    for step in reversed(complete_steps(root)):
        damage = None
        try:
            state = restore_state(root / str(step), template)
            # The step's policy item too: what evaluate, recommend and export read. A complete run
            # whose last policy is damaged would otherwise resume as "complete" and stay unusable.
            load_policy(root / str(step))
        except IncompatibleCheckpointError as err:  # intact data of another layout: nothing is set aside
            raise IncompatibleCheckpointError(f"--resume: {err}; no checkpoint was set aside") from None
        except CheckpointError as err:
            damage = err
        if not any_process(damage is not None):
            return state
        if is_primary():
            moved = set_aside(root / str(step))
            report(
                f"{damage or 'another process found it damaged'}; set aside as {moved.name}, "
                "trying the previous checkpoint"
            )
        sync_processes(f"set aside {step}")  # renamed before any process reads on
    raise CheckpointError(f"no intact checkpoint left in {root}")

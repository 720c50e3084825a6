"""Checks of a training command line beyond ``validate_config`` (which checks every setting's type,
finiteness, range, sizes and budget, from the command line and the Python API alike): stray words,
the evaluation's episodes, the catalogue file, the note on a budget that rounds up.

Each check raises ``ValueError`` with one line naming the flag and what is allowed; ``train.py``
turns that into exit status 2 before anything is written or compiled.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from slamorl_jax.agent.config import TrainConfig

MAX_EVAL_EPISODES = 2**20


def check_no_positional(argv: list[str]) -> None:
    """``argv`` (program name first) holds only flags: a stray word is an error, not ignored."""
    stray = argv[1:]
    if stray:
        raise ValueError(
            f"unexpected argument {stray[0]!r}: every setting is a --flag (see --helpfull)"
            + (f"; {len(stray) - 1} more" if len(stray) > 1 else "")
        )


def budget_note(config: TrainConfig) -> str | None:
    """A line saying how ``--total_timesteps`` rounds up to whole updates and chunks, if it does."""
    steps = config.num_updates * config.batch_size
    if steps == config.total_timesteps:
        return None
    return (
        f"note: --total_timesteps={config.total_timesteps:,} rounds up to {steps:,} steps: "
        f"{config.num_updates:,} updates of {config.batch_size:,} (num_envs x rollout_length), "
        f"in chunks of --updates_per_chunk={config.updates_per_chunk}"
    )


def check_eval_episodes(value: int) -> None:
    """``--eval_episodes`` is 0 (skip) to ``MAX_EVAL_EPISODES``."""
    if not 0 <= value <= MAX_EVAL_EPISODES:
        raise ValueError(f"--eval_episodes must be in [0, {MAX_EVAL_EPISODES:,}], got {value:,}")


def checked_catalog(config: TrainConfig) -> TrainConfig:
    """``config`` with ``--catalog`` recorded as an absolute path, after reading the file as a
    catalogue and building the run's env params on it (``ValueError`` in one line for a file that is
    missing or unreadable, is not a catalogue of this version, or gives params ``validate_params``
    refuses); ``config`` as it is without ``--catalog``."""
    if config.catalog is None:
        return config
    from slamorl_jax.agent.trainer import catalog_for_config  # loads JAX: after the flags

    config = dataclasses.replace(config, catalog=os.path.normpath(Path(config.catalog).absolute()))
    catalog_for_config(config.catalog, config)
    return config

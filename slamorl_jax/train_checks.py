"""Checks of a training command line beyond ``validate_config``: sizes, finiteness, the step budget.

Each check raises ``ValueError`` with one line naming the flag and what is allowed; ``train.py``
turns that into exit status 2 before anything is written or compiled.
"""

from __future__ import annotations

import dataclasses
import math

from slamorl_jax.agent.config import TrainConfig

INT32_MAX = 2**31 - 1
MAX_NUM_ENVS = 2**22  # 4,194,304 jobs in parallel: far beyond one accelerator's memory today
MAX_EVAL_EPISODES = 2**20


def check_no_positional(argv: list[str]) -> None:
    """``argv`` (program name first) holds only flags: a stray word is an error, not ignored."""
    stray = argv[1:]
    if stray:
        raise ValueError(
            f"unexpected argument {stray[0]!r}: every setting is a --flag (see --helpfull)"
            + (f"; {len(stray) - 1} more" if len(stray) > 1 else "")
        )


#: The largest float32: a setting beyond it becomes ``inf`` in the learner's arithmetic.
FLOAT32_MAX = 3.4028234663852886e38


def check_finite(config: TrainConfig) -> None:
    """Every floating-point setting is a finite number that float32, in which the learner computes,
    can hold (``inf`` passes ``>= 0`` checks; 1e39 becomes ``inf`` there)."""
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        values = value if isinstance(value, tuple) else (value,)
        for number in values:
            if isinstance(number, float) and not (math.isfinite(number) and abs(number) <= FLOAT32_MAX):
                raise ValueError(
                    f"--{field.name} must be a finite number within float32's range, got {value}"
                )


def check_sizes(config: TrainConfig) -> None:
    """Counts stay within what one run can index (int32 counters, ``MAX_NUM_ENVS`` jobs)."""
    if config.num_envs > MAX_NUM_ENVS:
        raise ValueError(f"--num_envs must be at most {MAX_NUM_ENVS:,}, got {config.num_envs:,}")
    limits = {
        "--rollout_length": config.rollout_length,
        "--update_epochs": config.update_epochs,
        "--updates_per_chunk": config.updates_per_chunk,
        "num_envs x rollout_length": config.batch_size,
    }
    for name, value in limits.items():
        if value > INT32_MAX:
            raise ValueError(f"{name} must be at most {INT32_MAX:,} (2**31 - 1), got {value:,}")
    steps = config.num_updates * config.update_epochs * config.num_minibatches
    if steps > INT32_MAX:
        raise ValueError(
            f"--total_timesteps={config.total_timesteps:,} needs {steps:,} gradient steps (updates x "
            f"update_epochs x num_minibatches); at most {INT32_MAX:,} fit the optimiser's counter"
        )


def check_budget(config: TrainConfig) -> None:
    """``--total_timesteps`` buys at least one PPO update of ``num_envs x rollout_length`` steps."""
    if config.total_timesteps < config.batch_size:
        raise ValueError(
            f"--total_timesteps={config.total_timesteps:,} is less than one update: num_envs x "
            f"rollout_length = {config.batch_size:,} steps"
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

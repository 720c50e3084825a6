"""The learning-rate schedule of a training run: what the optimiser follows and what the logs show."""

from __future__ import annotations

import optax

from slamorl_jax.agent.config import TrainConfig
from slamorl_jax.agent.config_checks import gradient_steps


def learning_rate_schedule(config: TrainConfig) -> optax.Schedule:
    """``--lr_schedule`` over the run's gradient steps: ``linear`` and ``cosine`` decay
    ``--learning_rate`` to 0 at the last step of ``config.num_updates``; ``constant`` keeps it."""
    steps = gradient_steps(config, config.num_updates)
    if config.lr_schedule == "linear":
        return optax.linear_schedule(config.learning_rate, 0.0, steps)
    if config.lr_schedule == "cosine":
        return optax.cosine_decay_schedule(config.learning_rate, steps)
    return optax.constant_schedule(config.learning_rate)


def learning_rate_after(config: TrainConfig, updates: int) -> float:
    """The learning rate of the optimiser's next step after ``updates`` PPO updates (what the run's
    metrics log as ``learning_rate``)."""
    return float(learning_rate_schedule(config)(gradient_steps(config, updates)))

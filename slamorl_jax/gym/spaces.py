"""The env's spaces as Gymnasium spaces (observation, action, and MO-Gymnasium's ``reward_space``)."""

from __future__ import annotations

import numpy as np
from gymnasium import spaces as gym_spaces
from gymnax.environments.spaces import gymnax_space_to_gym_space

from slamorl_jax.env.job_env import JobAllocationEnv
from slamorl_jax.env.params import EnvParams


def single_spaces(
    env: JobAllocationEnv, params: EnvParams
) -> tuple[gym_spaces.Box, gym_spaces.Discrete, gym_spaces.Box]:
    """``(observation, action, reward)`` spaces of one job: float32 features in [0, 1], the action
    indices, and the (time, cost, sla) reward vector's bounds (shape ``(reward_dim,)``)."""
    return (
        gymnax_space_to_gym_space(env.observation_space(params)),
        gymnax_space_to_gym_space(env.action_space(params)),
        reward_box(env, params),
    )


def reward_box(env: JobAllocationEnv, params: EnvParams) -> gym_spaces.Box:
    """The bounds of one job's (time, cost, sla) reward vector under ``params`` (its clip and SLA
    bonuses set them: rebuilt whenever a reset switches params)."""
    reward = env.reward_space(params)
    return gym_spaces.Box(np.asarray(reward.low), np.asarray(reward.high), reward.shape, np.float32)

"""``JobAllocationMOEnv``: one job as a Gymnasium env with a vector reward (MO-Gymnasium's conventions).

``step`` returns the (time, cost, sla) reward as a float32 array and ``reward_space`` bounds it, as
MO-Gymnasium's envs do, so its single-env wrappers (``LinearReward``, ``MORecordEpisodeStatistics``,
``MONormalizeReward``, ``MOClipReward``) apply; ``gymnasium.utils.env_checker.check_env`` passes (it
warns that the reward is not a scalar, as for every MO-Gymnasium env). The job runs in the jitted
JAX env (``batched.py`` with one env). The step that ends a job returns its last observation; call
``reset`` for the next job (stepping on instead shows the next job's first observation, with a zero
reward and the ``info`` reset gives).
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium
import numpy as np

from slamorl_jax.env.action_sets import DEFAULT_ACTION_SET
from slamorl_jax.env.job_env import JobAllocationEnv
from slamorl_jax.env.objectives import NUM_OBJECTIVES
from slamorl_jax.env.params import EnvParams
from slamorl_jax.gym.batched import RESET_INFO_KEYS, BatchedJobEnv, check_in_action_space
from slamorl_jax.gym.options import build_params, draw_seed, params_option, render_nothing, seed_option
from slamorl_jax.gym.spaces import reward_box, single_spaces


class JobAllocationMOEnv(gymnasium.Env):
    """One training job of a scenario, re-allocated every epoch (see the module docstring)."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}
    reward_dim = NUM_OBJECTIVES

    def __init__(
        self,
        scenario: str | None = None,
        action_set: str = DEFAULT_ACTION_SET,
        params: EnvParams | None = None,
        render_mode: str | None = None,
    ) -> None:
        if render_mode is not None:
            raise ValueError(f"render_mode must be None (this env does not render), got {render_mode!r}")
        env = JobAllocationEnv(action_set=action_set, scenario="mixed" if scenario is None else scenario)
        self.render_mode = None
        self._job = BatchedJobEnv(env, build_params(env, params, scenario), 1)
        self.observation_space, self.action_space, self.reward_space = single_spaces(env, self._job.params)

    def render(self) -> None:
        """Nothing to draw (``options.render_nothing``)."""
        render_nothing()

    @property
    def params(self) -> EnvParams:
        """The ``EnvParams`` the job runs under."""
        return self._job.params

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start a new job; ``options={"env_params": params}`` switches params (and ``reward_space``
        with them). ``info`` holds the job's first objective ``weights`` (what a loaded policy takes
        with the observation) and its ``workload``, ``gpu_type``, ``scenario`` and ``preference``."""
        super().reset(seed=seed_option(seed))
        params = params_option(options)
        obs, info = self._job.reset(draw_seed(self.np_random), params)
        if params is not None:
            self.reward_space = reward_box(self._job.env, self._job.params)
        return obs[0], {name: value[0] for name, value in info.items()}

    def step(self, action: Any) -> tuple[np.ndarray, np.ndarray, bool, bool, dict[str, Any]]:
        """One decision (one integer in ``action_space``): observation, reward vector, terminated,
        truncated, info; ``ValueError`` for anything else."""
        index = np.asarray(action)
        if index.shape != () or not np.issubdtype(index.dtype, np.integer):
            raise ValueError(f"action must be one integer action index, got {index.dtype} {index.shape}")
        check_in_action_space("action", index, self._job.env.num_actions)
        out = self._job.step(index.reshape(1))
        # The step that only shows the next job (no reset() after the last one) has reset's info.
        names = out.info if out.stepped[0] else RESET_INFO_KEYS
        info = {name: out.info[name][0] for name in names}
        return out.obs[0], out.reward[0], bool(out.terminated[0]), bool(out.truncated[0]), info

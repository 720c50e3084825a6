"""``JobAllocationVectorEnv``: a Gymnasium vector env of ``num_envs`` jobs with a vector reward.

MO-Gymnasium's conventions: ``step`` returns rewards of shape ``(num_envs, reward_dim)`` (time, cost,
sla) and ``reward_space`` is one job's reward ``Box`` of shape ``(reward_dim,)`` (as on
``mo_gymnasium.wrappers.vector.MOSyncVectorEnv``), so ``MORecordEpisodeStatistics`` and the like
apply. Gymnasium's: batched ``observation_space``/``action_space`` with ``single_*`` ones,
``metadata["autoreset_mode"] = NEXT_STEP`` (``batched.py``), ``reset(seed=...)`` reproducible (one
seed, or one per env as Gymnasium's vector envs take them), and
``info`` as arrays with a ``_name`` mask each. On the step that only shows a new job, as on
Gymnasium's own vector envs, that env's ``info`` is reset's (the new job's ``weights``, ``workload``,
``gpu_type``, ``scenario`` and ``preference``, masks true) and its other entries are zeros with
masks false. All jobs step in one jitted call of the JAX env.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from gymnasium.vector import VectorEnv
from gymnasium.vector.utils import batch_space
from gymnasium.vector.vector_env import AutoresetMode

from slamorl_jax.env.action_sets import DEFAULT_ACTION_SET
from slamorl_jax.env.job_env import JobAllocationEnv
from slamorl_jax.env.objectives import NUM_OBJECTIVES
from slamorl_jax.env.params import EnvParams
from slamorl_jax.gym.batched import RESET_INFO_KEYS, BatchedJobEnv
from slamorl_jax.gym.options import (
    build_params,
    draw_seed,
    params_option,
    per_env_seeds,
    render_nothing,
    vector_seed_option,
    with_step_limit,
)
from slamorl_jax.gym.spaces import reward_box, single_spaces


class JobAllocationVectorEnv(VectorEnv):
    """``num_envs`` training jobs of a scenario, re-allocated every epoch (see the module docstring)."""

    metadata: ClassVar[dict[str, Any]] = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}
    reward_dim = NUM_OBJECTIVES

    def __init__(
        self,
        num_envs: int = 8,
        scenario: str | None = None,
        action_set: str = DEFAULT_ACTION_SET,
        params: EnvParams | None = None,
        render_mode: str | None = None,
        max_episode_steps: int | None = None,
    ) -> None:
        if isinstance(num_envs, bool) or not isinstance(num_envs, int | np.integer) or num_envs < 1:
            raise ValueError(f"num_envs must be a positive integer, got {num_envs!r}")
        if render_mode is not None:
            raise ValueError(f"render_mode must be None (this env does not render), got {render_mode!r}")
        env = JobAllocationEnv(action_set=action_set, scenario="mixed" if scenario is None else scenario)
        self.num_envs = int(num_envs)
        self.render_mode = None
        self._max_episode_steps = max_episode_steps  # kept through a reset that switches params
        params = with_step_limit(build_params(env, params, scenario), max_episode_steps)
        self._jobs = BatchedJobEnv(env, params, self.num_envs)
        self.single_observation_space, self.single_action_space, self.reward_space = single_spaces(
            env, self._jobs.params
        )
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

    def render(self) -> None:
        """Nothing to draw (``options.render_nothing``)."""
        render_nothing()

    @property
    def params(self) -> EnvParams:
        """The ``EnvParams`` the jobs run under."""
        return self._jobs.params

    def reset(
        self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start ``num_envs`` new jobs; ``options={"env_params": params}`` switches params (and
        ``reward_space`` with them). ``seed``: one integer, from which the whole batch's jobs derive,
        or a list of ``num_envs`` (Gymnasium's vector form), env ``i`` then running the jobs a single
        env reset with ``seed[i]`` runs; a ``None`` entry draws its seed from the vector env's own
        generator, which the list's integers seed (so later unseeded resets repeat; a list of
        ``None`` only leaves that generator as it was). New params keep the constructor's
        ``max_episode_steps``."""
        seed = vector_seed_option(seed, self.num_envs)
        params = params_option(options)
        if params is not None:  # make_vec's step limit stays, as a TimeLimit wrapper's would
            params = with_step_limit(params, self._max_episode_steps)
        if isinstance(seed, list):
            super().reset(seed=None)
            if given := [one for one in seed if one is not None]:
                # The vector env's own generator from the list too, so the next unseeded reset (and
                # a None entry here) repeats with it (np_random_seed then reads -1: set directly).
                self.np_random = np.random.Generator(np.random.PCG64(np.random.SeedSequence(given)))
            jax_seed: int | list[int] = per_env_seeds(seed, self.np_random)
        else:
            super().reset(seed=seed)
            jax_seed = draw_seed(self.np_random)
        obs, info = self._jobs.reset(jax_seed, params)
        if params is not None:
            self.reward_space = reward_box(self._jobs.env, self._jobs.params)
        every_env = np.ones(self.num_envs, bool)
        return obs, {**info, **{f"_{name}": every_env for name in info}}

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """One decision per job: observations, reward vectors, terminated, truncated, info."""
        out = self._jobs.step(actions)
        info: dict[str, Any] = {}
        every_env = np.ones(self.num_envs, bool)
        for name, value in out.info.items():
            info[name] = value
            info[f"_{name}"] = every_env if name in RESET_INFO_KEYS else out.stepped
        return out.obs, out.reward, out.terminated, out.truncated, info

"""gymnax's own consumers on the env, used as their documentation says (no project-specific shims).

LogWrapper and FlattenObservationWrapper under lax.scan run in the README snippet
(test_readme_interop.py); here: StickyActionWrapper's checks, GymnaxToVectorGymWrapper and its
spaces, RolloutWrapper, and a PureJaxRL-structured PPO (purejaxrl_ppo.py) by env name.
"""

from __future__ import annotations

import gymnasium
import gymnax
import jax
import numpy as np
import pytest
from gymnax.experimental import RolloutWrapper
from gymnax.wrappers import GymnaxToVectorGymWrapper, StickyActionWrapper

from slamorl_jax.env import GYMNAX_SCALAR_ID, NUM_FEATURES, make
from tests.purejaxrl_ppo import make_train


def test_sticky_action_wrapper_accepts_the_action_space() -> None:
    """StickyActionWrapper requires a gymnax Discrete action space (it raised before issue 9)."""
    env, _ = make()
    sticky = StickyActionWrapper(env, sticky_action_prob=0.25)
    assert sticky.action_space(env.default_params).n == env.num_actions


@pytest.mark.slow
def test_gymnax_to_vector_gym_wrapper() -> None:
    """Gymnasium spaces convert (Discrete -> MultiDiscrete batch, Box features) and it steps."""
    env, params = make("balanced", reward="adaptive")
    vector = GymnaxToVectorGymWrapper(env, num_envs=2, params=params, seed=0)
    assert vector.single_action_space == gymnasium.spaces.Discrete(env.num_actions)
    assert isinstance(vector.action_space, gymnasium.spaces.MultiDiscrete)
    assert vector.single_observation_space.shape == (NUM_FEATURES,)
    assert vector.observation_space.shape == (2, NUM_FEATURES)
    obs, _ = vector.reset(seed=1)
    assert np.asarray(obs) in vector.observation_space
    _, reward, _, _, info = vector.step(vector.action_space.sample())
    assert np.asarray(reward).shape == (2,) and np.asarray(info["vector_reward"]).shape == (2, 3)


@pytest.mark.slow
def test_rollout_wrapper_by_env_and_by_name() -> None:
    """RolloutWrapper reads max_steps_in_episode and sums the scalar reward over a rollout."""
    env, params = make("balanced", reward="cost")
    rollout = RolloutWrapper(env=env, env_params=params, num_env_steps=12)
    *_, returns = rollout.batch_rollout(jax.random.split(jax.random.key(0), 2), None)
    assert returns.shape == (2, 1) and np.all(np.isfinite(returns))
    by_name = RolloutWrapper(env_name=GYMNAX_SCALAR_ID, env_params={"max_steps_in_episode": 30})
    assert int(by_name.num_env_steps) == 30


@pytest.mark.slow
def test_purejaxrl_structured_ppo_trains_by_env_name() -> None:
    """A few PPO updates on gymnax.make("JobAllocationScalar-v0") with LogWrapper: finite losses,
    finished episodes logged."""
    config = {
        "ENV_NAME": GYMNAX_SCALAR_ID,
        "NUM_ENVS": 4,
        "NUM_STEPS": 32,
        "NUM_MINIBATCHES": 2,
        "UPDATE_EPOCHS": 2,
        "NUM_UPDATES": 3,
        "LR": 3e-4,
        "GAMMA": 1.0,
        "GAE_LAMBDA": 0.95,
        "CLIP_EPS": 0.2,
        "VF_COEF": 0.5,
        "ENT_COEF": 0.01,
    }
    metrics = jax.device_get(jax.jit(make_train(config))(jax.random.key(0)))
    assert metrics["loss"].shape == (3,) and np.all(np.isfinite(metrics["loss"]))
    assert metrics["episodes"].sum() > 0 and np.isfinite(metrics["return_sum"]).all()
    assert gymnax.make(GYMNAX_SCALAR_ID)[0].adaptive

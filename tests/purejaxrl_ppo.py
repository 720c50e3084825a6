"""A minimal PPO in PureJaxRL's structure, written against gymnax's documented API only.

It stands for third-party code: ``make_train(config)`` builds the env with ``gymnax.make`` from
``config["ENV_NAME"]``, wraps it in gymnax's ``FlattenObservationWrapper`` and ``LogWrapper``, and
returns a pure ``train(key)`` of nested ``lax.scan``s (updates -> rollout steps -> reverse GAE ->
epochs -> minibatches). Nothing in it knows about slamorl_jax beyond the env name.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import flax.linen as nn
import gymnax
import jax
import jax.numpy as jnp
import optax
from flax.training.train_state import TrainState
from gymnax.wrappers import FlattenObservationWrapper, LogWrapper


class ActorCritic(nn.Module):
    """Two tanh MLP heads: action logits and a scalar value."""

    num_actions: int
    hidden: int = 32

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        actor = nn.tanh(nn.Dense(self.hidden)(obs))
        critic = nn.tanh(nn.Dense(self.hidden)(obs))
        return nn.Dense(self.num_actions)(actor), nn.Dense(1)(critic)[..., 0]


class Transition(NamedTuple):
    """One step of the rollout buffer."""

    done: jax.Array
    action: jax.Array
    value: jax.Array
    reward: jax.Array
    log_prob: jax.Array
    obs: jax.Array


def action_log_prob(logits: jax.Array, action: jax.Array) -> jax.Array:
    """Log-probability of ``action`` under categorical ``logits`` (batched)."""
    return jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], -1)[:, 0]


def make_train(config: dict[str, Any]) -> Any:
    """``train(key)`` for ``config`` (PureJaxRL's keys)."""
    num_envs, num_steps = config["NUM_ENVS"], config["NUM_STEPS"]
    minibatch = num_envs * num_steps // config["NUM_MINIBATCHES"]
    env, env_params = gymnax.make(config["ENV_NAME"])
    env = LogWrapper(FlattenObservationWrapper(env))
    network = ActorCritic(env.action_space(env_params).n)

    def train(key: jax.Array) -> dict[str, jax.Array]:
        key, init_key, reset_key = jax.random.split(key, 3)
        obs_size = env.observation_space(env_params).shape[0]
        params = network.init(init_key, jnp.zeros((obs_size,)))
        tx = optax.chain(optax.clip_by_global_norm(0.5), optax.adam(config["LR"], eps=1e-5))
        state = TrainState.create(apply_fn=network.apply, params=params, tx=tx)
        obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(
            jax.random.split(reset_key, num_envs), env_params
        )

        def update(runner: tuple, _: None) -> tuple[tuple, dict[str, jax.Array]]:
            def env_step(runner: tuple, _: None) -> tuple[tuple, Transition]:
                state, env_state, obs, key = runner
                key, action_key, step_key = jax.random.split(key, 3)
                logits, value = network.apply(state.params, obs)
                action = jax.random.categorical(action_key, logits)
                log_prob = action_log_prob(logits, action)
                obs_next, env_state, reward, terminated, truncated, info = jax.vmap(
                    env.step, in_axes=(0, 0, 0, None)
                )(jax.random.split(step_key, num_envs), env_state, action, env_params)
                done = jnp.logical_or(terminated, truncated)
                transition = Transition(done, action, value, reward, log_prob, obs)
                return (state, env_state, obs_next, key), (transition, info)

            runner, (batch, info) = jax.lax.scan(env_step, runner, None, num_steps)
            state, env_state, last_obs, key = runner
            _, last_value = network.apply(state.params, last_obs)

            def gae_step(carry: tuple, t: Transition) -> tuple[tuple, jax.Array]:
                gae, next_value = carry
                delta = t.reward + config["GAMMA"] * next_value * (1 - t.done) - t.value
                gae = delta + config["GAMMA"] * config["GAE_LAMBDA"] * (1 - t.done) * gae
                return (gae, t.value), gae

            _, advantages = jax.lax.scan(
                gae_step, (jnp.zeros_like(last_value), last_value), batch, reverse=True
            )
            targets = advantages + batch.value

            def epoch(carry: tuple, _: None) -> tuple[tuple, jax.Array]:
                state, key = carry
                key, perm_key = jax.random.split(key)
                flat = jax.tree.map(
                    lambda x: x.reshape((num_envs * num_steps, *x.shape[2:])), (batch, advantages, targets)
                )
                order = jax.random.permutation(perm_key, num_envs * num_steps)
                shuffled = jax.tree.map(lambda x: x[order].reshape((-1, minibatch, *x.shape[1:])), flat)

                def minibatch_step(state: TrainState, mb: tuple) -> tuple[TrainState, jax.Array]:
                    t, adv, target = mb

                    def loss_fn(params: Any) -> jax.Array:
                        logits, value = network.apply(params, t.obs)
                        log_prob = action_log_prob(logits, t.action)
                        ratio = jnp.exp(log_prob - t.log_prob)
                        norm = (adv - adv.mean()) / (adv.std() + 1e-8)
                        clip = config["CLIP_EPS"]
                        actor = -jnp.minimum(ratio * norm, jnp.clip(ratio, 1 - clip, 1 + clip) * norm).mean()
                        critic = 0.5 * jnp.square(value - target).mean()
                        entropy = -(jax.nn.softmax(logits) * jax.nn.log_softmax(logits)).sum(-1).mean()
                        return actor + config["VF_COEF"] * critic - config["ENT_COEF"] * entropy

                    loss, grads = jax.value_and_grad(loss_fn)(state.params)
                    return state.apply_gradients(grads=grads), loss

                state, losses = jax.lax.scan(minibatch_step, state, shuffled)
                return (state, key), losses

            (state, key), losses = jax.lax.scan(epoch, (state, key), None, config["UPDATE_EPOCHS"])
            ended = info["returned_episode"]
            metrics = {
                "loss": losses.mean(),
                "episodes": ended.sum(),
                "return_sum": jnp.where(ended, info["returned_episode_returns"], 0.0).sum(),
            }
            return (state, env_state, last_obs, key), metrics

        runner = (state, env_state, obs, key)
        _, metrics = jax.lax.scan(update, runner, None, config["NUM_UPDATES"])
        return metrics

    return train

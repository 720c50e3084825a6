"""Per-objective GAE (``agent/gae.py``) and the adaptive-weight PPO loss (``agent/losses.py``) by hand.

The GAE cases use gamma = lambda = 0.5 and small integers, so every expected value below is exact in
float32 and was worked out on paper (the arithmetic is written next to each case).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slamorl_jax.agent.gae import bootstrap_values, vector_gae
from slamorl_jax.agent.losses import Batch, LossCoefficients, ppo_loss, scalarise_advantages
from slamorl_jax.agent.networks import ActorCritic, NetworkConfig, init_params
from slamorl_jax.env import NUM_FEATURES, adapt, preference_vector

GAMMA = 0.5
LAMBDA = 0.5

# T = 3 steps, K = 2 objectives. V(s_3) (after the rollout) is LAST_VALUE.
REWARDS = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32)
VALUES = np.array([[1.0, 0.0], [2.0, 1.0], [0.0, 2.0]], np.float32)
LAST_VALUE = np.array([4.0, 8.0], np.float32)
NEXT_VALUES = np.array([[2.0, 1.0], [0.0, 2.0], [4.0, 8.0]], np.float32)  # V(s_{t+1})
# V of each step's pre-reset observation; only the truncated step's row may be read.
FINAL_VALUES = np.array([[100.0, 100.0], [6.0, 2.0], [200.0, 200.0]], np.float32)
NO_END = np.zeros(3, bool)
ENDS_AT_1 = np.array([False, True, False])


def gae(
    terminated: np.ndarray, truncated: np.ndarray, bootstrap: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``vector_gae`` on the fixed rollout above with the given episode ends and bootstrap values."""
    advantages, targets = vector_gae(
        jnp.asarray(REWARDS),
        jnp.asarray(VALUES),
        jnp.asarray(bootstrap),
        jnp.asarray(terminated),
        jnp.asarray(truncated),
        GAMMA,
        LAMBDA,
    )
    return np.asarray(advantages), np.asarray(targets)


def test_gae_without_episode_end() -> None:
    # delta_t = r_t + 0.5 V(s_{t+1}) - V(s_t):  [1, 2.5], [1, 4], [7, 8]
    # A_2 = [7, 8];  A_1 = [1, 4] + 0.25 [7, 8] = [2.75, 6];  A_0 = [1, 2.5] + 0.25 [2.75, 6]
    advantages, targets = gae(NO_END, NO_END, NEXT_VALUES)
    expected = np.array([[1.6875, 4.0], [2.75, 6.0], [7.0, 8.0]], np.float32)
    np.testing.assert_array_equal(advantages, expected)
    np.testing.assert_array_equal(targets, expected + VALUES)


def test_gae_termination_does_not_bootstrap_and_stops_the_recursion() -> None:
    # Step 1 terminates: delta_1 = r_1 - V(s_1) = [1, 3] (the next row belongs to a new job), and
    # A_1 = delta_1 (A_2 is not carried back).  A_0 = [1, 2.5] + 0.25 [1, 3] = [1.25, 3.25].
    advantages, targets = gae(ENDS_AT_1, NO_END, NEXT_VALUES)
    expected = np.array([[1.25, 3.25], [1.0, 3.0], [7.0, 8.0]], np.float32)
    np.testing.assert_array_equal(advantages, expected)
    np.testing.assert_array_equal(targets, expected + VALUES)


def test_gae_truncation_bootstraps_from_the_final_observation_and_stops_the_recursion() -> None:
    # Step 1 is truncated: the bootstrap is V(final observation) = [6, 2], so
    # delta_1 = [3, 4] + 0.5 [6, 2] - [2, 1] = [4, 4] and A_1 = delta_1.  A_0 = [1, 2.5] + 0.25 [4, 4].
    bootstrap = bootstrap_values(
        jnp.asarray(VALUES), jnp.asarray(LAST_VALUE), jnp.asarray(FINAL_VALUES), jnp.asarray(ENDS_AT_1)
    )
    advantages, targets = gae(NO_END, ENDS_AT_1, np.asarray(bootstrap))
    expected = np.array([[2.0, 3.5], [4.0, 4.0], [7.0, 8.0]], np.float32)
    np.testing.assert_array_equal(advantages, expected)
    np.testing.assert_array_equal(targets, expected + VALUES)


def test_bootstrap_values_reads_final_values_only_where_truncated() -> None:
    no_truncation = bootstrap_values(
        jnp.asarray(VALUES), jnp.asarray(LAST_VALUE), jnp.asarray(FINAL_VALUES), jnp.asarray(NO_END)
    )
    np.testing.assert_array_equal(np.asarray(no_truncation), NEXT_VALUES)
    truncated_at_1 = bootstrap_values(
        jnp.asarray(VALUES), jnp.asarray(LAST_VALUE), jnp.asarray(FINAL_VALUES), jnp.asarray(ENDS_AT_1)
    )
    np.testing.assert_array_equal(
        np.asarray(truncated_at_1), np.array([[2.0, 1.0], [6.0, 2.0], [4.0, 8.0]], np.float32)
    )


def test_gae_monte_carlo_limit_with_three_objectives() -> None:
    # gamma = lambda = 1, T = 4, K = 3, a job terminating at step 1 and a new one running on: the targets
    # are undiscounted reward sums to the episode end, plus V(s_4) for the unfinished episode.
    rewards = np.arange(12, dtype=np.float32).reshape(4, 3)
    values = np.full((4, 3), 0.5, np.float32)
    last_value = np.array([10.0, 20.0, 30.0], np.float32)
    bootstrap = np.concatenate([values[1:], last_value[None]])
    terminated = np.array([False, True, False, False])
    advantages, targets = vector_gae(
        jnp.asarray(rewards),
        jnp.asarray(values),
        jnp.asarray(bootstrap),
        jnp.asarray(terminated),
        jnp.zeros(4, bool),
        1.0,
        1.0,
    )
    expected_targets = np.array(
        [
            [0 + 3, 1 + 4, 2 + 5],
            [3, 4, 5],
            [6 + 9 + 10, 7 + 10 + 20, 8 + 11 + 30],
            [9 + 10, 10 + 20, 11 + 30],
        ],
        np.float32,
    )
    np.testing.assert_allclose(np.asarray(targets), expected_targets, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(advantages), expected_targets - values, rtol=1e-6)


def test_gae_batched_over_jobs_equals_each_job_alone() -> None:
    # [T, N, K] with N = 3 jobs: no end, termination at 1, truncation at 1 (the three cases above).
    bootstrap_truncated = np.where(ENDS_AT_1[:, None], FINAL_VALUES, NEXT_VALUES)
    stack = np.stack
    advantages, _ = vector_gae(
        jnp.asarray(stack([REWARDS] * 3, axis=1)),
        jnp.asarray(stack([VALUES] * 3, axis=1)),
        jnp.asarray(stack([NEXT_VALUES, NEXT_VALUES, bootstrap_truncated], axis=1)),
        jnp.asarray(stack([NO_END, ENDS_AT_1, NO_END], axis=1)),
        jnp.asarray(stack([NO_END, NO_END, ENDS_AT_1], axis=1)),
        jnp.float32(GAMMA),
        jnp.float32(LAMBDA),
    )
    singles = [
        gae(NO_END, NO_END, NEXT_VALUES)[0],
        gae(ENDS_AT_1, NO_END, NEXT_VALUES)[0],
        gae(NO_END, ENDS_AT_1, bootstrap_truncated)[0],
    ]
    np.testing.assert_array_equal(np.asarray(advantages), stack(singles, axis=1))


# --- the PPO loss --------------------------------------------------------------------------------


def direct_apply(params: dict, obs: jax.Array, weights: jax.Array) -> tuple[jax.Array, jax.Array]:
    """A stand-in network whose outputs are its parameters, so gradients land on each sample's logits."""
    return params["logits"], params["values"]


def log_prob_of(logits: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """log pi(a | s) under ``logits``."""
    log_all = np.asarray(jax.nn.log_softmax(jnp.asarray(logits)))
    return log_all[np.arange(len(actions)), actions]


def make_batch(
    advantages: np.ndarray,
    weights: np.ndarray,
    actions: np.ndarray,
    log_probs: np.ndarray,
    values: np.ndarray | None = None,
    targets: np.ndarray | None = None,
    obs: np.ndarray | None = None,
) -> Batch:
    """A :class:`Batch` of B samples (unused fields zero)."""
    b, k = advantages.shape
    zeros = np.zeros((b, k), np.float32)
    return Batch(
        obs=jnp.asarray(np.zeros((b, NUM_FEATURES), np.float32) if obs is None else obs),
        weights=jnp.asarray(weights, jnp.float32),
        actions=jnp.asarray(actions, jnp.int32),
        log_probs=jnp.asarray(log_probs, jnp.float32),
        values=jnp.asarray(zeros if values is None else values),
        advantages=jnp.asarray(advantages, jnp.float32),
        targets=jnp.asarray(zeros if targets is None else targets),
    )


ADVANTAGES = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [-2.0, 0.0, 1.0], [0.5, -1.0, 2.0]], np.float32)
WEIGHTS = np.array([[0.5, 0.25, 0.25], [0.0, 1.0, 0.0], [0.2, 0.2, 0.6], [0.6, 0.2, 0.2]], np.float32)
# w . A per sample: 0.5 + 0.5 + 0.75, 5, -0.4 + 0.6, 0.3 - 0.2 + 0.4
SCALAR_ADVANTAGES = np.array([1.75, 5.0, 0.2, 0.5], np.float32)
ACTIONS = np.array([0, 3, 8, 4])


def test_scalarise_advantages_is_the_weighted_sum() -> None:
    raw = scalarise_advantages(jnp.asarray(ADVANTAGES), jnp.asarray(WEIGHTS), normalise=False)
    np.testing.assert_allclose(np.asarray(raw), SCALAR_ADVANTAGES, rtol=1e-6)
    two = scalarise_advantages(jnp.asarray(ADVANTAGES[:2]), jnp.asarray(WEIGHTS[:2]), normalise=True)
    # Two values 1.75 and 5: mean 3.375, std 1.625, so they normalise to -1 and +1.
    np.testing.assert_allclose(np.asarray(two), [-1.0, 1.0], rtol=1e-5)


@pytest.mark.parametrize("normalise", [False, True])
def test_loss_at_ratio_one_by_hand(normalise: bool) -> None:
    logits = np.zeros((4, 9), np.float32)  # uniform policy: entropy log 9
    values = np.array([[1.0, 0.0, 2.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0], [2.0, 2.0, 2.0]], np.float32)
    targets = np.array([[0.0, 0.0, 0.0], [1.0, 2.0, 3.0], [1.0, 1.0, 1.0], [2.0, 0.0, 2.0]], np.float32)
    batch = make_batch(ADVANTAGES, WEIGHTS, ACTIONS, log_prob_of(logits, ACTIONS), values, targets)
    coefs = LossCoefficients(clip_eps=0.2, value_coef=0.5, entropy_coef=0.01, value_clip_eps=0.0)
    params = {"logits": jnp.asarray(logits), "values": jnp.asarray(values)}
    loss, metrics = ppo_loss(params, direct_apply, batch, coefs, normalise)

    # Ratio 1 everywhere: the policy loss is minus the mean (normalised: zero-mean) advantage.
    policy_loss = 0.0 if normalise else -float(SCALAR_ADVANTAGES.mean())
    # 0.5 x mean over 4 x 3 squared errors: (1 + 4) + (1 + 4 + 9) + 0 + 4 = 23.
    value_loss = 0.5 * 23.0 / 12.0
    entropy = math.log(9.0)
    assert float(metrics["policy_loss"]) == pytest.approx(policy_loss, abs=1e-6)
    assert float(metrics["value_loss"]) == pytest.approx(value_loss, rel=1e-6)
    assert float(metrics["entropy"]) == pytest.approx(entropy, rel=1e-6)
    assert float(loss) == pytest.approx(policy_loss + 0.5 * value_loss - 0.01 * entropy, rel=1e-6, abs=1e-6)
    assert float(metrics["loss"]) == float(loss)
    assert float(metrics["approx_kl"]) == pytest.approx(0.0, abs=1e-7)
    assert float(metrics["clip_fraction"]) == 0.0


def test_vector_value_loss_is_half_the_mean_squared_error_over_objectives() -> None:
    rng = np.random.default_rng(0)
    values = rng.normal(size=(6, 3)).astype(np.float32)
    targets = rng.normal(size=(6, 3)).astype(np.float32)
    logits = np.zeros((6, 9), np.float32)
    actions = np.zeros(6, np.int64)
    batch = make_batch(
        np.zeros((6, 3), np.float32),
        np.full((6, 3), 1 / 3, np.float32),
        actions,
        log_prob_of(logits, actions),
        values=rng.normal(size=(6, 3)).astype(np.float32),  # behaviour values: unused without clipping
        targets=targets,
    )
    coefs = LossCoefficients(value_clip_eps=0.0)
    params = {"logits": jnp.asarray(logits), "values": jnp.asarray(values)}
    _, metrics = ppo_loss(params, direct_apply, batch, coefs)
    expected = 0.5 * np.mean((values.astype(np.float64) - targets) ** 2)
    assert float(metrics["value_loss"]) == pytest.approx(expected, rel=1e-6)
    # Each objective counts: moving one objective's prediction alone changes the loss.
    params["values"] = params["values"].at[:, 2].add(1.0)
    _, moved = ppo_loss(params, direct_apply, batch, coefs)
    assert float(moved["value_loss"]) != pytest.approx(expected, rel=1e-6)


def test_clipping_zeroes_the_policy_gradient_outside_the_trust_region() -> None:
    # Samples: ratio 1.5 with A > 0 (clipped), 1.5 with A < 0 (not), 0.5 with A < 0 (clipped),
    # 0.5 with A > 0 (not). Advantages are raw and only the time objective carries weight.
    logits = np.array(jax.random.normal(jax.random.key(0), (4, 9)), np.float32)
    actions = np.array([1, 2, 3, 4])
    ratios = np.array([1.5, 1.5, 0.5, 0.5], np.float32)
    scalar = np.array([2.0, -2.0, -1.0, 1.0], np.float32)
    advantages = np.stack([scalar, np.zeros(4), np.zeros(4)], axis=1).astype(np.float32)
    weights = np.tile(np.array([1.0, 0.0, 0.0], np.float32), (4, 1))
    behaviour = log_prob_of(logits, actions) - np.log(ratios)
    batch = make_batch(advantages, weights, actions, behaviour)
    coefs = LossCoefficients(clip_eps=0.2, value_coef=0.0, entropy_coef=0.0, value_clip_eps=0.0)
    params = {"logits": jnp.asarray(logits), "values": jnp.zeros((4, 3))}

    grad_fn = jax.grad(lambda p: ppo_loss(p, direct_apply, batch, coefs, False)[0])
    grads = np.asarray(grad_fn(params)["logits"])
    per_sample = np.abs(grads).sum(axis=1)
    assert per_sample[0] == 0.0 and per_sample[2] == 0.0
    assert per_sample[1] > 1e-3 and per_sample[3] > 1e-3

    _, metrics = ppo_loss(params, direct_apply, batch, coefs, False)
    assert float(metrics["clip_fraction"]) == 1.0
    # -mean(min(r A, clip(r) A)) = -(1.2 x 2 + 1.5 x -2 + 0.8 x -1 + 0.5 x 1) / 4
    assert float(metrics["policy_loss"]) == pytest.approx(-(2.4 - 3.0 - 0.8 + 0.5) / 4, rel=1e-5)


@pytest.fixture(scope="module")
def small_network() -> tuple[ActorCritic, dict]:
    """A real actor-critic (the weights enter the actor as input too)."""
    network = ActorCritic(NetworkConfig(hidden_sizes=(8,)))
    return network, init_params(network, jax.random.key(1), NUM_FEATURES)


def adaptive_batch(network: ActorCritic, params: dict, weights: jax.Array) -> Batch:
    """A batch of 16 samples with fixed data and the given weights (behaviour = current policy)."""
    keys = jax.random.split(jax.random.key(2), 6)
    obs = jax.random.uniform(keys[0], (16, NUM_FEATURES))
    actions = jax.random.randint(keys[1], (16,), 0, 9)
    logits, _ = network.apply(params, obs, weights)
    log_probs = jnp.take_along_axis(jax.nn.log_softmax(logits), actions[:, None], axis=1)[:, 0]
    return Batch(
        obs=obs,
        weights=weights,
        actions=actions,
        log_probs=log_probs + 0.1 * jax.random.normal(keys[2], (16,)),
        values=jax.random.normal(keys[3], (16, 3)),
        advantages=jax.random.normal(keys[4], (16, 3)),
        targets=jax.random.normal(keys[5], (16, 3)),
    )


def test_static_weights_when_adaptation_strength_is_zero(small_network: tuple[ActorCritic, dict]) -> None:
    network, params = small_network
    preference = jnp.asarray(preference_vector("time"))
    severities = jax.random.uniform(jax.random.key(3), (16, 6), minval=0.1, maxval=1.0)
    static = jnp.broadcast_to(preference, (16, 3))
    coefs = LossCoefficients()

    def loss_with(weights: jax.Array) -> float:
        return float(ppo_loss(params, network.apply, adaptive_batch(network, params, weights), coefs)[0])

    static_loss = loss_with(static)
    eta_zero = adapt(preference, severities, 0.0)
    np.testing.assert_allclose(np.asarray(eta_zero), np.asarray(static), rtol=1e-6)
    assert loss_with(eta_zero) == pytest.approx(static_loss, rel=1e-5, abs=1e-6)
    adapted = adapt(preference, severities, 1.5)
    assert float(jnp.max(jnp.abs(adapted - static))) > 1e-2
    assert abs(loss_with(adapted) - static_loss) > 1e-4

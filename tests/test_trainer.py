"""``make_train``: one compilation across chunks, determinism, scalar metrics, and that it learns."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from learner_fixtures import (
    TINY,
    Compiled,
    compile_trainer,
    shared_trainer,
    to_host,
    trees_equal,
    with_fixed_workload,
)

from slamorl_jax.agent.config import TrainConfig
from slamorl_jax.agent.schedule import learning_rate_after
from slamorl_jax.agent.trainer import EPISODE_SUMS, TrainState, make_train, summarise
from slamorl_jax.episodes import with_init_strategy

# 5-12 epochs per job, so a chunk of TINY finishes hundreds of episodes.
LEARNING_WORKLOAD = "movielens-ncf"
LEARNING_CHUNKS = 300
EARLY_CHUNKS = 10
LATE_CHUNKS = 50


@pytest.fixture(scope="module")
def compiled() -> Compiled:
    """TINY's jitted ``init`` and ``update_chunk`` (shared with the other learner test modules)."""
    return shared_trainer(TINY)


def avals(tree: object) -> list[tuple]:
    """Shape, dtype and weak type of every leaf: what decides whether jit retraces."""
    return [(t.shape, t.dtype, t.weak_type) for t in map(jax.typeof, jax.tree.leaves(tree))]


def test_update_chunk_traces_and_compiles_once(compiled: Compiled) -> None:
    trainer = compiled.trainer
    chex.clear_trace_counter()
    chunk = jax.jit(chex.assert_max_traces(trainer.update_chunk, n=1), donate_argnums=0)
    state = compiled.fresh()
    before = avals(state)
    # Traced env params may change between chunks (other init strategy, new arrays) without a retrace.
    variants = [
        compiled.env_params,
        with_init_strategy(compiled.env_params, "requested"),
        jax.tree.map(jnp.array, compiled.env_params),
    ]
    for env_params in variants:
        state, metrics = chunk(state, env_params)
    jax.block_until_ready(state)
    assert avals(state) == before  # no weak types or dtype drift in the carry
    assert chunk._cache_size() == 1
    assert int(state.update) == 3 * TINY.updates_per_chunk
    assert set(metrics) >= {"loss", "policy_loss", "value_loss", "entropy", *EPISODE_SUMS, "episodes"}


def test_same_seed_is_bitwise_reproducible_and_other_seeds_differ(compiled: Compiled) -> None:
    first, _ = compiled.run(compiled.fresh(), 2)
    rebuilt = compile_trainer(TINY)  # a separate make_train and init
    second, _ = rebuilt.run(rebuilt.fresh(), 2)
    assert trees_equal(first, second)
    other, _ = compiled.run(compiled.fresh(seed=1), 2)
    assert not trees_equal(first.params, other.params)
    assert int(other.update) == int(first.update) == 2 * TINY.updates_per_chunk


def test_a_rollouts_episode_sums_count_the_jobs_it_finished(compiled: Compiled) -> None:
    """Each env's figures add up in its own slot and are summed over the batch after the rollout."""
    _, traj, sums = jax.jit(compiled.trainer._rollout)(compiled.fresh(), compiled.env_params)
    finished = np.logical_or(np.asarray(traj["terminated"]), np.asarray(traj["truncated"]))
    assert all(np.shape(v) == () for v in sums.values())
    assert float(sums["episodes"]) == finished.sum() > 0
    assert 0 <= float(sums["all_slas_met"]) <= min(float(sums["deadline_met"]), float(sums["budget_met"]))
    assert float(sums["deadline_met"]) <= float(sums["episodes"])


def test_metrics_are_scalars_whatever_the_chunk_length(compiled: Compiled) -> None:
    _, history = compiled.run(compiled.fresh(), 1)
    assert all(np.shape(v) == () for v in history[0].values())
    summary = summarise(history[0])
    assert all(isinstance(v, float) and np.isfinite(v) for v in summary.values())
    assert summary["episodes"] > 0
    # Traced without compiling: a 500-update chunk returns the same scalars and state shapes.
    state = compiled.fresh()
    for updates in (TINY.updates_per_chunk, 500):
        trainer = make_train(dataclasses.replace(TINY, updates_per_chunk=updates))
        out_state, metrics = jax.eval_shape(trainer.update_chunk, state, compiled.env_params)
        assert all(m.shape == () for m in metrics.values())
        assert avals(out_state) == avals(state)


def mean_return(history: list[dict]) -> float:
    """Scalarised return per finished episode over a list of chunks' metrics."""
    episodes = sum(float(m["episodes"]) for m in history)
    return sum(float(m["return"]) for m in history) / episodes


def learning_curve(compiled: Compiled, seed: int) -> tuple[float, float, TrainState]:
    """Mean episode return over the first ``EARLY_CHUNKS`` and the last ``LATE_CHUNKS`` chunks."""
    env_params = with_fixed_workload(compiled.env_params, LEARNING_WORKLOAD)
    state = compiled.init(jax.random.key(seed), env_params)
    state, history = compiled.run(state, LEARNING_CHUNKS, env_params)
    return mean_return(history[:EARLY_CHUNKS]), mean_return(history[-LATE_CHUNKS:]), state


def test_learning_improves_the_scalarised_return(compiled: Compiled) -> None:
    # Deadline-critical jobs (time preference) of one workload starting from random allocations,
    # 153,600 env steps. Measured over seeds 0-5: the return rises by 0.32-0.62 (about -1.65 to
    # -1.15; seed 3: 0.52); with learning_rate=1e-9 it moves by -0.04 to +0.09.
    early, late, state = learning_curve(compiled, seed=3)
    assert late - early > 0.2, f"return {early:.3f} -> {late:.3f}"
    assert int(state.update) == LEARNING_CHUNKS * TINY.updates_per_chunk


def test_configs_are_validated_before_compiling() -> None:
    with pytest.raises(ValueError, match="num_minibatches"):
        make_train(dataclasses.replace(TINY, num_minibatches=3))
    with pytest.raises(ValueError, match="num_envs"):
        make_train(TrainConfig(num_envs=0))


def test_params_given_to_init_are_validated_on_the_host(compiled: Compiled) -> None:
    """A researcher's params with stale derived tables (a changed cluster without
    ``with_derived_tables``) trained silently on the old cluster's tables; ``init`` refuses them in
    one line, as ``run_episodes`` and ``recommend`` do. Traced params (``jit(update_chunk)``) are
    their caller's to check."""
    from slamorl_jax.env.params import with_values

    stale = with_values(compiled.trainer.env_params, gpus_per_node=8, max_nodes=2)
    with pytest.raises(ValueError, match=r"stale: call slamorl_jax\.env\.with_derived_tables"):
        compiled.trainer.init(jax.random.key(0), stale)


def test_the_end_of_job_sla_reward_is_configurable() -> None:
    """``--sla_met_bonus`` / ``--all_slas_bonus`` reach the env's params (0 and 0: the paper's
    reward); configs saved before the flags existed load with the env's defaults."""
    from slamorl_jax.agent.trainer import env_params_from_config
    from slamorl_jax.env.defaults import DEFAULT_ALL_SLAS_BONUS, DEFAULT_SLA_MET_BONUS

    params = env_params_from_config(dataclasses.replace(TINY, sla_met_bonus=0.0, all_slas_bonus=0.5))
    assert float(params.sla_met_bonus) == 0.0 and float(params.all_slas_bonus) == 0.5
    legacy = {k: v for k, v in dataclasses.asdict(TINY).items() if not k.endswith("bonus")}
    loaded = TrainConfig.from_dict(legacy)
    assert (loaded.sla_met_bonus, loaded.all_slas_bonus) == (DEFAULT_SLA_MET_BONUS, DEFAULT_ALL_SLAS_BONUS)


@pytest.mark.parametrize("target_head", [False, True])
def test_another_env_gets_a_plain_actor(target_head: bool) -> None:
    """The trainer on another env (the CartPole peer of the benchmarks) drops the actor's priors that
    read our observation's target block and suggestion flags, and sizes the heads to that env."""
    from benchmarks.cartpole_adapter import CartPoleForTrainer

    config = dataclasses.replace(TINY, target_head=target_head, suggestion_prior=True, actions="targets")
    assert config.network.suggestion_features or config.network.target_block
    network = make_train(config, CartPoleForTrainer()).network.config
    assert network.suggestion_features == () and network.target_block == ()
    assert network.num_actions == 2


def test_cartpole_as_wide_as_our_env_gets_our_network() -> None:
    """The benchmark's CartPole padded to our observation, actions and objectives builds exactly
    our actor-critic (priors included), steps with padded observations and a repeated reward."""
    from benchmarks.cartpole_adapter import CartPoleForTrainer
    from slamorl_jax.env import JobAllocationEnv

    config = dataclasses.replace(TINY, actions="targets")
    ours = make_train(config)
    wide = CartPoleForTrainer.as_wide_as(JobAllocationEnv(action_set="targets"))
    assert make_train(config, wide).network.config == ours.network.config
    obs, state = wide.reset(jax.random.key(0))
    obs, _, reward, *_ = wide.step(jax.random.key(1), state, jnp.int32(ours.network.config.num_actions - 1))
    assert obs.shape == (ours.obs_dim,) and not obs[4:].any()
    assert reward.shape == (3,) and jnp.all(reward == reward[0])


@pytest.mark.parametrize("gain", [0.0, 4.0])
def test_the_suggestion_prior_starts_at_its_gain(gain: float) -> None:
    """A fresh residual actor adds ``suggestion_gain_init`` to the suggested action's logit (its own
    head starts near zero), so the first policy puts about e^g / (e^g + 88) on it (89 actions);
    legacy configs, written before the head start, load with none."""
    from slamorl_jax.agent.networks import ActorCritic, init_params
    from slamorl_jax.env.action_sets import NUM_MOVES
    from slamorl_jax.env.observation import NUM_FEATURES

    config = dataclasses.replace(TINY, actions="targets", suggestion_gain_init=gain)
    network = ActorCritic(config.network)
    params = init_params(network, jax.random.key(3), NUM_FEATURES)
    obs = jax.random.uniform(jax.random.key(4), (64, NUM_FEATURES)) * 0.1
    flag_of = np.asarray(config.network.suggestion_features)  # per action, its flag feature or -1
    suggested = NUM_MOVES + 5  # target 5 is the forecast's first choice
    obs = obs.at[:, flag_of[flag_of >= 0]].set(0.0).at[:, flag_of[suggested]].set(1.0)
    logits, _ = network.apply(params, obs, jnp.full((64, 3), 1.0 / 3.0))
    others = np.delete(np.asarray(logits), suggested, axis=-1)
    np.testing.assert_allclose(np.asarray(logits[:, suggested]) - others.mean(-1), gain, atol=0.1)
    probability = np.asarray(jax.nn.softmax(logits))[:, suggested]
    rest = config.network.num_actions - 1
    np.testing.assert_allclose(probability, np.exp(gain) / (np.exp(gain) + rest), rtol=0.1)
    legacy = TrainConfig.from_dict(
        {k: v for k, v in dataclasses.asdict(config).items() if k != "suggestion_gain_init"}
    )
    assert legacy.suggestion_gain_init == 0.0


@pytest.mark.parametrize("slower", [1.0, 1.2, 1.5])
def test_the_relocate_prior_starts_at_its_gain_times_how_much_slower_the_epoch_was(slower: float) -> None:
    """With ``targets_relocate`` a fresh residual actor adds ``relocate_gain_init x tanh(2 log s)`` to
    relocate's logit after an epoch ``s`` times slower than forecast (nothing after one as fast or
    faster), and nothing to any other action; ``relocate_gain_init=0``, the other sets and configs
    written before the prior have none."""
    from slamorl_jax.agent.networks import ActorCritic, init_params
    from slamorl_jax.env.action_sets import RELOCATE_ACTION
    from slamorl_jax.env.observation import FEATURE_NAMES, NUM_FEATURES

    # (without the gate, which masks relocate after the faster epoch: test_the_relocation_gate_...)
    config = dataclasses.replace(
        TINY, actions="targets_relocate", relocate_gain_init=6.0, relocate_gate=0.0, relocate_payback=0.0
    )
    network = ActorCritic(config.network)
    params = init_params(network, jax.random.key(3), NUM_FEATURES)
    surprise = FEATURE_NAMES.index("surprise")
    base = jax.random.uniform(jax.random.key(4), (32, NUM_FEATURES)) * 0.1
    obs = jnp.stack([base, base])  # the same observations but for the surprise feature
    faster = 0.5 + 0.5 * np.tanh(2.0 * np.log(1.0 / (slower + 0.1)))  # an epoch faster: no bonus
    obs = obs.at[1, :, surprise].set(0.5 + 0.5 * np.tanh(2.0 * np.log(slower))).at[0, :, surprise].set(faster)
    logits, _ = network.apply(params, obs, jnp.full((2, 32, 3), 1.0 / 3.0))
    change = np.asarray(logits[1] - logits[0])
    expected = np.zeros(config.network.num_actions)
    expected[RELOCATE_ACTION] = 6.0 * np.tanh(2.0 * np.log(slower))
    # (the fresh head's small weights read the surprise feature too: a few thousandths)
    np.testing.assert_allclose(change, np.broadcast_to(expected, change.shape), atol=5e-3)
    assert not dataclasses.replace(config, relocate_gain_init=0.0).network.relocate_prior
    # With the shared target head, relocate's logit comes after the targets' (from the moves' head).
    shared = ActorCritic(dataclasses.replace(config, target_head=True).network)
    shared_params = init_params(shared, jax.random.key(5), NUM_FEATURES)
    head = shared_params["params"]["actor_moves"]
    head["bias"] = head["bias"].at[-1].set(1e3)
    assert np.all(
        np.argmax(np.asarray(shared.apply(shared_params, base, base[:, :3])[0]), -1) == RELOCATE_ACTION
    )
    assert not dataclasses.replace(config, actions="targets").network.relocate_prior
    legacy = TrainConfig.from_dict(
        {k: v for k, v in dataclasses.asdict(config).items() if k != "relocate_gain_init"}
    )
    assert legacy.relocate_gain_init == 0.0 and not legacy.network.relocate_prior


@pytest.mark.parametrize("slower", [0.8, 1.0, 1.1, 1.106, 1.3])
def test_the_relocation_gate_masks_relocate_unless_the_last_epoch_was_slower_than_its_gate(
    slower: float,
) -> None:
    """The default gate (log time 0.1: x 1.105) masks relocate after an epoch less than 1.105x slower
    than forecast, its probability exactly 0 and the loss's log-probabilities and entropy finite;
    past the gate, and everywhere for the other actions, the logits are the ungated network's (the
    same parameters). Configs saved before the gate read 0, no gate."""
    from slamorl_jax.agent.losses import Batch, LossCoefficients, ppo_loss
    from slamorl_jax.agent.networks import MASKED_LOGIT, ActorCritic, init_params, relocate_allowed
    from slamorl_jax.env.action_sets import RELOCATE_ACTION
    from slamorl_jax.env.defaults import DEFAULT_RELOCATE_GATE
    from slamorl_jax.env.observation import FEATURE_NAMES, NUM_FEATURES

    # The payback rule off, so the gate alone masks (test_relocation_payback.py tests the rule).
    gated = dataclasses.replace(
        TINY, actions="targets_relocate", relocate_gain_init=6.0, relocate_payback=0.0
    )
    assert gated.relocate_gate == DEFAULT_RELOCATE_GATE == 0.1
    ungated = dataclasses.replace(gated, relocate_gate=0.0)
    network, open_network = ActorCritic(gated.network), ActorCritic(ungated.network)
    params = init_params(network, jax.random.key(3), NUM_FEATURES)
    obs = jax.random.uniform(jax.random.key(4), (16, NUM_FEATURES))
    feature = 0.5 + 0.5 * np.tanh(2.0 * np.log(slower))
    obs = obs.at[:, FEATURE_NAMES.index("surprise")].set(feature)
    weights = jnp.full((16, 3), 1.0 / 3.0)
    logits = np.asarray(network.apply(params, obs, weights)[0])
    open_logits = np.asarray(open_network.apply(params, obs, weights)[0])
    others = np.arange(gated.network.num_actions) != RELOCATE_ACTION
    np.testing.assert_array_equal(logits[:, others], open_logits[:, others])
    opened = np.log(slower) >= 0.1
    assert bool(relocate_allowed(jnp.float32(feature), 0.1)) == opened
    if opened:
        np.testing.assert_array_equal(logits[:, RELOCATE_ACTION], open_logits[:, RELOCATE_ACTION])
    else:
        assert np.all(logits[:, RELOCATE_ACTION] == MASKED_LOGIT)
        assert np.all(np.asarray(jax.nn.softmax(logits))[:, RELOCATE_ACTION] == 0.0)
    # A PPO loss over such logits, and its gradient, stay finite.
    batch = Batch(
        obs=obs,
        weights=weights,
        actions=jnp.zeros(16, jnp.int32),
        log_probs=jax.nn.log_softmax(logits)[:, 0],
        values=jnp.zeros((16, 3)),
        advantages=jax.random.normal(jax.random.key(5), (16, 3)),
        targets=jnp.ones((16, 3)),
    )
    loss_fn = lambda p: ppo_loss(p, network.apply, batch, LossCoefficients())[0]  # noqa: E731
    loss, grads = jax.value_and_grad(loss_fn)(params)
    assert np.isfinite(float(loss))
    assert all(np.all(np.isfinite(np.asarray(g))) for g in jax.tree.leaves(grads))
    legacy = TrainConfig.from_dict(
        {k: v for k, v in dataclasses.asdict(gated).items() if k != "relocate_gate"}
    )
    assert legacy.relocate_gate == 0.0 and legacy.network == ungated.network


def test_the_paper_move_prior_flags_the_move_toward_the_forecasts_choice(
    batched_rollout: Callable[..., dict[str, np.ndarray]],
) -> None:
    """With ``--actions=paper --paper_suggestion_prior``, the actor's flags mark the paper move toward
    the candidate the observation's forecast ranks first (keep: the no-op), decoded from the
    observation alone, on real observations; the fresh actor starts with the suggestion gain on it."""
    from slamorl_jax.agent.networks import ActorCritic, init_params, move_toward_suggestion
    from slamorl_jax.env.actions import NO_OP_ACTION, move_toward
    from slamorl_jax.env.defaults import default_params
    from slamorl_jax.env.observation import FEATURE_NAMES, NUM_FEATURES

    config = dataclasses.replace(TINY, actions="paper", paper_suggestion_prior=True, suggestion_gain_init=3.0)
    network = config.network
    out = batched_rollout(8, default_params(), np.zeros(89, np.float32))
    live = ~(out["terminated"] | out["truncated"])  # the observation is of the same job as the allocation
    obs, gpus, cpus = out["obs"][live], out["gpus"][live], out["cpus"][live]
    flags = np.asarray(move_toward_suggestion(jnp.asarray(obs), network))
    assert flags.shape == (len(obs), 9) and np.all(flags.sum(-1) == 1.0)
    suggested = [
        FEATURE_NAMES.index(n) for n in ("keep_suggested", *(f"target{k}_suggested" for k in range(80)))
    ]
    choice = np.argmax(obs[:, suggested], axis=-1)
    targets = np.asarray(default_params().target_allocation)[np.maximum(choice - 1, 0)]
    expected = np.where(
        choice == 0, NO_OP_ACTION, np.asarray(move_toward(gpus, cpus, targets[:, 0], targets[:, 1]))
    )
    np.testing.assert_array_equal(np.argmax(flags, axis=-1), expected)
    assert len(set(expected.tolist())) > 2  # moves of several kinds were flagged
    net = ActorCritic(network)
    params = init_params(net, jax.random.key(0), NUM_FEATURES)
    logits, _ = net.apply(params, jnp.asarray(obs[:4]), jnp.full((4, 3), 1 / 3))
    boosted = np.take_along_axis(np.asarray(logits), expected[:4, None], axis=-1)[:, 0]
    assert np.all(boosted > np.max(np.where(flags[:4] > 0, -np.inf, np.asarray(logits)), axis=-1) + 2.0)
    # On by default for the paper's moves; configs saved before it existed load without it.
    assert TrainConfig(actions="paper").network.move_prior_flags
    assert not TrainConfig(actions="targets").network.move_prior_flags
    legacy = {k: v for k, v in dataclasses.asdict(config).items() if k != "paper_suggestion_prior"}
    assert not TrainConfig.from_dict(legacy).network.move_prior_flags


def test_per_env_minibatches_take_an_equal_share_of_every_env() -> None:
    """``--minibatch_shuffle=per_env``: every transition once per pass, each minibatch ``T / M`` steps
    of every env in that env's column, orders differing between envs and keys; a config where the
    minibatches do not divide the rollout is refused."""
    from slamorl_jax.agent.trainer import deal_per_env

    steps, envs, minibatches = 8, 5, 4
    step_index, env_index = np.meshgrid(np.arange(steps), np.arange(envs), indexing="ij")
    rows = jnp.asarray(np.stack([step_index, env_index], axis=-1), jnp.float32)
    dealt = np.asarray(deal_per_env(jax.random.key(0), rows, minibatches))
    assert dealt.shape == (minibatches, steps // minibatches, envs, 2)
    assert np.all(dealt[..., 1] == np.arange(envs))  # every env stays in its own column
    for env in range(envs):
        assert sorted(dealt[:, :, env, 0].ravel().tolist()) == list(range(steps))  # each step once
    orders = dealt[..., 0].reshape(steps, envs).T
    assert len({tuple(order) for order in orders}) > 1
    other = np.asarray(deal_per_env(jax.random.key(1), rows, minibatches))
    assert not np.array_equal(other, dealt)
    with pytest.raises(ValueError, match="per_env"):
        make_train(dataclasses.replace(TINY, minibatch_shuffle="per_env", num_minibatches=3, num_envs=24))


def test_each_action_set_has_its_own_minibatch_shuffle() -> None:
    """Unasked, ``targets`` deals per env and ``paper`` globally (the default command with
    ``--actions=paper`` is the same run as with ``--minibatch_shuffle=global``); an explicit choice
    wins; a config saved before the choice existed loads as global, and its JSON keeps the value."""
    assert TrainConfig().minibatch_shuffle == "per_env"
    assert TrainConfig(actions="paper") == TrainConfig(actions="paper", minibatch_shuffle="global")
    assert TrainConfig(actions="paper", minibatch_shuffle="per_env").minibatch_shuffle == "per_env"
    assert TrainConfig(actions="targets", minibatch_shuffle="global").minibatch_shuffle == "global"
    for actions in ("targets", "paper"):
        saved = json.loads(TrainConfig(actions=actions).to_json())
        assert TrainConfig.from_dict(saved) == TrainConfig(actions=actions)
        legacy = {k: v for k, v in saved.items() if k != "minibatch_shuffle"}
        assert TrainConfig.from_dict(legacy).minibatch_shuffle == "global"


@pytest.mark.parametrize("schedule", ["constant", "linear", "cosine"])
def test_the_logged_learning_rate_is_the_optimisers(schedule: str) -> None:
    """``learning_rate_after`` (what metrics.jsonl logs) is the rate of the optimiser's next step:
    the start's ``--learning_rate``, and 0 after the last update for the decaying schedules."""
    config = dataclasses.replace(TINY, lr_schedule=schedule, learning_rate=3e-3)
    assert learning_rate_after(config, 0) == pytest.approx(3e-3)
    middle = learning_rate_after(config, config.num_updates // 2)
    last = learning_rate_after(config, config.num_updates)
    if schedule == "constant":
        assert middle == last == pytest.approx(3e-3)
    else:
        assert 0.0 < middle < 3e-3 and last == 0.0


def test_init_and_updates_default_to_the_configs_env_params(compiled: Compiled) -> None:
    """DESIGN's ``init(key)`` / ``update(state)``: left out, the env parameters are the config's."""
    trainer = compiled.trainer
    assert trees_equal(trainer.env_params, compiled.env_params)
    key = jax.random.key(5)
    # Jitted (eager, each call compiled every operation): the config's params are then constants of
    # the one program and arguments of the other, which XLA may fold and round differently.
    implicit_state = to_host(jax.jit(trainer.init)(key))
    explicit_state = to_host(compiled.init(key, compiled.env_params))
    assert jax.tree.structure(implicit_state) == jax.tree.structure(explicit_state)
    for got, want in zip(jax.tree.leaves(implicit_state), jax.tree.leaves(explicit_state), strict=True):
        assert got.dtype == want.dtype
        if np.issubdtype(got.dtype, np.floating):
            np.testing.assert_allclose(got, want, rtol=1e-6)
        else:  # keys, counts, flags
            np.testing.assert_array_equal(got, want)
    state = compiled.fresh()
    implicit = jax.eval_shape(trainer.update_chunk, state)
    explicit = jax.eval_shape(trainer.update_chunk, state, compiled.env_params)
    assert jax.tree.structure(implicit) == jax.tree.structure(explicit)
    assert avals(implicit) == avals(explicit)

"""PPO on ``JobAllocationEnv`` in the PureJaxRL shape: pure ``init`` and a jitted chunk of updates.

``make_train(config)`` returns a :class:`Trainer`. ``trainer.init(key)`` builds the whole training
state (network, optimiser, a batch of running jobs); ``trainer.update_chunk(state)`` runs
``config.updates_per_chunk`` PPO updates under ``lax.scan`` and returns metrics already reduced to
scalars, so memory does not grow with training length. One update = a rollout of
``rollout_length`` steps of ``num_envs`` jobs, per-objective GAE, then ``update_epochs`` passes of
``num_minibatches`` gradient steps on the loss of ``losses.py``. Each also takes the env parameters as
an argument (traced, so one compilation serves any values of the same shapes); left out, they are
:attr:`Trainer.env_params`, the config's (``env_params_from_config``).

With a device mesh (``make_train(config, mesh=...)``, :mod:`slamorl_jax.sharding`) the env batch,
the rollout buffers and each minibatch's rows are split over the devices and the parameters
replicated; the program is the same global one, so the gradient is the mean over every env whatever
the device count. Without a mesh nothing is constrained (the single-device program).

Every job carries its own preference and SLA-adapted weights (the actor's input), so one run trains
one policy for all preferences.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Protocol

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct
from jax.sharding import Mesh

from slamorl_jax.agent.config import TrainConfig
from slamorl_jax.agent.config_checks import parse_preference, validate_config
from slamorl_jax.agent.gae import bootstrap_values, vector_gae
from slamorl_jax.agent.losses import Batch, LossCoefficients, ppo_loss
from slamorl_jax.agent.networks import ActorCritic, init_params
from slamorl_jax.agent.schedule import learning_rate_schedule
from slamorl_jax.env.batched_step import step_envs
from slamorl_jax.env.catalog import Catalog, catalog_from_flag, load_catalog
from slamorl_jax.env.draws import categorical_from_cdf, check_key
from slamorl_jax.env.job_env import JobAllocationEnv
from slamorl_jax.env.params import INIT_STRATEGIES, WEIGHT_MODES, EnvParams, with_values
from slamorl_jax.env.prices import with_prices
from slamorl_jax.env.scenarios import scenario_params, with_preference
from slamorl_jax.env.shifts import event_probs
from slamorl_jax.env.state import EnvState
from slamorl_jax.env.target_grid import with_target_grid
from slamorl_jax.env.validation import validate_params, validate_params_if_concrete
from slamorl_jax.sharding import check_divisible, constrain_batch

# Episode figures summed over finished jobs in a chunk (divided by "episodes" for reporting).
EPISODE_SUMS = (
    "return",
    "time_vs_request",
    "cost_vs_request",
    "deadline_met",
    "budget_met",
    "all_slas_met",
    "sla_compliance",
    "reallocations",
)


@struct.dataclass
class TrainState:
    """Everything a run needs to continue exactly: checkpointed whole for ``--resume``."""

    params: Any
    opt_state: Any
    env_state: EnvState
    obs: jax.Array  # [N, F]; its adaptive weights are ``env_state.weights``
    episode_returns: jax.Array  # [N, K] reward vector summed over the running episode
    key: jax.Array
    update: jax.Array  # int32 updates done


def config_catalog(config: TrainConfig) -> Catalog | None:
    """The catalogue ``config.catalog`` names (``load_catalog(path)``), or ``None`` for the shipped one.
    ``ValueError`` (``FileNotFoundError``, ``OSError``) for a file that cannot be read as one. A
    loaded policy and a resumed run read the copy their checkpoint carries instead
    (``checkpoint_catalog.stored_catalog``): the file may have moved or changed since."""
    return None if config.catalog is None else load_catalog(config.catalog)


def catalog_for_config(path: str, config: TrainConfig, flag: str = "--catalog") -> Catalog:
    """The catalogue a command's ``flag`` names at ``path`` (``catalog_from_flag``), after building
    ``config``'s env params on it and checking them (``validate_params``): every way the file fails
    is one ``ValueError`` line naming ``flag``, before the command writes or answers anything."""
    catalog = catalog_from_flag(path, flag)
    try:
        validate_params(env_params_from_config(config, catalog))
    except ValueError as err:
        raise ValueError(f"{flag}: {err}") from None
    return catalog


def env_params_from_config(config: TrainConfig, catalog: Catalog | None = None) -> EnvParams:
    """Environment parameters for the scenario, preference, initialisation, prices and target grid
    of ``config``, on ``catalog`` (default: the one ``config.catalog`` names, :func:`config_catalog`)."""
    catalog = catalog if catalog is not None else config_catalog(config)
    params = scenario_params(config.scenario, catalog)
    preference = None if config.preference is None else parse_preference(config.preference)
    params = with_preference(params, preference)
    params = with_prices(params, config.prices, catalog)
    if config.event_share is not None:
        params = with_values(params, shift_probs=event_probs(config.event_share))
    if config.reallocation_pause_s is not None:
        params = with_values(params, reallocation_pause_s=config.reallocation_pause_s)
    params = with_target_grid(params, config.target_cpus_per_gpu)
    return with_values(
        params,
        init_strategy=INIT_STRATEGIES.index(config.init_strategy),
        adapt_strength=config.adapt_strength,
        weights_mode=WEIGHT_MODES.index(config.weights),
        dual_step=config.dual_step,
        dual_decay=config.dual_decay,
        sla_met_bonus=config.sla_met_bonus,
        all_slas_bonus=config.all_slas_bonus,
        moves_leave_contention=config.moves_leave_contention,
    )


def make_optimizer(config: TrainConfig) -> optax.GradientTransformation:
    """Adam with global-norm gradient clipping and the configured learning-rate schedule
    (``schedule.learning_rate_schedule``)."""
    # A constant rate stays a float: optax keeps a step count in the state of a scheduled rate, and
    # constant-rate runs' optimiser states (their checkpoints) were saved without one.
    lr = learning_rate_schedule(config) if config.lr_schedule != "constant" else config.learning_rate
    return optax.chain(optax.clip_by_global_norm(config.max_grad_norm), optax.adam(lr, eps=1e-5))


class TrainableEnv(Protocol):
    """What the trainer needs of an env: :class:`JobAllocationEnv`, or another gymnax-style env
    through an adapter (the training benchmark runs CartPole so). ``step_batch`` and ``get_obs`` are
    used when the env has them."""

    num_actions: int
    reward_dim: int

    def observation_space(self, params: Any = None) -> Any:
        """A space whose ``shape[0]`` is the observation's width."""
        ...

    def reset(self, key: jax.Array, params: Any) -> tuple[jax.Array, Any]:
        """``(obs, state)`` of a fresh episode."""
        ...

    def step(self, key: jax.Array, state: Any, action: jax.Array, params: Any) -> tuple:
        """``(obs, state, reward vector, terminated, truncated, info)`` with auto-reset."""
        ...


@dataclasses.dataclass(frozen=True)
class Trainer:
    """The pure pieces of one training run (build with :func:`make_train`)."""

    config: TrainConfig
    env: TrainableEnv
    network: ActorCritic
    optimizer: optax.GradientTransformation
    mesh: Mesh | None = None  # env batch split over its one axis (slamorl_jax.sharding)
    # True: the values of truncated jobs' last observations are computed under a lax.cond, only on
    # steps that truncated a job (free on a CPU; on a GPU the predicate is copied to the host at
    # every rollout step). False: computed at every step. The same training either way (they are
    # read only where a job was truncated); benchmarks.train_throughput --also-branch-free times both.
    branch_on_truncation: bool = True

    @property
    def obs_dim(self) -> int:
        """Observation features of the environment."""
        return int(self.env.observation_space().shape[0])

    def apply(self, params: Any, obs: jax.Array, weights: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Actor logits and per-objective values."""
        return self.network.apply(params, obs, weights)

    def _final_observation(self, info: dict, env_params: EnvParams) -> jax.Array:
        """The pre-reset observations of a step's batch: observed from ``info["final_state"]`` when the
        env gives it (so they cost nothing unless needed), else ``info["final_observation"]``."""
        if "final_state" in info and hasattr(self.env, "get_obs"):
            return jax.vmap(self.env.get_obs, in_axes=(0, None))(info["final_state"], env_params)
        return info["final_observation"]

    def _step_envs(self, keys: jax.Array, env_state: Any, actions: jax.Array, env_params: EnvParams) -> tuple:
        """One step of every env: the env's ``step_batch`` (fresh jobs built only where one ended,
        ``env/batched_step.py``) when it has one, on each device's share of the batch when it is
        split over the mesh; else ``vmap(step)``."""
        return step_envs(self.env, keys, env_state, actions, env_params, mesh=self.mesh)

    def _split(self, tree: Any, axis: int = 0) -> Any:
        """``tree``'s env-batch axis split over the mesh (a no-op without one)."""
        return constrain_batch(tree, self.mesh, axis)

    @functools.cached_property
    def env_params(self) -> Any:
        """The env parameters :meth:`init` and the updates use when given none: the config's
        (:func:`env_params_from_config`) for this package's job env, an other env's own defaults (the
        training benchmark's CartPole), or ``None`` for an env that has none (it takes ``None``)."""
        if isinstance(self.env, JobAllocationEnv):
            return env_params_from_config(self.config, self.env.catalog)
        return getattr(self.env, "default_params", None)

    def _or_default(self, env_params: Any) -> Any:
        """The given env params, checked (``ValueError`` naming a bad field: stale derived tables,
        probabilities that do not sum to 1, ...; under ``jit``, by their caller), else the default."""
        if env_params is None:
            return self.env_params
        if isinstance(self.env, JobAllocationEnv) and isinstance(env_params, EnvParams):
            validate_params_if_concrete(env_params)
        return env_params

    def init(self, key: jax.Array, env_params: EnvParams | None = None) -> TrainState:
        """Fresh network, optimiser and ``num_envs`` running jobs from ``key`` (one JAX PRNG key), in
        ``env_params`` (default: :attr:`env_params`)."""
        check_key(key)
        env_params = self._or_default(env_params)
        key, net_key, env_key = jax.random.split(key, 3)
        params = init_params(self.network, net_key, self.obs_dim)
        env_keys = self._split(jax.random.split(env_key, self.config.num_envs))
        obs, env_state = self._split(jax.vmap(self.env.reset, in_axes=(0, None))(env_keys, env_params))
        return TrainState(
            params=params,
            opt_state=self.optimizer.init(params),
            env_state=env_state,
            obs=obs,
            episode_returns=self._split(jnp.zeros((self.config.num_envs, self.env.reward_dim), jnp.float32)),
            key=key,
            update=jnp.zeros((), jnp.int32),
        )

    # One update --------------------------------------------------------------------------------
    def _rollout(self, state: TrainState, env_params: EnvParams) -> tuple[TrainState, dict, dict]:
        """Collect ``rollout_length`` steps; return the new state, the transitions and episode sums."""
        c = self.config

        def step(carry: tuple, _: None) -> tuple:
            state, sums = carry
            key, act_key, env_key = jax.random.split(state.key, 3)
            logits, values = self.apply(state.params, state.obs, state.env_state.weights)
            actions, log_probs = sample_actions(act_key, logits)
            env_keys = self._split(jax.random.split(env_key, c.num_envs))
            obs, env_state, reward, terminated, truncated, info = self._split(
                self._step_envs(env_keys, state.env_state, actions, env_params)
            )
            done = jnp.logical_or(terminated, truncated)

            # Values of truncated episodes' last observations (for their bootstrap), computed (and
            # the pre-reset states observed, when the env offers them) only when some job in the
            # batch was truncated, unless branch_on_truncation is off.
            def truncated_values() -> jax.Array:
                final_obs = self._final_observation(info, env_params)
                return self.apply(state.params, final_obs, info["final_weights"])[1]

            if self.branch_on_truncation:
                final_values = jax.lax.cond(
                    jnp.any(truncated), truncated_values, lambda: jnp.zeros_like(values)
                )
            else:
                final_values = truncated_values()
            returns = state.episode_returns + reward
            sums = _add_episode_sums(sums, done, returns, info)
            shaping = c.gamma * potential(
                info["projected_remaining_time_s"],
                info["projected_remaining_cost_usd"],
                info["time_ref_s"],
                info["cost_ref_usd"],
            ) - env_potential(state.env_state)
            transition = {
                "obs": state.obs,
                "weights": state.env_state.weights,
                "actions": actions,
                "log_probs": log_probs,
                "values": values,
                "rewards": reward + c.shaping * shaping,
                "terminated": terminated,
                "truncated": truncated,
                "final_values": final_values,
            }
            new_state = state.replace(
                env_state=env_state,
                obs=obs,
                episode_returns=jnp.where(done[:, None], 0.0, returns),
                key=key,
            )
            return (new_state, sums), transition

        # Each env's figures add up in its own slot over the rollout, summed over the batch once after
        # it: a batch-wide sum at every step is a cross-device reduction per step on a mesh, and on a
        # GPU XLA can fuse a step's per-env work into a one-block reduction kernel (the env benchmark's
        # per-step reward sum did: benchmarks/results/step_profile_gpu.md).
        zero_sums = {
            name: self._split(jnp.zeros((c.num_envs,), jnp.float32)) for name in (*EPISODE_SUMS, "episodes")
        }
        (state, sums), traj = jax.lax.scan(step, (state, zero_sums), None, c.rollout_length)
        return state, traj, {name: jnp.sum(per_env) for name, per_env in sums.items()}

    def _learn(self, state: TrainState, traj: dict) -> tuple[TrainState, dict]:
        """Per-objective GAE, then the PPO epochs over shuffled minibatches."""
        c = self.config
        _, last_values = self.apply(state.params, state.obs, state.env_state.weights)
        bootstrap = bootstrap_values(traj["values"], last_values, traj["final_values"], traj["truncated"])
        advantages, targets = vector_gae(
            traj["rewards"],
            traj["values"],
            bootstrap,
            traj["terminated"],
            traj["truncated"],
            c.gamma,
            c.gae_lambda,
        )
        batch = Batch(
            obs=traj["obs"],
            weights=traj["weights"],
            actions=traj["actions"],
            log_probs=traj["log_probs"],
            values=traj["values"],
            advantages=advantages,
            targets=targets,
        )
        # per_env keeps the [steps, envs] axes (flattening them would gather a sharded env axis).
        lead = 2 if c.minibatch_shuffle == "per_env" else 1
        if lead == 1:
            batch = jax.tree.map(lambda x: x.reshape((c.batch_size, *x.shape[2:])), batch)
        coefs = LossCoefficients(c.clip_eps, c.value_coef, c.entropy_coef, c.value_clip_eps)
        grad_fn = jax.value_and_grad(ppo_loss, has_aux=True)

        def minibatch_step(carry: tuple, minibatch: Batch) -> tuple:
            params, opt_state = carry
            (_, metrics), grads = grad_fn(
                params, self.network.apply, minibatch, coefs, c.normalise_advantages
            )
            updates, opt_state = self.optimizer.update(grads, opt_state, params)
            return (optax.apply_updates(params, updates), opt_state), metrics

        # One packed float32 matrix, so each epoch's shuffle is a single row gather.
        packed, unpack = pack_rows(batch, lead)

        def deal(key: jax.Array) -> jax.Array:
            """The pass's minibatches: ``[M, rows per minibatch, F]`` (``global``) or ``[M, T / M,
            N, F]`` (``per_env``: each env's steps in its own random order, every minibatch taking
            ``T / M`` of them from every env; the env axis, and with it a sharded batch, stays put)."""
            if c.minibatch_shuffle == "per_env":
                return self._split(deal_per_env(key, packed, c.num_minibatches), axis=2)
            order = jax.random.permutation(key, c.batch_size)
            dealt = packed[order].reshape((c.num_minibatches, c.minibatch_size, packed.shape[1]))
            return self._split(dealt, axis=1)  # each gradient step data-parallel

        def epoch(carry: tuple, key: jax.Array) -> tuple:
            minibatches = deal(key)
            carry, metrics = jax.lax.scan(
                lambda cr, rows: minibatch_step(cr, unpack(rows)), carry, minibatches
            )
            return carry, jax.tree.map(jnp.mean, metrics)

        key, epoch_key = jax.random.split(state.key)
        (params, opt_state), metrics = jax.lax.scan(
            epoch, (state.params, state.opt_state), jax.random.split(epoch_key, c.update_epochs)
        )
        state = state.replace(params=params, opt_state=opt_state, key=key, update=state.update + 1)
        return state, jax.tree.map(jnp.mean, metrics)

    def update(self, state: TrainState, env_params: EnvParams | None = None) -> tuple[TrainState, dict]:
        """One PPO update: rollout, GAE, learning. Metrics are scalars (sums for episode figures)."""
        state, traj, sums = self._rollout(state, self._or_default(env_params))
        state, loss_metrics = self._learn(state, traj)
        return state, {**loss_metrics, **sums}

    def update_chunk(self, state: TrainState, env_params: EnvParams | None = None) -> tuple[TrainState, dict]:
        """``updates_per_chunk`` updates under ``lax.scan``; loss metrics averaged, episode sums added."""
        env_params = self._or_default(env_params)

        def body(state: TrainState, _: None) -> tuple:
            return self.update(state, env_params)

        state, metrics = jax.lax.scan(body, state, None, self.config.updates_per_chunk)
        reduced = {k: (v.sum() if k in (*EPISODE_SUMS, "episodes") else v.mean()) for k, v in metrics.items()}
        return state, reduced


POTENTIAL_FLOOR = -10.0


def potential(
    remaining_time_s: jax.Array, remaining_cost_usd: jax.Array, time_ref_s: jax.Array, cost_ref_usd: jax.Array
) -> jax.Array:
    """Shaping potential per objective: minus the projected remaining time and cost (0 for SLA).

    Potential-based shaping ``r + gamma * Phi(s') - Phi(s)`` leaves the optimal policies unchanged
    (Ng, Harada and Russell, ICML 1999) and credits a re-allocation at once with its effect on the
    projected completion, instead of spreading it over the rest of the job. ``Phi`` is 0 when the
    job has finished, and floored at ``POTENTIAL_FLOOR`` so one pathological epoch cannot dominate.
    """
    phi_time = jnp.maximum(-remaining_time_s / time_ref_s, POTENTIAL_FLOOR)
    phi_cost = jnp.maximum(-remaining_cost_usd / cost_ref_usd, POTENTIAL_FLOOR)
    return jnp.stack([phi_time, phi_cost, jnp.zeros_like(phi_time)], axis=-1)


def env_potential(env_state: EnvState) -> jax.Array:
    """:func:`potential` of a (batch of) environment state(s)."""
    job = env_state.job
    return potential(
        env_state.projected_remaining_time_s,
        env_state.projected_remaining_cost_usd,
        job.time_ref_s,
        job.cost_ref_usd,
    )


def deal_per_env(key: jax.Array, rows: jax.Array, minibatches: int) -> jax.Array:
    """``rows`` (``[steps, envs, F]``) dealt into ``[minibatches, steps / minibatches, envs, F]``:
    each env's steps in its own random order, minibatch ``m`` taking the ``m``-th share of every
    env's. Rows move along the step axis only, so an env-sharded batch stays on its device and the
    deal does not depend on how many devices hold it."""
    steps, envs, width = rows.shape
    order = jnp.argsort(jax.random.uniform(key, (steps, envs)), axis=0)
    dealt = jnp.take_along_axis(rows, order[..., None], axis=0)
    return dealt.reshape((minibatches, steps // minibatches, envs, width))


def pack_rows(tree: Any, lead: int = 1) -> tuple[jax.Array, Any]:
    """Pack a pytree of arrays with ``lead`` common leading axes (``[B, ...]``, or ``[T, N, ...]``
    with 2) into one float32 array ``[*lead axes, F]``, and its inverse (for any leading axes).

    Integer leaves (actions) travel as float32, exact below 2**24.
    """
    leaves, treedef = jax.tree.flatten(tree)
    widths = [int(np.prod(leaf.shape[lead:])) for leaf in leaves]
    packed = jnp.concatenate(
        [leaf.reshape((*leaf.shape[:lead], -1)).astype(jnp.float32) for leaf in leaves], axis=-1
    )

    def unpack(rows: jax.Array) -> Any:
        out, start = [], 0
        for leaf, width in zip(leaves, widths, strict=True):
            piece = rows[..., start : start + width].reshape(rows.shape[:-1] + leaf.shape[lead:])
            out.append(piece.astype(leaf.dtype))
            start += width
        return jax.tree.unflatten(treedef, out)

    return packed, unpack


def sample_actions(key: jax.Array, logits: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Sample one action per row of ``logits`` and return it with its log-probability.

    Inverse-CDF sampling with one uniform per row: the same distribution as
    ``jax.random.categorical`` (which draws a Gumbel per logit), with ``num_actions`` times fewer
    random numbers, which matters on CPU where the counter-based generator is a large cost.
    """
    log_probs = jax.nn.log_softmax(logits)
    cdf = jnp.cumsum(jnp.exp(log_probs), axis=-1)
    u = jax.random.uniform(key, (*logits.shape[:-1], 1), dtype=cdf.dtype)
    actions = categorical_from_cdf(u[..., 0], cdf)  # a masked (zero-probability) last action: never
    return actions, jnp.take_along_axis(log_probs, actions[..., None], axis=-1)[..., 0]


def _add_episode_sums(sums: dict, done: jax.Array, returns: jax.Array, info: dict) -> dict:
    """Add the figures of the jobs that finished this step to each env's running sums (``[envs]``)."""
    d = done.astype(jnp.float32)
    scalar_return = jnp.sum(returns * info["preference"], axis=-1)
    figures = {
        "return": scalar_return,
        "time_vs_request": info["episode_time_s"] / info["time_ref_s"],
        "cost_vs_request": info["episode_cost_usd"] / info["cost_ref_usd"],
        "deadline_met": info["deadline_met"].astype(jnp.float32),
        "budget_met": info["budget_met"].astype(jnp.float32),
        "all_slas_met": info["all_slas_met"].astype(jnp.float32),
        "sla_compliance": info["sla_compliance"],
        "reallocations": info["reallocations"].astype(jnp.float32),
    }
    new = {name: sums[name] + d * value for name, value in figures.items()}
    new["episodes"] = sums["episodes"] + d
    return new


def make_train(config: TrainConfig, env: TrainableEnv | None = None, mesh: Mesh | None = None) -> Trainer:
    """A validated :class:`Trainer` for ``config`` (raises ``ValueError`` on a bad config, or a
    ``num_envs`` that does not divide by ``mesh``'s device count).

    ``env`` defaults to :class:`JobAllocationEnv` with the config's action set; any env with the
    same functional API, info keys and ``num_actions``/``reward_dim``/``observation_space`` works
    (the training benchmark runs gymnax CartPole through an adapter).
    """
    validate_config(config)
    if mesh is not None:
        check_divisible(config.num_envs, mesh.size)
    env = env or JobAllocationEnv(action_set=config.actions, catalog=config_catalog(config))
    env_actions = getattr(env, "action_set", config.actions)
    if env_actions != config.actions:  # the checkpoints would record the config's action set
        raise ValueError(
            f"the env uses the {env_actions!r} action set but config.actions is {config.actions!r}; "
            "they must agree"
        )
    network_config = config.network
    if int(env.num_actions) != network_config.num_actions:  # another env (e.g. the CartPole peer)
        network_config = dataclasses.replace(
            network_config, target_block=(), suggestion_features=(), move_prior_flags=()
        )
    network_config = dataclasses.replace(
        network_config, num_actions=int(env.num_actions), num_objectives=int(env.reward_dim)
    )
    return Trainer(
        config=config,
        env=env,
        network=ActorCritic(network_config),
        optimizer=make_optimizer(config),
        mesh=mesh,
    )


def summarise(metrics: dict[str, Any]) -> dict[str, float]:
    """Host-side averages of a chunk's metrics (episode figures per finished episode; NaN when no
    episode finished in the chunk)."""
    out = {k: float(v) for k, v in metrics.items() if k not in EPISODE_SUMS}
    episodes = out.get("episodes", 0.0)
    for name in EPISODE_SUMS:
        out[name] = float(metrics[name]) / episodes if episodes > 0 else float("nan")
    return out

"""Flax actor-critic: the actor sees (observation, adaptive weights); the critic values each objective.

The actor maps the observation features and the current objective weights ``w_t`` to logits over
the actions; the critic maps the same input to one value per objective (a vector critic), so the
learner can scalarise advantages with whatever weights were in force at each step. Actor and critic
have separate trunks of the same shape.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "tanh": jnp.tanh,
    "relu": nn.relu,
    "gelu": nn.gelu,
    "silu": nn.silu,
    "elu": nn.elu,
}
INITIALIZERS = ("orthogonal", "lecun", "he", "glorot")


def kernel_init(name: str, scale: float) -> nn.initializers.Initializer:
    """A kernel initialiser by name; ``scale`` is the orthogonal gain or the variance scale."""
    if name == "orthogonal":
        return nn.initializers.orthogonal(scale)
    mode, distribution = {
        "lecun": ("fan_in", "truncated_normal"),
        "he": ("fan_in", "truncated_normal"),
        "glorot": ("fan_avg", "uniform"),
    }[name]
    variance = scale**2 * (2.0 if name == "he" else 1.0)
    return nn.initializers.variance_scaling(variance, mode, distribution)


@dataclasses.dataclass(frozen=True)
class NetworkConfig:
    """Shape of the actor-critic (every field is a CLI flag of ``slamorl_jax.train``)."""

    hidden_sizes: tuple[int, ...] = (64, 64)
    activation: str = "tanh"
    initializer: str = "orthogonal"
    num_actions: int = 9
    num_objectives: int = 3
    # Observation features the network reads (the first ones); None = all. Policies trained before
    # the forecast block read the paper's 21 features and still run on today's observation.
    obs_dim: int | None = None
    # (offset, targets K, features per target) of the observation's per-target block, when the
    # last K actions are those targets: the actor then scores every target with one shared head
    # (TargetScorer). Empty: a plain MLP actor.
    target_block: tuple[int, ...] = ()
    target_hidden: int = 8  # the shared target head's hidden units
    # One observation feature per action (-1: none) that flags the action the env's forecast ranks
    # first (``forecast.py``'s ``suggested`` flags): the actor adds a learned, state-dependent gain
    # times that flag to each action's logit. Empty: no such prior.
    suggestion_features: tuple[int, ...] = ()
    # The suggestion gain's starting value (its bias; the weights on the trunk start at 0): 0 starts
    # from no prior, a few units starts near following the forecast and learns where not to.
    suggestion_gain_init: float = 0.0
    # The paper's 9 moves: the same learned gain on the move toward the forecast's first choice
    # (``move_toward_suggestion``). The observation features of every candidate's ``suggested`` flag
    # (keep first, then the targets), each target's (GPUs, CPUs), and what the first two features
    # (allocated GPUs and CPUs) are divided by. Empty: no such prior.
    move_prior_flags: tuple[int, ...] = ()
    move_prior_targets: tuple[tuple[int, int], ...] = ()
    move_prior_scale: tuple[float, float] = (1.0, 1.0)
    # targets_relocate: (the relocate action, the observation's ``surprise`` feature): the residual
    # actor adds a second learned gain times how much slower the last epoch was than the job's model
    # forecast (``relocate_flag``) to relocate's logit. Empty: no such prior.
    relocate_prior: tuple[int, ...] = ()
    relocate_gain_init: float = 0.0
    # With the relocate prior: relocate is masked out (``MASKED_LOGIT``) unless the last epoch was
    # at least this much slower than the job's model forecast, in log units (``relocate_allowed``).
    # 0: never masked (runs saved before the gate existed).
    relocate_gate: float = 0.0
    # With the relocate prior: relocate is also masked unless a relocation is expected to save at
    # least this many pauses (``relocation_pays``; 0: never masked). It reads the observation's
    # ``pause_share`` and ``epochs_left`` features (``payback_features``, in that order) and the
    # contention chain's one-epoch autocorrelation ``contention_persistence``.
    relocate_payback: float = 0.0
    payback_features: tuple[int, ...] = ()
    contention_persistence: float = 0.0


class MLP(nn.Module):
    """Dense layers with one activation, then a linear head of ``out_size`` units."""

    hidden_sizes: Sequence[int]
    out_size: int
    activation: str
    initializer: str
    head_scale: float

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        """Apply the network to the last axis of ``x``."""
        act = ACTIVATIONS[self.activation]
        for size in self.hidden_sizes:
            x = act(dense(size, self.initializer, float(np.sqrt(2.0)))(x))
        return dense(self.out_size, self.initializer, self.head_scale)(x)


def dense(size: int, initializer: str, scale: float) -> nn.Dense:
    """A dense layer with the named kernel initialiser at ``scale``."""
    return nn.Dense(size, kernel_init=kernel_init(initializer, scale))


class TargetScorer(nn.Module):
    """Logits of the absolute targets: one small MLP shared by every target.

    Each target is scored from its own forecast features (``forecast.py``: projected time, cost
    and other SLAs if the job went there), a learned embedding of which target it is, and a context
    vector the actor's trunk computes from the whole observation and the weights. Sharing the head
    across targets builds in that targets with the same forecast are worth the same, which a plain
    MLP over all forecasts has to learn target by target. The first layer is applied to the three
    parts separately and summed (the same function as on their concatenation, without building it).
    """

    config: NetworkConfig
    embedding_size: int = 8

    @nn.compact
    def __call__(self, obs: jax.Array, trunk: jax.Array) -> jax.Array:
        """``[..., K]`` target logits from the observation and the trunk's last hidden layer."""
        c = self.config
        offset, num_targets, per_target = c.target_block
        block = obs[..., offset : offset + num_targets * per_target]
        features = block.reshape((*obs.shape[:-1], per_target, num_targets))  # field-major, [..., F, K]
        embedding = self.param(
            "target_embedding", nn.initializers.normal(1.0), (num_targets, self.embedding_size)
        )
        gain = float(np.sqrt(2.0))
        init = kernel_init(c.initializer, gain)
        w_features = self.param("feature_kernel", init, (per_target, c.target_hidden))
        w_embedding = self.param("embedding_kernel", init, (self.embedding_size, c.target_hidden))
        w_out = self.param("out_kernel", kernel_init(c.initializer, 0.01), (c.target_hidden, 1))
        hidden = (
            jnp.einsum("...fk,fh->...kh", features, w_features)  # each target's own forecasts
            + dense(c.target_hidden, c.initializer, gain)(trunk)[..., None, :]  # context, per sample
            + (embedding @ w_embedding)  # which target, [K, H]
        )
        return jnp.einsum("...kh,h->...k", ACTIVATIONS[c.activation](hidden), w_out[:, 0])


class Trunk(nn.Module):
    """Dense layers with one activation (an MLP without its head)."""

    hidden_sizes: Sequence[int]
    activation: str
    initializer: str

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        """The last hidden layer's activations."""
        for size in self.hidden_sizes:
            x = ACTIVATIONS[self.activation](dense(size, self.initializer, float(np.sqrt(2.0)))(x))
        return x


def move_toward_suggestion(obs: jax.Array, config: NetworkConfig) -> jax.Array:
    """``[..., 9]`` flags of the paper move toward the candidate the forecast ranks first: keep's
    flag on the no-op, a target's on the move toward it (``actions.move_toward``, each coordinate
    by the sign of its difference), from the allocation the observation's first two features give."""
    from slamorl_jax.env.actions import NO_OP_ACTION, NUM_ACTIONS, move_toward

    suggested = obs[..., np.asarray(config.move_prior_flags)]  # [..., 1 + K], keep first
    scale_gpus, scale_cpus = config.move_prior_scale
    gpus = jnp.round(obs[..., 0] * scale_gpus).astype(jnp.int32)
    cpus = jnp.round(obs[..., 1] * scale_cpus).astype(jnp.int32)
    targets = np.asarray(config.move_prior_targets, np.int32)  # [K, 2]
    moves = move_toward(gpus[..., None], cpus[..., None], targets[:, 0], targets[:, 1])  # [..., K]
    keep = jnp.full((*moves.shape[:-1], 1), NO_OP_ACTION, jnp.int32)
    one_hot = jax.nn.one_hot(jnp.concatenate([keep, moves], axis=-1), NUM_ACTIONS, dtype=suggested.dtype)
    return jnp.einsum("...k,...ka->...a", suggested, one_hot)


# The logit of a masked action: its probability underflows to exactly 0, while its log-probability
# and ``p * log p`` (the entropy's term) stay finite, which -inf would not keep through log_softmax.
MASKED_LOGIT = -1e9


def relocate_allowed(surprise_feature: jax.Array, gate: float) -> jax.Array:
    """Whether relocating is open after the last epoch (bool): that epoch ran at least ``exp(gate)``
    times the job's model forecast of it (the observation's ``surprise`` feature ``0.5 + 0.5
    tanh(2x)`` with ``x >= gate``). Fresh nodes meet contention as often as the old ones did, so a
    relocation pays only where the nodes slow the job; ``gate = 0`` opens it always."""
    return relocate_flag(surprise_feature) >= np.tanh(2.0 * gate)


def relocation_pays(obs: jax.Array, config: NetworkConfig) -> jax.Array:
    """Whether a relocation after the last epoch is expected to save at least
    ``config.relocate_payback`` pauses (bool; ``env.relocation_payback``): from the observation's
    ``surprise`` (how much slower the last epoch was than forecast), ``pause_share`` (the pause
    against the job's clean epoch) and ``epochs_left`` features, read back through their encodings
    (``forecast.py``), with contention's ``config.contention_persistence``. Where the pause is most
    of a short epoch a relocation away from contention cannot pay, however slow the last epoch was."""
    from slamorl_jax.env.forecast import EPOCHS_LEFT_SCALE
    from slamorl_jax.env.relocation_payback import relocation_payback

    _, surprise_index = config.relocate_prior
    pause_index, left_index = config.payback_features
    flag = jnp.clip(2.0 * obs[..., surprise_index] - 1.0, -1.0 + 1e-6, 1.0 - 1e-6)
    slowdown_log = 0.5 * jnp.arctanh(flag)  # the feature is 0.5 + 0.5 tanh(2x)
    pause_share = jnp.clip(obs[..., pause_index], 1e-6, 1.0 - 1e-6)  # pause / (pause + clean epoch)
    left_feature = jnp.clip(obs[..., left_index], 0.0, 1.0 - 1e-6)  # left / (left + scale)
    epochs_left = EPOCHS_LEFT_SCALE * left_feature / (1.0 - left_feature)
    payback = relocation_payback(
        slowdown_log, (1.0 - pause_share) / pause_share, epochs_left, config.contention_persistence
    )
    return payback >= config.relocate_payback


def relocate_flag(surprise_feature: jax.Array) -> jax.Array:
    """How much slower than forecast the last epoch was, from the observation's ``surprise`` feature
    ``0.5 + 0.5 tanh(2x)`` (``forecast.py``): ``max(tanh(2x), 0)``, 0 for an epoch as fast as
    forecast or faster, about 0.35 at 20 % slower, 0.6 at 40 %."""
    return jnp.maximum(2.0 * surprise_feature - 1.0, 0.0)


class SuggestionActor(nn.Module):
    """An MLP actor plus a learned gain on the forecast's suggested action (a residual policy).

    ``logits = head(trunk) + gain(trunk) * flags``, where ``flags[a]`` is the observation's flag of
    action ``a`` being the forecast's first choice (``NetworkConfig.suggestion_features``; with
    the paper's moves, the flag of the move toward it, ``move_toward_suggestion``). The
    gain starts at ``NetworkConfig.suggestion_gain_init`` and is learned with the rest: the policy
    follows the forecast where that pays and overrides it where it does not (a short job that cannot
    earn back the pause, a forecast still wrong early in a job). Following an argmax of 81 forecasts
    is one weight here, where a plain MLP has to learn the lookup target by target.

    With ``NetworkConfig.relocate_prior`` (``targets_relocate``) relocate's logit gets a second
    learned gain, starting at ``relocate_gain_init``, times :func:`relocate_flag`: the forecast
    never names relocating (it cannot tell slow nodes from a slow job), so without a head start a
    policy rarely tries it where it pays, after an epoch much slower than its model expected. With
    ``NetworkConfig.relocate_gate`` relocate is masked unless :func:`relocate_allowed`: without the
    gate a trained policy relocated after up to a third of the epochs of its longest jobs, where the
    pause is a small share of the epoch, mostly for nothing (README, "Relocation gate"). With
    ``NetworkConfig.relocate_payback`` it is masked too unless :func:`relocation_pays`: where a
    short epoch cannot earn back the pause (README, "Relocation payback").
    """

    config: NetworkConfig

    @nn.compact
    def __call__(self, obs: jax.Array, x: jax.Array) -> jax.Array:
        """Logits ``[..., num_actions]`` from the observation and the actor's input ``x``."""
        c = self.config
        trunk = Trunk(c.hidden_sizes, c.activation, c.initializer, name="trunk")(x)
        logits = dense(c.num_actions, c.initializer, 0.01)(trunk)
        gain = nn.Dense(
            1,
            kernel_init=nn.initializers.zeros,
            bias_init=nn.initializers.constant(c.suggestion_gain_init),
            name="suggestion_gain",
        )(trunk)
        if c.move_prior_flags:
            flags = move_toward_suggestion(obs, c)
        else:
            index = np.asarray(c.suggestion_features)
            flags = jnp.where(index >= 0, obs[..., np.maximum(index, 0)], 0.0)
        logits = logits + gain * flags
        if c.relocate_prior:
            action, feature = c.relocate_prior
            relocate_gain = nn.Dense(
                1,
                kernel_init=nn.initializers.zeros,
                bias_init=nn.initializers.constant(c.relocate_gain_init),
                name="relocate_gain",
            )(trunk)
            bonus = relocate_gain[..., 0] * relocate_flag(obs[..., feature])
            logits = logits.at[..., action].add(bonus)
            allowed = jnp.ones(logits.shape[:-1], bool)
            if c.relocate_gate > 0:
                allowed = relocate_allowed(obs[..., feature], c.relocate_gate)
            if c.relocate_payback > 0:
                allowed = jnp.logical_and(allowed, relocation_pays(obs, c))
            if c.relocate_gate > 0 or c.relocate_payback > 0:
                logits = logits.at[..., action].set(jnp.where(allowed, logits[..., action], MASKED_LOGIT))
        return logits


class ActorCritic(nn.Module):
    """Policy logits over the actions and a value per objective from (observation, weights)."""

    config: NetworkConfig

    @nn.compact
    def __call__(self, obs: jax.Array, weights: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Return ``(logits [..., num_actions], values [..., num_objectives])``."""
        c = self.config
        obs = obs if c.obs_dim is None else obs[..., : c.obs_dim]
        x = jnp.concatenate([obs, weights], axis=-1)
        if c.suggestion_features or c.move_prior_flags:
            logits = SuggestionActor(c, name="actor")(obs, x)
        elif c.target_block:
            trunk = Trunk(c.hidden_sizes, c.activation, c.initializer, name="actor_trunk")(x)
            from slamorl_jax.env.actions import NUM_ACTIONS as NUM_MOVES

            # The moves' logits and any action after the targets (relocate) from one dense head.
            others = nn.Dense(
                c.num_actions - c.target_block[1],
                kernel_init=kernel_init(c.initializer, 0.01),
                name="actor_moves",
            )(trunk)
            targets = TargetScorer(c, name="actor_targets")(obs, trunk)
            logits = jnp.concatenate([others[..., :NUM_MOVES], targets, others[..., NUM_MOVES:]], axis=-1)
        else:
            logits = MLP(c.hidden_sizes, c.num_actions, c.activation, c.initializer, 0.01, name="actor")(x)
        values = MLP(c.hidden_sizes, c.num_objectives, c.activation, c.initializer, 1.0, name="critic")(x)
        return logits, values


def init_params(network: ActorCritic, key: jax.Array, obs_dim: int) -> dict:
    """Fresh network parameters for observations of ``obs_dim`` features."""
    c = network.config
    return network.init(key, jnp.zeros((1, obs_dim)), jnp.full((1, c.num_objectives), 1.0 / c.num_objectives))

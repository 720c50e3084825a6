"""Pre-training a policy on logged decisions (behaviour cloning; the historical-learning start).

A platform that already allocates jobs (by hand, by a heuristic scheduler, by an oracle's records)
has a log of decisions: for each job after an epoch, what it reported and where it was moved next.
:func:`fit` trains the actor of an :class:`~slamorl_jax.agent.networks.ActorCritic` to choose those
decisions from the same observation and weights the policy acts on (``demonstrations.py`` builds
them), by minimising the cross-entropy of the logged actions under the actor's logits with Adam on
uniformly drawn minibatches. The critic is left as it was (a PPO run started from the result,
``train --init_from``, learns it with its first updates). A share of the demonstrations (whole rows,
drawn from the key) is held out, and the loss and accuracy (the greedy action equal to the logged
one) are reported on both parts before and after.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from slamorl_jax.agent.networks import ActorCritic

EVAL_CHUNK = 8192  # rows per evaluation call (bounds the activations' memory)


class Demonstrations(NamedTuple):
    """Decisions to imitate: observations ``[N, features]``, weights ``[N, 3]``, actions ``[N]``."""

    obs: jax.Array
    weights: jax.Array
    actions: jax.Array

    def __len__(self) -> int:
        return int(self.actions.shape[0])

    def rows(self, index: np.ndarray) -> Demonstrations:
        """The demonstrations at ``index`` (host-side indexing)."""
        return Demonstrations(*(np.asarray(x)[index] for x in self))


@dataclasses.dataclass(frozen=True)
class ImitationConfig:
    """How long and how fast to imitate (``python -m slamorl_jax.imitate --help``)."""

    steps: int = 2000
    batch_size: int = 256
    learning_rate: float = 1e-3
    max_grad_norm: float = 0.5
    holdout: float = 0.1  # share of the demonstrations held out to measure generalisation


def imitation_loss(params: Any, network: ActorCritic, batch: Demonstrations) -> tuple[jax.Array, jax.Array]:
    """Mean cross-entropy of the logged actions under the actor, and the greedy accuracy."""
    logits = network.apply(params, batch.obs, batch.weights)[0]
    log_probs = jax.nn.log_softmax(logits)
    chosen = jnp.take_along_axis(log_probs, batch.actions[:, None].astype(jnp.int32), axis=-1)[:, 0]
    accuracy = jnp.mean((jnp.argmax(logits, axis=-1) == batch.actions).astype(jnp.float32))
    return -jnp.mean(chosen), accuracy


# One compiled loss for every evaluation (the network is a static, hashable argument).
_jitted_loss = jax.jit(imitation_loss, static_argnums=1)


def split(demos: Demonstrations, holdout: float, key: jax.Array) -> tuple[Demonstrations, Demonstrations]:
    """``(train, held_out)``: a random ``holdout`` share of the rows held out (none when 0; at least
    one row stays for training)."""
    n = len(demos)
    order = np.asarray(jax.random.permutation(key, n))
    held = min(round(holdout * n), n - 1)
    return demos.rows(order[held:]), demos.rows(order[:held])


def evaluate(params: Any, network: ActorCritic, demos: Demonstrations) -> dict[str, float | None]:
    """Loss and accuracy over all of ``demos`` (``None`` when empty: JSON's null, where a NaN would
    print as a bare ``NaN`` that strict JSON readers refuse), in chunks."""
    n = len(demos)
    if n == 0:
        return {"loss": None, "accuracy": None}
    losses, hits = 0.0, 0.0
    for start in range(0, n, EVAL_CHUNK):
        chunk = demos.rows(np.arange(start, min(start + EVAL_CHUNK, n)))
        loss, accuracy = _jitted_loss(params, network, chunk)
        losses += float(loss) * len(chunk)
        hits += float(accuracy) * len(chunk)
    return {"loss": losses / n, "accuracy": hits / n}


def fit(
    network: ActorCritic, params: Any, demos: Demonstrations, config: ImitationConfig, key: jax.Array
) -> tuple[Any, dict[str, Any]]:
    """``params`` with the actor trained to imitate ``demos`` for ``config.steps`` Adam steps, and a
    report: rows used and held out, how many distinct actions they log (one: the result chooses it
    almost always), loss and accuracy on both before and after. ``ValueError`` for no
    demonstrations or an action the network does not have."""
    actions = np.asarray(demos.actions)
    if actions.size == 0:
        raise ValueError("no demonstrations to imitate")
    num_actions = network.config.num_actions
    if not np.all((actions >= 0) & (actions < num_actions)):
        bad = actions[(actions < 0) | (actions >= num_actions)][0]
        raise ValueError(f"demonstrated action {bad} is not one of the network's {num_actions} actions")
    split_key, train_key = jax.random.split(key)
    train, held = split(demos, config.holdout, split_key)
    before = {"train": evaluate(params, network, train), "held_out": evaluate(params, network, held)}
    optimizer = optax.chain(optax.clip_by_global_norm(config.max_grad_norm), optax.adam(config.learning_rate))
    data = Demonstrations(*(jnp.asarray(x) for x in train))
    size = len(train)

    @jax.jit
    def run(params: Any, key: jax.Array, data: Demonstrations) -> Any:
        # The demonstrations are an argument, not constants folded into the compiled program.
        def step(carry: tuple, step_key: jax.Array) -> tuple:
            params, opt_state = carry
            index = jax.random.randint(step_key, (config.batch_size,), 0, size)
            batch = Demonstrations(*(x[index] for x in data))
            grads, _ = jax.grad(imitation_loss, has_aux=True)(params, network, batch)
            updates, opt_state = optimizer.update(grads, opt_state, params)
            return (optax.apply_updates(params, updates), opt_state), None

        carry = (params, optimizer.init(params))
        (params, _), _ = jax.lax.scan(step, carry, jax.random.split(key, config.steps))
        return params

    params = run(params, train_key, data)
    after = {"train": evaluate(params, network, train), "held_out": evaluate(params, network, held)}
    report = {
        "rows": size,
        "held_out_rows": len(held),
        "distinct_actions": len(np.unique(actions)),
        "before": before,
        "after": after,
    }
    return params, report

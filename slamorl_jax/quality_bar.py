"""The quality bar: a policy against the jobs' requested static allocations on fresh jobs.

For each scenario kind, the greedy policy and the static request run the same fresh jobs with the
same noise (``episodes.run_episodes`` with one key), both starting at the request. The bar: the
policy does better on the kind's objective (time for ``deadline-critical``, cost for
``budget-constrained``, their mean for ``balanced``) and meets all six job-level SLAs more often.
``mixed``, the training default, is the mixture of the three kinds.
"""

from __future__ import annotations

import functools
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from slamorl_jax.agent.config import TrainConfig
from slamorl_jax.agent.decision import greedy_actions
from slamorl_jax.agent.trainer import Trainer
from slamorl_jax.env.scenarios import SCENARIO_KINDS, with_scenario
from slamorl_jax.episodes import (
    Policy,
    keep_allocation,
    run_episodes,
    summarise_episodes,
    with_init_strategy,
)
from slamorl_jax.markdown import markdown_table

Results = dict[str, dict[str, dict[str, float]]]


def evaluate_against_request(
    trainer: Trainer, params: Any, config: TrainConfig, num_episodes: int, seed: int
) -> Results:
    """Greedy policy vs the requested static allocation on fresh jobs of each scenario kind."""
    base = trainer.env_params  # the config's, on the run's catalogue
    greedy = greedy_policy(trainer.network)

    results: dict[str, dict[str, dict[str, float]]] = {}
    for name in SCENARIO_KINDS:
        env_params = with_init_strategy(with_scenario(base, name), "requested")
        key = jax.random.key(seed + 1)
        results[name] = {
            "policy": summarise_episodes(
                run_episodes(trainer.env, env_params, greedy, key, num_episodes, params)
            ),
            "requested_static": summarise_episodes(
                run_episodes(trainer.env, env_params, keep_allocation, key, num_episodes)
            ),
        }
    return results


def format_evaluation(results: Results) -> str:
    """A Markdown table of :func:`evaluate_against_request`'s results."""
    headers = ["scenario", "allocation", "time / request", "cost / request", "deadline met", "budget met"]
    return markdown_table(
        [*headers, "all SLAs met"],
        [
            [scenario, who, f"{r['time_vs_request']:.3f}", f"{r['cost_vs_request']:.3f}"]
            + [f"{r[key]:.1%}" for key in ("deadline_met", "budget_met", "all_slas_met")]
            for scenario, rows in results.items()
            for who, r in rows.items()
        ],
    )


def greedy_policy(network: nn.Module, hold_below: float = 0.0) -> Policy:
    """The argmax policy of ``network`` (holding where its top probability is below ``hold_below``:
    ``agent.decision.greedy_actions``): one function per network value (modules compare by their
    fields) and threshold, so the runner compiled for it serves every checkpoint of the same
    architecture (a ``--compare``d run, a warm start) with only the parameters changing."""
    return _greedy_policy(network, float(hold_below))


@functools.lru_cache(maxsize=8)
def _greedy_policy(network: nn.Module, hold_below: float) -> Policy:
    def greedy(params: Any, obs: jax.Array, weights: jax.Array, key: jax.Array) -> jax.Array:
        return greedy_actions(network.apply(params, obs, weights)[0], hold_below)

    return greedy


def greedy_policy_without(network: nn.Module, action: int, hold_below: float = 0.0) -> Policy:
    """:func:`greedy_policy` with ``action`` never taken: where the greedy policy (holding as it
    does) would take ``action``, the argmax over the other actions (an ablation: what the policy
    does where it would have taken ``action``); everywhere else the greedy policy's own choice. One
    function per (network, action, threshold), as :func:`greedy_policy`."""
    return _greedy_policy_without(network, int(action), float(hold_below))


@functools.lru_cache(maxsize=8)
def _greedy_policy_without(network: nn.Module, action: int, hold_below: float) -> Policy:
    def greedy(params: Any, obs: jax.Array, weights: jax.Array, key: jax.Array) -> jax.Array:
        logits = network.apply(params, obs, weights)[0]
        chosen = greedy_actions(logits, hold_below)
        other = greedy_actions(logits.at[..., action].set(-jnp.inf))
        return jnp.where(chosen == action, other, chosen)

    return greedy


def objective(scenario: str, figures: dict[str, float]) -> float:
    """The scenario kind's objective, lower is better: time, cost, or their mean (balanced)."""
    time, cost = figures["time_vs_request"], figures["cost_vs_request"]
    return {"deadline-critical": time, "budget-constrained": cost}.get(scenario, 0.5 * (time + cost))


def quality_bar(results: Results) -> dict[str, bool]:
    """Per scenario kind: better on its objective and all SLAs met more often than the request."""
    return {
        name: objective(name, rows["policy"]) < objective(name, rows["requested_static"])
        and rows["policy"]["all_slas_met"] > rows["requested_static"]["all_slas_met"]
        for name, rows in results.items()
    }

"""Where an env step's time goes: the full step against the same step with a smaller observation.

    python -m benchmarks.step_breakdown [--num-envs 4096] [--steps 256] [--repeats 5]
        [--out benchmarks/results/step_breakdown.json] [--overwrite]

Ten variants run in ``env_throughput``'s harness (reset, then ``lax.scan`` of the batched step with
random actions; compile time apart, warm-up, timed in turns): the env's own ``step`` (the paper's 21
features and the forecast block); the env's ``step_batch`` (the same step with new jobs built only
where one ended, ``env/batched_step.py``: what the trainer runs); the same transition and auto-reset
observed with the paper's 21 features only; the same with no observation at all (a zero vector); and
the full and the empty observation without the auto-reset (a finished job keeps stepping instead of
drawing the next one, as ``episodes.step_once`` steps evaluation's jobs), and the full one without
the auto-reset and without the forecast's ranking (every candidate's projections computed, the
reductions that pick the suggested one left out, its flags 0); ``step_batch`` without the ranking
(what the trainer's step would cost were the ranking free); ``step_batch`` with the cheapest ranking
there can be (one reduction over the candidates: the targets at the most SLAs, :func:`most_slas_only`,
what any ranking costs at the least); and, without the auto-reset, the
paper's features padded with their mean to the full observation's width (the observation's memory
traffic without the forecast's work). The differences are what the forecast
block, its ranking, the paper features and the auto-reset (a whole new job drawn for every env at
every step, kept where one finished) cost; gymnax CartPole-v1 in the same harness is the yardstick
of ``env_throughput``. It also reports the fraction of jobs that end per step (what sizes
``batched_step.RESET_SLOT_FRACTION``). Writes JSON and a Markdown table beside it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.common import format_rate, machine_info, parse_and_report, random_action_rollout
from benchmarks.env_throughput import PerEnvStep, measure_jax
from slamorl_jax.cli_args import OneLineArgumentParser, bounded, positive_int_list, run_command, summary
from slamorl_jax.env import JobAllocationEnv, forecast
from slamorl_jax.env import draws as d
from slamorl_jax.env.action_sets import NUM_TARGETS
from slamorl_jax.env.observation import NUM_FEATURES, observe, paper_features
from slamorl_jax.env.params import EnvParams
from slamorl_jax.env.state import EnvState
from slamorl_jax.markdown import markdown_table

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "step_breakdown.json"

Observe = Callable[[EnvState, EnvParams], jax.Array]


class ObservedWith:
    """The env's transition and auto-reset, observed with another function (a benchmark probe)."""

    def __init__(self, env: JobAllocationEnv, observe: Observe) -> None:
        self.env, self.observe = env, observe

    def reset(self, key: jax.Array, params: EnvParams) -> tuple[jax.Array, EnvState]:
        """A fresh job and its (reduced) observation."""
        state = self.env.reset_from_draws(d.uniforms(key, d.RESET_DRAWS), params)
        return self.observe(state, params), state

    def advance(self, key: jax.Array, state: EnvState, action: jax.Array, params: EnvParams) -> tuple:
        """The env's draws and transition: ``(reset draws, next state, reward, terminated, done, info)``."""
        u = d.uniforms(key, d.STEP_DRAWS + d.RESET_DRAWS)
        next_state, reward, terminated, info = self.env.transition(u[: d.STEP_DRAWS], state, action, params)
        done = jnp.logical_or(terminated, next_state.steps >= params.max_steps_in_episode)
        return u[d.STEP_DRAWS :], next_state, reward, terminated, done, info

    def step(self, key: jax.Array, state: EnvState, action: jax.Array, params: EnvParams) -> tuple:
        """``JobAllocationEnv.step`` with this observation (no ``final_observation``)."""
        u_reset, next_state, reward, terminated, done, info = self.advance(key, state, action, params)
        reset_state = self.env.reset_from_draws(u_reset, params)
        state_out = jax.tree.map(lambda r, s: jnp.where(done, r, s), reset_state, next_state)
        return self.observe(state_out, params), state_out, reward, terminated, done, info


class WithoutReset(ObservedWith):
    """The env's transition observed with another function, and no auto-reset."""

    def step(self, key: jax.Array, state: EnvState, action: jax.Array, params: EnvParams) -> tuple:
        """``JobAllocationEnv.step_env`` with this observation, the episode's end flagged only."""
        _, next_state, reward, terminated, done, info = self.advance(key, state, action, params)
        return self.observe(next_state, params), next_state, reward, terminated, done, info


def no_ranking(state: EnvState, params: EnvParams, *_: object) -> tuple[jax.Array, jax.Array]:
    """``forecast.suggestion`` with nothing ranked: no candidate flagged."""
    return jnp.zeros((), jnp.float32), jnp.zeros((NUM_TARGETS,), jnp.float32)


def observe_without_ranking(state: EnvState, params: EnvParams) -> jax.Array:
    """The full observation with the forecast's ranking left out (its flags 0): traced with
    ``forecast.suggestion`` swapped for :func:`no_ranking`, so the projections are computed as in
    the env and only the ranking's reductions are missing."""
    with mock.patch.object(forecast, "suggestion", no_ranking):
        return observe(state, params)


def most_slas_only(
    state: EnvState,
    params: EnvParams,
    keep: forecast.Projection,
    targets: forecast.Projection,
    duplicate: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """The cheapest ranking there can be, one reduction over the candidates: every target projected
    to meet the most SLAs flagged (keep alone where it meets more), no objective or tie-break."""
    slas = state.job.sla_targets
    target_slas = jnp.where(duplicate, -1.0, forecast.sla_count(targets, slas))
    most = jnp.max(target_slas, axis=0)
    keep_wins = forecast.sla_count(keep, slas) > most
    flags = jnp.logical_and(target_slas == most, jnp.logical_not(keep_wins))
    return keep_wins.astype(jnp.float32), flags.astype(jnp.float32)


class RankedWithBatch:
    """The env's ``step_batch`` (the trainer's step, auto-reset included) and reset, traced with
    another function in place of ``forecast.suggestion`` (the forecast's ranking)."""

    def __init__(self, env: JobAllocationEnv, suggestion: Callable[..., tuple[jax.Array, jax.Array]]) -> None:
        self.env, self.suggestion, self.num_actions = env, suggestion, env.num_actions

    def reset(self, key: jax.Array, params: EnvParams) -> tuple[jax.Array, EnvState]:
        """The env's reset, its observation ranked by this suggestion."""
        with mock.patch.object(forecast, "suggestion", self.suggestion):
            return self.env.reset(key, params)

    def step_batch(
        self,
        keys: jax.Array,
        state: EnvState,
        action: jax.Array,
        params: EnvParams,
        reset_slots: int | None = None,
    ) -> tuple:
        """The env's ``step_batch``, its observations ranked by this suggestion."""
        with mock.patch.object(forecast, "suggestion", self.suggestion):
            return self.env.step_batch(keys, state, action, params, reset_slots)


class WithoutRankingBatch(RankedWithBatch):
    """The trainer's step with the forecast's ranking left out (:func:`no_ranking`): what it would
    cost were the ranking free."""

    def __init__(self, env: JobAllocationEnv) -> None:
        super().__init__(env, no_ranking)


def paper_features_full_width(state: EnvState, params: EnvParams) -> jax.Array:
    """The paper's features, then their mean repeated to the full observation's width: the
    observation's memory traffic (one ``[envs, observation size]`` array written per step) without
    the forecast's work."""
    features = paper_features(state, params)
    filler = jnp.broadcast_to(jnp.mean(features), (NUM_FEATURES - features.shape[0],))
    return jnp.concatenate([features, filler])


def no_observation(state: EnvState, params: EnvParams) -> jax.Array:
    """A one-feature zero observation."""
    return jnp.zeros((1,), jnp.float32)


ENDED_STEPS = 300  # steps of the jobs-ended statistic
SYNCHRONISED_STEPS = 20  # its first steps, whose jobs started together


def jobs_ended_per_step(env: JobAllocationEnv, params: EnvParams, num_envs: int) -> dict[str, float]:
    """The fraction of ``num_envs`` jobs that end per step under random actions (what sizes
    ``batched_step.RESET_SLOT_FRACTION``): its largest value over the first ``SYNCHRONISED_STEPS``
    steps, then its mean and largest value over the rest of ``ENDED_STEPS``."""
    ended = np.asarray(random_action_rollout(env, params, num_envs, ENDED_STEPS, jax.random.key(0))[1])
    later = ended[SYNCHRONISED_STEPS:]
    return {
        "first_steps_max": float(ended[:SYNCHRONISED_STEPS].max()),
        "later_mean": float(later.mean()),
        "later_max": float(later.max()),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Time every variant and CartPole at each ``--num-envs``; a JSON-ready payload."""
    env = JobAllocationEnv()
    params = env.default_params
    import gymnax  # here: it computes arrays on import, after the backend check

    cartpole, cartpole_params = gymnax.make("CartPole-v1")
    variants = {
        "CartPole-v1": (cartpole, cartpole_params, 2),
        "full observation": (PerEnvStep(env), params, env.num_actions),
        "full observation, step_batch": (env, params, env.num_actions),
        "paper features only": (ObservedWith(env, paper_features), params, env.num_actions),
        "no observation": (ObservedWith(env, no_observation), params, env.num_actions),
        "full observation, no reset": (WithoutReset(env, observe), params, env.num_actions),
        "no ranking, no reset": (WithoutReset(env, observe_without_ranking), params, env.num_actions),
        "no ranking, step_batch": (WithoutRankingBatch(env), params, env.num_actions),
        "one-pass ranking, step_batch": (RankedWithBatch(env, most_slas_only), params, env.num_actions),
        "paper features at full width, no reset": (
            WithoutReset(env, paper_features_full_width),
            params,
            env.num_actions,
        ),
        "no observation, no reset": (WithoutReset(env, no_observation), params, env.num_actions),
    }
    rows = [measure_jax(variants, n, args.steps, args.repeats) for n in args.num_envs]
    for row in rows:
        row["jobs_ended_per_step"] = jobs_ended_per_step(env, params, row["num_envs"])
    return {"rows": rows, "variants": list(variants), "machine": machine_info()}


def to_markdown(payload: dict[str, Any]) -> str:
    """One row per ``num_envs``: median steps/s of each variant and its ratio to CartPole."""
    names = payload["variants"]
    headers = ["num_envs", "steps", *(f"{n} steps/s" for n in names), *(f"{n} / CartPole" for n in names[1:])]
    lines = []
    for row in payload["rows"]:
        rates = [row[n]["steps_per_s_median"] for n in names]
        lines.append(
            [
                row["num_envs"],
                row["steps"],
                *(format_rate(r) for r in rates),
                *(f"{r / rates[0]:.2f}x" for r in rates[1:]),
            ]
        )
    ended = [
        f"{row['num_envs']} envs: {e['later_mean']:.1%} on average after the first "
        f"{SYNCHRONISED_STEPS} steps ({e['later_max']:.1%} at most), {e['first_steps_max']:.1%} at most "
        "in them"
        for row in payload["rows"]
        if (e := row.get("jobs_ended_per_step"))
    ]
    note = f"\n\nJobs ended per step (`step_batch`, random actions, {ENDED_STEPS} steps): " + "; ".join(ended)
    return markdown_table(headers, lines) + (note if ended else "") + f"\n\nMachine: {payload['machine']}\n"


def main(argv: list[str] | None = None) -> None:
    """Parse flags, run, write the JSON and Markdown."""
    parser = OneLineArgumentParser(prog="python -m benchmarks.step_breakdown", description=summary(__doc__))
    parser.add_argument(
        "--num-envs", type=positive_int_list, default=[4096], help="batch sizes (default: 4096)"
    )
    parser.add_argument("--steps", type=bounded(int, 1, 100_000), default=256, help="scan steps per call")
    parser.add_argument("--repeats", type=bounded(int, 1, 1000), default=5, help="timed calls per variant")
    parse_and_report(parser, argv, DEFAULT_OUT, run, to_markdown)


if __name__ == "__main__":
    run_command(main, "python -m benchmarks.step_breakdown")

"""One row of the scaling benchmark, in its own process (the device count is fixed when JAX starts).

    python -m benchmarks.scaling_worker --kind env|train --num-envs N [--steps S] [--repeats R]

Measures, over every device this process sees (1-D mesh, env batch split, as training runs):

* ``env``: one jitted call resets ``N`` envs and scans ``S`` random-action steps (the harness of
  ``env_throughput.py``, with the env batch constrained to the mesh), stepped as the trainer steps
  them (``batched_step.step_envs``: ``step_batch`` on each device's share); env steps/s.
* ``train``: one jitted chunk of ``updates_per_chunk`` PPO updates of the default learner at
  ``num_envs = N`` (``slamorl_jax.learner_jit``); env steps/s of training.

Compile time apart, one warm-up call, ``R`` timed calls ending in ``block_until_ready``. Peak memory:
the device's ``peak_bytes_in_use`` on an accelerator, else the process's peak resident set (which
includes JAX itself, about 0.3-0.5 GB). Prints one JSON object.
"""

from __future__ import annotations

import dataclasses
import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jax
import jax.numpy as jnp

from benchmarks.env_throughput import add_rewards, default_steps
from benchmarks.timing import Timing, time_call
from slamorl_jax.agent.config import TrainConfig
from slamorl_jax.agent.trainer import env_params_from_config, make_train
from slamorl_jax.cli_args import OneLineArgumentParser, bounded, run_command, summary
from slamorl_jax.env import JobAllocationEnv, scenario_params
from slamorl_jax.env.batched_step import step_envs
from slamorl_jax.env.scenarios import SCENARIOS
from slamorl_jax.learner_jit import jit_learner, replicate
from slamorl_jax.sharding import constrain_batch, env_mesh


def sharded_rollout(
    env: JobAllocationEnv, mesh: jax.sharding.Mesh, num_envs: int, num_steps: int, per_env_step: bool = False
) -> Any:
    """``rollout(key, params)``: reset ``num_envs`` envs split over ``mesh``, scan random steps, each
    a step of the batch as the trainer takes it (``step_envs`` with the mesh), or ``vmap(env.step)``
    over the whole batch with ``per_env_step``."""

    def step(keys: jax.Array, state: Any, actions: jax.Array, params: Any) -> tuple:
        if per_env_step:
            return jax.vmap(env.step, in_axes=(0, 0, 0, None))(keys, state, actions, params)
        return step_envs(env, keys, state, actions, params, mesh=mesh)

    def rollout(key: jax.Array, params: Any) -> tuple[jax.Array, jax.Array]:
        reset_key, run_key = jax.random.split(key)
        keys = constrain_batch(jax.random.split(reset_key, num_envs), mesh)
        obs, state = constrain_batch(jax.vmap(env.reset, in_axes=(0, None))(keys, params), mesh)

        def body(carry: tuple, key: jax.Array) -> tuple[tuple, None]:
            obs, state, total = carry
            action_key, step_key = jax.random.split(key)
            actions = constrain_batch(jax.random.randint(action_key, (num_envs,), 0, env.num_actions), mesh)
            keys = constrain_batch(jax.random.split(step_key, num_envs), mesh)
            obs, state, reward, _, _, _ = constrain_batch(step(keys, state, actions, params), mesh)
            return (obs, state, add_rewards(total, reward)), None

        carry = (obs, state, constrain_batch(jnp.zeros((num_envs,), jnp.float32), mesh))
        (obs, _, total), _ = jax.lax.scan(body, carry, jax.random.split(run_key, num_steps))
        return obs, jnp.sum(total)

    return rollout


def compile_and_time(fn: Any, args: tuple, work: float, repeats: int, **jit_kwargs: Any) -> Timing:
    """Compile ``fn`` (timed apart), warm it up once, time ``repeats`` calls."""
    start = time.perf_counter()
    compiled = jax.jit(fn, **jit_kwargs).lower(*args).compile()
    timing = Timing(work=work, compile_s=time.perf_counter() - start)
    jax.block_until_ready(compiled(*args))
    for _ in range(repeats):
        timing.run_s.append(time_call(compiled, *args))
    return timing


def measure_env(num_envs: int, steps: int, repeats: int, scenario: str) -> Timing:
    """Env-only steps/s over the mesh."""
    mesh = env_mesh()
    env = JobAllocationEnv()
    rollout = sharded_rollout(env, mesh, num_envs, steps)
    args = replicate((jax.random.key(0), scenario_params(scenario)), mesh)
    return compile_and_time(rollout, args, num_envs * steps, repeats)


def measure_train(num_envs: int, repeats: int, updates_per_chunk: int) -> Timing:
    """Training env steps/s of the default learner over the mesh (one chunk per timed call)."""
    config = dataclasses.replace(TrainConfig(), num_envs=num_envs, updates_per_chunk=updates_per_chunk)
    trainer = make_train(config, mesh=env_mesh())
    learner = jit_learner(trainer, env_params_from_config(config))
    env_params = learner.place(env_params_from_config(config))
    state = learner.init(learner.place(jax.random.key(0)), env_params)
    start = time.perf_counter()
    compiled = learner.chunk.lower(state, env_params).compile()
    timing = Timing(work=config.batch_size * updates_per_chunk, compile_s=time.perf_counter() - start)
    state, metrics = compiled(state, env_params)  # warm-up
    jax.block_until_ready(metrics)
    for _ in range(repeats):
        tick = time.perf_counter()
        state, metrics = compiled(state, env_params)  # the state is donated: keep the new one
        jax.block_until_ready((state, metrics))
        timing.run_s.append(time.perf_counter() - tick)
    return timing


def peak_memory_bytes() -> dict[str, int | None]:
    """Peak device memory (accelerators) and the process's peak resident set."""
    device = jax.devices()[0]
    stats = device.memory_stats() if device.platform != "cpu" else None
    peak = int(stats["peak_bytes_in_use"]) if stats and "peak_bytes_in_use" in stats else None
    return {
        "device_peak_bytes": peak,
        "host_peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }


def main() -> None:
    """Parse the arguments, measure, print one JSON object."""
    parser = OneLineArgumentParser(prog="python -m benchmarks.scaling_worker", description=summary(__doc__))
    parser.add_argument("--kind", choices=("env", "train"), required=True, help="env-only steps or training")
    parser.add_argument("--num-envs", type=bounded(int, 1, 1 << 24), required=True, help="envs in parallel")
    parser.add_argument(
        "--steps", type=bounded(int, 1, 1 << 30), default=None, help="default: about 2**20 env steps per call"
    )
    parser.add_argument("--repeats", type=bounded(int, 1, 1000), default=3, help="timed calls")
    parser.add_argument(
        "--updates-per-chunk", type=bounded(int, 1, 10_000), default=1, help="PPO updates per call"
    )
    parser.add_argument("--scenario", choices=SCENARIOS, default="mixed", help="the jobs' scenario")
    args = parser.parse_args()
    if args.kind == "env":
        steps = args.steps or default_steps(args.num_envs)
        timing = measure_env(args.num_envs, steps, args.repeats, args.scenario)
    else:
        timing = measure_train(args.num_envs, args.repeats, args.updates_per_chunk)
    devices = jax.devices()
    record = {
        "kind": args.kind,
        "num_envs": args.num_envs,
        "devices": len(devices),
        "device_kind": str(getattr(devices[0], "device_kind", devices[0].platform)),
        **timing.as_dict(),
        **peak_memory_bytes(),
    }
    print(json.dumps(record), flush=True)


if __name__ == "__main__":
    run_command(main, "python -m benchmarks.scaling_worker")

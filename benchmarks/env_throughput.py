"""Environment steps per second: our env vs gymnax CartPole-v1 in one harness, and the Python job loop.

    python -m benchmarks.env_throughput [--num-envs 1,64,4096,65536,262144] [--steps N]
        [--repeats 5] [--python-seconds 2] [--scenario mixed] [--also-reset-by scatter,select]
        [--also-branch-free] [--out benchmarks/results/env_throughput.json] [--overwrite]

Harness (identical for both JAX envs): one jitted function resets ``num_envs`` envs (``vmap``) and
``lax.scan``s ``steps`` steps of the env's batched step with actions from ``jax.random.randint`` and
per-env keys from ``jax.random.split``. The batched step is ``env.step_batch`` where the env has one
(ours: the trainer's step, which builds new jobs only where one ended, ``env/batched_step.py``) and
``vmap(env.step)`` otherwise (CartPole); ours is also timed through ``vmap(env.step)`` (the gymnax
API, a new job drawn for every env at every step and kept where one ended), reported apart;
observations, states and the summed reward are carried, so nothing but unused ``info`` entries can
be dropped by the compiler (as in a training loop). ``--also-reset-by`` adds our batched step with
the other reset (``batched_step.RESET_BY``) and ``--also-branch-free`` our env with no ``lax.cond``
when it builds new jobs (``JobAllocationEnv.branch_on_init_strategy``), each a column of its own.
Compile time is timed apart, each function is warmed up once, and the envs are timed in turns per
``num_envs``. The plain-Python single job
(``slamorl_jax.env.python_job``, NumPy's generator for its uniforms and actions) is timed in the
same run. Writes JSON and a Markdown table beside it.
"""

from __future__ import annotations

import argparse
import functools
import importlib.metadata
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jax
import jax.numpy as jnp

from benchmarks.common import (
    add_out_flags,
    available_memory_bytes,
    check_report_flags,
    compilation_cache_note,
    format_rate,
    machine_info,
    report,
)
from benchmarks.scaling import TARGET_VS_PYTHON  # issue 10 on a CPU (1000x is the GPU's)
from benchmarks.timing import Timing, compile_timed, interleaved_timings, time_python_loop
from slamorl_jax.cli_args import OneLineArgumentParser, bounded, positive_int_list, run_command, summary
from slamorl_jax.env import SCENARIOS, JobAllocationEnv, scenario_params
from slamorl_jax.env.batched_step import RESET_BY, default_reset_by, step_envs
from slamorl_jax.env.python_job import PythonJob
from slamorl_jax.env.python_uniforms import NumpyUniforms, run_random_steps
from slamorl_jax.markdown import markdown_table

DEFAULT_NUM_ENVS = (1, 64, 4096, 65536, 262144)
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "env_throughput.json"
TARGET_NUM_ENVS = 4096
TARGET_VS_CARTPOLE = 0.3  # issue 7: env-only at least 0.3x CartPole
# Bytes a batched step may hold per byte of one env's (obs, state): inputs, outputs and temporaries.
MEMORY_HEADROOM = 32

Rollout = Callable[[jax.Array, Any], tuple[jax.Array, jax.Array]]


PROG = "python -m benchmarks.env_throughput"


class PerEnvStep:
    """``env`` through its per-env API alone (``reset``, ``step``): the harness vmaps its ``step``
    even where the env has a batched one."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.num_actions = env.num_actions

    def reset(self, key: jax.Array, params: Any) -> tuple[jax.Array, Any]:
        """The env's reset."""
        return self.env.reset(key, params)

    def step(self, key: jax.Array, state: Any, action: jax.Array, params: Any) -> tuple:
        """The env's per-env step."""
        return self.env.step(key, state, action, params)


def add_rewards(total: jax.Array, reward: jax.Array) -> jax.Array:
    """``total`` (``[envs]``) plus each env's reward (summed over its objectives): a rollout's rewards
    add up per env and are summed over the batch once after it. A batch-wide sum at every step
    made XLA:GPU fuse the env's per-job work into a one-block reduction kernel
    (``benchmarks/results/step_profile_gpu.md``), a cost of the harness, not of the env."""
    return total + reward.reshape(total.shape[0], -1).sum(axis=1).astype(total.dtype)


def make_rollout(
    reset: Callable[..., Any], step: Callable[..., Any], num_actions: int, num_envs: int, num_steps: int
) -> Rollout:
    """``rollout(key, params)``: reset ``num_envs`` envs, scan ``num_steps`` random-action steps of
    the batched ``step(keys, states, actions, params)``."""

    def rollout(key: jax.Array, params: Any) -> tuple[jax.Array, jax.Array]:
        reset_key, run_key = jax.random.split(key)
        obs, state = jax.vmap(reset, in_axes=(0, None))(jax.random.split(reset_key, num_envs), params)

        def body(
            carry: tuple[Any, Any, jax.Array], key: jax.Array
        ) -> tuple[tuple[Any, Any, jax.Array], None]:
            obs, state, total = carry
            action_key, step_key = jax.random.split(key)
            actions = jax.random.randint(action_key, (num_envs,), 0, num_actions)
            obs, state, reward, _, _, _ = step(jax.random.split(step_key, num_envs), state, actions, params)
            return (obs, state, add_rewards(total, reward)), None

        carry = (obs, state, jnp.zeros((num_envs,), jnp.float32))
        (obs, _, total), _ = jax.lax.scan(body, carry, jax.random.split(run_key, num_steps))
        return obs, jnp.sum(total)

    return rollout


class OtherReset:
    """Our env whose batched step puts fresh jobs in by ``reset_by`` (``batched_step.RESET_BY``)
    rather than by the backend's default: the harness times the two resets side by side."""

    def __init__(self, env: JobAllocationEnv, reset_by: str) -> None:
        self.env = env
        self.reset_by = reset_by
        self.num_actions = env.num_actions

    def reset(self, key: jax.Array, params: Any) -> tuple[jax.Array, Any]:
        """The env's reset."""
        return self.env.reset(key, params)

    def step_batch(
        self, keys: jax.Array, state: Any, action: jax.Array, params: Any, reset_slots: Any
    ) -> tuple:
        """The env's batched step with this reset."""
        return self.env.step_batch(keys, state, action, params, reset_slots, self.reset_by)


class NullEnv:
    """An environment that does nothing: the same harness on it measures the harness alone (key
    splitting and random actions), an upper bound for any environment's steps/s."""

    num_actions = 9

    def reset(self, key: jax.Array, params: Any) -> tuple[jax.Array, jax.Array]:
        """A zero observation and state."""
        return jnp.zeros((1,), jnp.float32), jnp.zeros((), jnp.float32)

    def step(self, key: jax.Array, state: jax.Array, action: jax.Array, params: Any) -> tuple:
        """Carry the action into the state so nothing is optimised away."""
        state = state + action.astype(jnp.float32)
        no = jnp.zeros((), bool)
        return state[None], state, state, no, no, {}


def default_steps(num_envs: int) -> int:
    """Steps per timed call when ``--steps`` is not given: about 2**20 env steps, 16 to 1000 scan steps."""
    return min(1000, max(16, 2**20 // num_envs))


def bytes_per_env(env: Any, params: Any) -> int:
    """Bytes of one env's observation and state."""
    shapes = jax.eval_shape(env.reset, jax.random.key(0), params)
    return sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree.leaves(shapes))


def measure_jax(envs: dict[str, tuple[Any, Any, int]], num_envs: int, steps: int, repeats: int) -> dict:
    """Compile each env's rollout for ``num_envs`` and time them in turns; a JSON-ready row."""
    key = jax.random.key(0)
    candidates = {}
    for name, (env, params, num_actions) in envs.items():
        rollout = make_rollout(env.reset, functools.partial(step_envs, env), num_actions, num_envs, steps)
        compiled, compile_s = compile_timed(rollout, key, params)
        candidates[name] = (compiled, (key, params), Timing(work=num_envs * steps, compile_s=compile_s))
    interleaved_timings(candidates, repeats)
    return {"num_envs": num_envs, "steps": steps, **{name: c[2].as_dict() for name, c in candidates.items()}}


def measure_python(scenario: str, seconds: float, repeats: int) -> dict:
    """Steps per second of the plain-Python single job with NumPy uniforms and random actions."""
    job = PythonJob(scenario_params(scenario))
    source = NumpyUniforms(seed=0)
    job.reset(source.reset_draws())
    timing = time_python_loop(lambda n: run_random_steps(job, source, n), seconds, repeats)
    summary = timing.as_dict()
    del summary["compile_s"]  # nothing is compiled
    return summary


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """``numerator / denominator``, or None when either is missing."""
    return None if numerator is None or not denominator else numerator / denominator


def to_markdown(payload: dict) -> str:
    """The report as Markdown: a table of steps/s and ratios, the Python loop and the machine."""
    python_rate = (payload.get("python_loop") or {}).get("steps_per_s_median")
    config = payload["config"]
    also = extra_columns(config.get("also_reset_by", []), config.get("also_branch_free", False))
    rows = []
    for row in payload["results"]:
        if "skipped" in row:
            rows.append([row["num_envs"], "-", "skipped: " + row["skipped"], *[""] * (8 + 2 * len(also))])
            continue
        cart, ours = row["cartpole"], row["ours"]
        rows.append(
            [
                row["num_envs"],
                row["steps"],
                f"{format_rate(cart['steps_per_s_median'])} / {format_rate(cart['steps_per_s_best'])}",
                f"{format_rate(ours['steps_per_s_median'])} / {format_rate(ours['steps_per_s_best'])}",
                f"{row['ours_vs_cartpole']:.2f}x",
                format_rate(row["ours_vmap"]["steps_per_s_median"]),
                f"{row['ours_vmap_vs_cartpole']:.2f}x",
                *[
                    cell
                    for name in also
                    for cell in (
                        format_rate(row[f"ours_{name}"]["steps_per_s_median"]),
                        f"{row[f'ours_{name}_vs_cartpole']:.2f}x",
                    )
                ],
                "-" if row["ours_vs_python"] is None else f"{row['ours_vs_python']:.0f}x",
                format_rate(row["harness_alone"]["steps_per_s_median"]),
                f"{cart['compile_s']:.1f}",
                f"{ours['compile_s']:.1f}",
            ]
        )
    headers = [
        "num_envs",
        "steps",
        "CartPole-v1 steps/s (median / best)",
        f"ours (step_batch, {payload['config'].get('reset_by', 'scatter')} reset) steps/s (median / best)",
        "ours / CartPole",
        "ours via vmap(step) steps/s",
        "vmap(step) / CartPole",
        *[
            cell
            for name in also
            for cell in (f"ours, {COLUMN_LABELS.get(name, name + ' reset')}", f"{name} / CartPole")
        ],
        "ours / Python",
        "harness alone steps/s",
        "CartPole compile s",
        "ours compile s",
    ]
    m = payload["machine"]
    lines = [
        f"# Environment throughput ({payload['config']['scenario']} scenario, random actions)",
        "",
        markdown_table(headers, rows),
        "",
        f"Plain-Python single job (`python_job.PythonJob`, NumPy uniforms): "
        f"{format_rate(python_rate)} steps/s (median).",
    ]
    target = payload.get("target")
    if target:
        against_cartpole = (
            f"Target at {target['num_envs']} envs: ours >= {TARGET_VS_CARTPOLE}x CartPole "
            f"({'met' if target['vs_cartpole_met'] else 'missed'})"
        )
        if target["vs_python"] is None:  # --python-seconds 0: the loop was not timed
            lines.append(f"{against_cartpole}; the Python loop was not timed.")
        else:
            lines.append(
                f"{against_cartpole}, >= {TARGET_VS_PYTHON:.0f}x Python "
                f"({'met' if target['vs_python_met'] else 'missed'}). The harness alone, with no env at "
                f"all, reaches {target['harness_alone_vs_python']:.0f}x Python."
            )
    lines += [
        "",
        f"Machine: jax {m['jax_version']}, backend {m['backend']} ({m['device']}), "
        f"{m['usable_cpus']} usable of {m['cpu_count']} CPUs, {m['processor']}, "
        f"gymnax {m['gymnax_version']}, commit {m['git_commit']}, {m['timestamp_utc']}. "
        f"Compile time is measured apart; {payload['config']['repeats']} timed call(s) "
        "per cell after one warm-up call, the two JAX envs timed in turns." + compilation_cache_note(m),
    ]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> dict:
    """All measurements of one run as a JSON-ready dict."""
    import gymnax  # here: it computes arrays on import, after the backend check

    cart_env, cart_params = gymnax.make("CartPole-v1")
    ours_env = JobAllocationEnv()
    ours_params = scenario_params(args.scenario, ours_env.catalog)
    envs = {
        "cartpole": (cart_env, cart_params, cart_env.num_actions),
        "ours": (ours_env, ours_params, ours_env.num_actions),
        "ours_vmap": (PerEnvStep(ours_env), ours_params, ours_env.num_actions),
        "harness_alone": (NullEnv(), jnp.zeros(()), NullEnv.num_actions),
    }
    also_reset_by = [name for name in args.also_reset_by if name != default_reset_by()]
    for reset_by in also_reset_by:
        envs[f"ours_{reset_by}"] = (OtherReset(ours_env, reset_by), ours_params, ours_env.num_actions)
    if args.also_branch_free:
        branch_free = JobAllocationEnv(branch_on_init_strategy=False)
        envs["ours_branch_free"] = (branch_free, ours_params, branch_free.num_actions)
    per_env = max(bytes_per_env(env, params) for env, params, _ in envs.values())
    free = available_memory_bytes()
    python = None
    if args.python_seconds > 0:
        python = measure_python(args.scenario, args.python_seconds, args.repeats)
        print(
            f"python loop: {format_rate(python['steps_per_s_median'])} steps/s", file=sys.stderr, flush=True
        )
    python_rate = python["steps_per_s_median"] if python else None
    results = []
    for num_envs in args.num_envs:
        need = num_envs * per_env * MEMORY_HEADROOM
        if free is not None and need > free:
            reason = f"needs ~{need / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free"
            results.append({"num_envs": num_envs, "skipped": reason})
            print(f"num_envs={num_envs}: skipped ({reason})", file=sys.stderr, flush=True)
            continue
        row = measure_jax(envs, num_envs, args.steps or default_steps(num_envs), args.repeats)
        row["ours_vs_cartpole"] = ratio(
            row["ours"]["steps_per_s_median"], row["cartpole"]["steps_per_s_median"]
        )
        row["ours_vmap_vs_cartpole"] = ratio(
            row["ours_vmap"]["steps_per_s_median"], row["cartpole"]["steps_per_s_median"]
        )
        row["ours_vs_python"] = ratio(row["ours"]["steps_per_s_median"], python_rate)
        for name in extra_columns(also_reset_by, args.also_branch_free):
            row[f"ours_{name}_vs_cartpole"] = ratio(
                row[f"ours_{name}"]["steps_per_s_median"], row["cartpole"]["steps_per_s_median"]
            )
        results.append(row)
        print(
            f"num_envs={num_envs}: cartpole {format_rate(row['cartpole']['steps_per_s_median'])}, "
            f"ours {format_rate(row['ours']['steps_per_s_median'])} steps/s "
            f"(vmap(step) {format_rate(row['ours_vmap']['steps_per_s_median'])})",
            file=sys.stderr,
            flush=True,
        )
    payload = {
        "benchmark": "env_throughput",
        "machine": machine_info(gymnax_version=importlib.metadata.version("gymnax")),
        "config": {
            "num_envs": args.num_envs,
            "steps": args.steps or "auto (2**20 / num_envs, clipped to [16, 1000])",
            "repeats": args.repeats,
            "python_seconds": args.python_seconds,
            "scenario": args.scenario,
            "reset_by": default_reset_by(),
            "also_reset_by": also_reset_by,
            "also_branch_free": args.also_branch_free,
            "ours_env": ours_env.name,
            "cartpole_env": "gymnax CartPole-v1",
        },
        "python_loop": python,
        "results": results,
        "notes": (
            "steps/s = num_envs x steps / wall time of one jitted call (reset + scan), compile excluded; "
            "unused info entries may be removed by XLA for both envs, as in a training loop; "
            "ours = env.step_batch (the trainer's step), ours_vmap = vmap(env.step)."
        ),
    }
    target_row = next((r for r in results if r["num_envs"] == TARGET_NUM_ENVS and "skipped" not in r), None)
    if target_row is not None:
        payload["target"] = {
            "num_envs": TARGET_NUM_ENVS,
            "vs_cartpole": target_row["ours_vs_cartpole"],
            "vs_cartpole_met": target_row["ours_vs_cartpole"] >= TARGET_VS_CARTPOLE,
            "vs_python": target_row["ours_vs_python"],
            "vs_python_met": (target_row["ours_vs_python"] or 0.0) >= TARGET_VS_PYTHON,
            "harness_alone_vs_python": ratio(target_row["harness_alone"]["steps_per_s_median"], python_rate),
        }
    return payload


COLUMN_LABELS = {"branch_free": "no branch at reset"}


def extra_columns(also_reset_by: list[str], branch_free: bool) -> list[str]:
    """The names of the report's extra candidates (``ours_<name>``), in column order: the other
    resets, then our env without its branch at reset."""
    return [*also_reset_by, *(["branch_free"] if branch_free else [])]


def reset_by_list(text: str) -> list[str]:
    """A comma-separated list of ``batched_step.RESET_BY`` names (argparse type)."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in RESET_BY]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown reset {unknown[0]!r}: choose from {', '.join(RESET_BY)}")
    return list(dict.fromkeys(names))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line flags; a bad value prints one line and exits with status 2."""
    parser = OneLineArgumentParser(prog=PROG, description=summary(__doc__))
    parser.add_argument(
        "--num-envs",
        type=positive_int_list,
        default=list(DEFAULT_NUM_ENVS),
        help="comma-separated batch sizes (default: %(default)s; sizes that do not fit are skipped)",
    )
    parser.add_argument(
        "--steps",
        type=bounded(int, 1, 1_000_000),
        default=None,
        help="scan steps per timed call (default: auto)",
    )
    parser.add_argument("--repeats", type=bounded(int, 1, 1000), default=5, help="timed calls per cell")
    parser.add_argument(
        "--python-seconds",
        type=bounded(float, 0.0, 3600.0),
        default=2.0,
        help="seconds spent timing the plain-Python loop (0 skips it)",
    )
    parser.add_argument("--scenario", choices=SCENARIOS, default="mixed", help="scenario of our env")
    parser.add_argument(
        "--also-reset-by",
        type=reset_by_list,
        default=[],
        help=f"also time step_batch with these resets ({', '.join(RESET_BY)}); the backend's own "
        "(batched_step.default_reset_by) is always timed, as 'ours'",
    )
    parser.add_argument(
        "--also-branch-free",
        action="store_true",
        help="also time our env with no lax.cond on its start strategy when it builds new jobs "
        "(JobAllocationEnv(branch_on_init_strategy=False))",
    )
    add_out_flags(parser, DEFAULT_OUT)
    args = parser.parse_args(argv)
    check_report_flags(args, parser.prog)
    return args


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark, print the Markdown table and write JSON + Markdown."""
    report(parse_args(argv), run, to_markdown, PROG)


if __name__ == "__main__":
    run_command(main, PROG)

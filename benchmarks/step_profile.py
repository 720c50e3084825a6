"""Where an env step's (or a PPO update's) time goes, by the Python function that computes it (XLA:CPU).

    python -m benchmarks.step_profile [--program env|train] [--num-envs 4096] [--steps 64]
        [--step batch|vmap] [--top 20] [--out benchmarks/results/step_profile.json]

The rollout of ``env_throughput`` (reset, then ``lax.scan`` of the batched step with random
actions) is compiled and run twice, then once under ``jax.profiler.trace``. On a CPU the trace
times every thunk the XLA runtime executes (a fusion, a concatenate, a reduction, ...), named by
its HLO instruction; ``hlo_sources.py`` maps each instruction to the lines of Python its operations
were traced from. An instruction's time is split evenly over the operations fused into it, so a
function's figure is an estimate: XLA may fuse one function's work into another's loop, and every
fused operation does not cost the same. Control-flow instructions (``while``) are not charged; the
thunks of their bodies are. Times are per unit, summed over the thunks (the CPU runtime may run two
thunks at once, so the sum can exceed the wall time); the profiler slows a run down, so read the
shares per unit of work (env step or update), and time steps with ``env_throughput`` or
``step_breakdown``. The profiler's cost per thunk may also weigh the many small thunks (a step runs
hundreds) against the few large ones, and an operation's share is not what removing it would save:
on 0a03a90, computing the targets' prices without the per-job list-price lookup moved 5 % of the
charged time off ``lookup.py`` and left the step's speed where it was (``env_throughput``'s
harness, five runs in turn). Use it to
find the large instructions and where they come from; judge a change by timing it.

``--step batch`` (default) profiles ``env.step_batch``, the trainer's step; ``--step vmap`` the
per-env ``step`` under ``vmap``. ``--program train`` profiles one jitted chunk of the default
learner's PPO updates at ``--num-envs`` instead (rollout, GAE and the minibatch passes), charged
per update. Writes JSON and a Markdown table beside it.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import glob
import gzip
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jax

from benchmarks.common import REPO_ROOT, machine_info, markdown_table, parse_and_report
from benchmarks.env_throughput import PerEnvStep, make_rollout
from benchmarks.hlo_sources import CONTROL_FLOW, instruction_sources, parse_module
from slamorl_jax.agent.config import TrainConfig
from slamorl_jax.agent.trainer import env_params_from_config, make_train
from slamorl_jax.cli_args import OneLineArgumentParser, bounded, fail, run_command, summary
from slamorl_jax.env import JobAllocationEnv
from slamorl_jax.env.batched_step import step_envs

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "step_profile.json"
WARMUP_CALLS = 2
GROUPS = ("file", "function", "line", "instruction")
KEPT_ROWS = 100  # rows of each group in the JSON, largest first (the total counts every instruction)


def thunk_times_us(trace_dir: str, module_name: str) -> Counter[str]:
    """Microseconds per HLO instruction of ``module_name`` in the Perfetto trace under ``trace_dir``."""
    paths = glob.glob(f"{trace_dir}/**/*.trace.json.gz", recursive=True)
    if not paths:
        raise RuntimeError(f"the profiler wrote no Perfetto trace under {trace_dir}")
    with gzip.open(paths[0]) as stream:
        trace = json.load(stream)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    times: Counter[str] = Counter()
    for event in events:
        args = event.get("args") or {}
        if event.get("ph") == "X" and args.get("hlo_module") == module_name and "hlo_op" in args:
            times[args["hlo_op"]] += float(event.get("dur", 0.0))
    return times


def short_location(location: str) -> str:
    """A source location with the repository root cut off its file."""
    root = str(REPO_ROOT) + "/"
    return location[len(root) :] if location.startswith(root) else location


def charge(times_us: Counter[str], sources: dict[str, tuple[str, Counter[str]]]) -> dict[str, Counter[str]]:
    """Split each traced instruction's time over its source locations (module docstring):
    microseconds by ``file``, by ``function`` (``file:function``), by ``line`` and by ``instruction``."""
    by: dict[str, Counter[str]] = {group: Counter() for group in GROUPS}
    for name, micros in times_us.items():
        opcode, locations = sources.get(name, ("?", Counter({"(not in the module)": 1})))
        if opcode in CONTROL_FLOW:
            continue
        by["instruction"][f"{name} ({opcode})"] += micros
        total = sum(locations.values())
        for location, count in locations.items():
            share = micros * count / total
            where = short_location(location)
            by["line"][where] += share
            function = where.rsplit(":", 1)[0]
            by["function"][function] += share
            by["file"][function.split(":", 1)[0]] += share
    return by


def module_name(hlo_text: str) -> str:
    """The module name of a compiled program's text (its first line, ``HloModule <name>, ...``)."""
    first = hlo_text.split("\n", 1)[0].split()
    if len(first) < 2 or first[0] != "HloModule":
        raise RuntimeError("the compiled program's text does not start with its HloModule line")
    return first[1].rstrip(",")


def profile(compiled: Any, args: tuple) -> dict[str, Counter[str]]:
    """Run ``compiled(*args)`` warm, then once under the profiler; its charged times (:func:`charge`)."""
    for _ in range(WARMUP_CALLS):
        jax.block_until_ready(compiled(*args))
    text = compiled.as_text()
    with tempfile.TemporaryDirectory() as trace_dir:
        with jax.profiler.trace(trace_dir, create_perfetto_trace=True):
            jax.block_until_ready(compiled(*args))
        times = thunk_times_us(trace_dir, module_name(text))
    if not times:
        raise RuntimeError("the trace timed no instruction of the program (is this a CPU backend?)")
    return charge(times, instruction_sources(parse_module(text)))


def env_rollout(args: argparse.Namespace) -> tuple[Any, tuple, int]:
    """The compiled env rollout, its arguments and the env steps it runs."""
    env = JobAllocationEnv()
    params = env.default_params
    stepped = env if args.step == "batch" else PerEnvStep(env)
    rollout = make_rollout(
        stepped.reset, functools.partial(step_envs, stepped), env.num_actions, args.num_envs, args.steps
    )
    key = jax.random.key(0)
    return jax.jit(rollout).lower(key, params).compile(), (key, params), args.steps


def training_chunk(args: argparse.Namespace) -> tuple[Any, tuple, int]:
    """The default learner's compiled chunk of updates at ``--num-envs``, its arguments and its
    updates."""
    config = dataclasses.replace(TrainConfig(), num_envs=args.num_envs)
    trainer = make_train(config)
    env_params = env_params_from_config(config)
    state = jax.jit(trainer.init)(jax.random.key(config.seed), env_params)
    compiled = jax.jit(trainer.update_chunk).lower(state, env_params).compile()
    return compiled, (state, env_params), config.updates_per_chunk


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Compile, warm up and profile the program; a JSON-ready payload of the charged times per
    env step (``--program env``) or per PPO update (``--program train``)."""
    if jax.default_backend() != "cpu":
        fail(
            f"profiles XLA:CPU's thunks, but JAX runs on {jax.default_backend()}; run it with "
            "JAX_PLATFORMS=cpu",
            "python -m benchmarks.step_profile",
        )
    compiled, call_args, units = (env_rollout if args.program == "env" else training_chunk)(args)
    charged = profile(compiled, call_args)
    total = sum(charged["instruction"].values())
    per_unit = {
        group: [(name, micros / units / 1e3) for name, micros in counter.most_common(KEPT_ROWS)]
        for group, counter in charged.items()
    }
    return {
        "program": args.program,
        "num_envs": args.num_envs,
        "steps": args.steps,
        "step": args.step,
        "units": units,
        "unit": "env step" if args.program == "env" else "PPO update",
        "top": args.top,
        "total_ms_per_unit": total / units / 1e3,
        "ms_per_unit": per_unit,
        "machine": machine_info(),
    }


def to_markdown(payload: dict[str, Any]) -> str:
    """One table per group (by file, function, line and instruction), the top rows of each."""
    total, unit = payload["total_ms_per_unit"], payload["unit"]
    what = (
        f"`--step {payload['step']}`, {payload['steps']} steps profiled"
        if payload["program"] == "env"
        else f"the default learner, {payload['units']} updates profiled"
    )
    sections = [f"Thunk time per {unit}, summed: {total:.3f} ms ({payload['num_envs']} envs, {what})."]
    for group in GROUPS:
        top = payload["ms_per_unit"][group][: payload["top"]]
        rows = [[name, f"{ms:.3f}", f"{ms / total:.1%}"] for name, ms in top]
        sections.append(f"By {group}:\n\n" + markdown_table([group, f"ms per {unit}", "share"], rows))
    sections.append(f"Machine: {payload['machine']}")
    return "\n\n".join(sections) + "\n"


def main(argv: list[str] | None = None) -> None:
    """Parse flags, profile, write the JSON and Markdown."""
    parser = OneLineArgumentParser(prog="python -m benchmarks.step_profile", description=summary(__doc__))
    parser.add_argument("--num-envs", type=bounded(int, 1, 1 << 22), default=4096, help="batch size")
    parser.add_argument("--steps", type=bounded(int, 1, 10_000), default=64, help="steps profiled")
    parser.add_argument("--program", choices=("env", "train"), default="env", help="env steps or PPO updates")
    parser.add_argument("--step", choices=("batch", "vmap"), default="batch", help="step_batch or vmap(step)")
    parser.add_argument("--top", type=bounded(int, 1, KEPT_ROWS), default=20, help="rows per table")
    parse_and_report(parser, argv, str(DEFAULT_OUT), run, to_markdown)


if __name__ == "__main__":
    run_command(main, "python -m benchmarks.step_profile")

"""The env step on a batch split over devices: ``step_batch`` per device against ``vmap(env.step)``.

    python -m benchmarks.sharded_step [--devices 1,2] [--num-envs 4096] [--steps 64] [--repeats 9]
        [--out benchmarks/results/sharded_step.json] [--overwrite]

For each device count a process of its own with that many fake CPU devices (on a machine with
accelerators, set ``--devices`` to what it has) compiles ``scaling_worker``'s rollout of the env
batch split over the device mesh twice: stepped as the trainer steps it (``batched_step.step_envs``
with the mesh: ``step_batch`` on each device's share under ``jax.shard_map``, new jobs built only
where one ended) and stepped by ``vmap(env.step)`` over the whole batch (XLA's partitioner splits
it; every env builds a new job at every step and keeps it where one ended). The two are timed in
turns in the same process (compile time apart, warm-up, ``block_until_ready``). Writes JSON and a
Markdown table beside it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.children import child_or_report, run_in_child
from benchmarks.common import format_rate, machine_info
from benchmarks.timing import Timing, compile_timed, interleaved_timings
from slamorl_jax.cli_args import OneLineArgumentParser, bounded, positive_int_list, run_command, summary
from slamorl_jax.markdown import markdown_table

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "sharded_step.json"
STEPS = {"step_envs": False, "vmap(step)": True}  # name -> per_env_step


def measure(num_envs: int, steps: int, repeats: int) -> dict[str, Any]:
    """Both steps over every device this process sees, timed in turns; a JSON-ready row."""
    import jax

    from benchmarks.scaling_worker import sharded_rollout
    from slamorl_jax.env import JobAllocationEnv, scenario_params
    from slamorl_jax.learner_jit import replicate
    from slamorl_jax.sharding import check_divisible, env_mesh

    mesh = env_mesh()
    check_divisible(num_envs, mesh.size)
    env = JobAllocationEnv()
    args = replicate((jax.random.key(0), scenario_params("mixed")), mesh)
    candidates = {}
    for name, per_env_step in STEPS.items():
        rollout = sharded_rollout(env, mesh, num_envs, steps, per_env_step=per_env_step)
        compiled, compile_s = compile_timed(rollout, *args)
        candidates[name] = (compiled, args, Timing(work=num_envs * steps, compile_s=compile_s))
    interleaved_timings(candidates, repeats)
    return {
        "devices": mesh.size,
        "device_kind": jax.devices()[0].device_kind,
        "num_envs": num_envs,
        "steps": steps,
        **{name: timing.as_dict() for name, (_, _, timing) in candidates.items()},
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every device count in a process of its own, and the machine."""
    flags = [f"--num-envs={args.num_envs}", f"--steps={args.steps}", f"--repeats={args.repeats}"]
    rows = [run_in_child("benchmarks.sharded_step", devices, flags) for devices in args.devices]
    return {"rows": rows, "machine": machine_info()}


def to_markdown(payload: dict[str, Any]) -> str:
    """One row per device count: median (best) steps/s of each step and their ratio."""
    headers = ["devices", "num_envs", *(f"{name} steps/s" for name in STEPS), "step_envs / vmap(step)"]
    lines = []
    for row in payload["rows"]:
        if "error" in row:
            lines.append([row["devices"], "-", f"failed: {row['error']}", "", ""])
            continue
        rates = [row[name]["steps_per_s_median"] for name in STEPS]
        cells = [
            f"{format_rate(row[name]['steps_per_s_median'])} ({format_rate(row[name]['steps_per_s_best'])})"
            for name in STEPS
        ]
        lines.append([row["devices"], f"{row['num_envs']:,}", *cells, f"{rates[0] / rates[1]:.2f}x"])
    return (
        "Median (best) of the timed calls; the two steps are timed in turns in one process per row.\n\n"
        + markdown_table(headers, lines)
        + f"\n\nMachine: {payload['machine']}\n"
    )


def main(argv: list[str] | None = None) -> None:
    """Parent: run each device count in its own process and report; child: measure, print JSON."""
    parser = OneLineArgumentParser(prog="python -m benchmarks.sharded_step", description=summary(__doc__))
    parser.add_argument("--devices", type=positive_int_list, default=[1, 2], help="device counts")
    parser.add_argument("--num-envs", type=bounded(int, 1, 1 << 22), default=4096, help="envs in all")
    parser.add_argument("--steps", type=bounded(int, 1, 100_000), default=64, help="scan steps per call")
    parser.add_argument("--repeats", type=bounded(int, 1, 1000), default=9, help="timed calls per step")
    child_or_report(
        parser, argv, DEFAULT_OUT, lambda a: measure(a.num_envs, a.steps, a.repeats), run, to_markdown
    )


if __name__ == "__main__":
    run_command(main, "python -m benchmarks.sharded_step")

"""Where sharded training spends its time: rollout vs learning per device count, and the collectives.

    python -m benchmarks.sharded_training_profile [--devices 1,2,8] [--num-envs 1024] [--repeats 3]
        [--minibatch-shuffle global|per_env]
        [--out benchmarks/results/sharded_training_profile.json] [--overwrite]

For each device count (a process of its own with that many fake CPU devices) the default learner's
two halves of an update are compiled and timed apart over the device mesh, exactly as training
shards them: the rollout (``rollout_length`` env steps and the actor) and the learning (GAE and the
PPO epochs over shuffled minibatches). The compiled update is then read for its cross-device
collectives (all-gather, all-reduce, ...): operation, shape and bytes, so the table shows what the
sharded program moves between devices on every update. ``--minibatch-shuffle=per_env`` profiles the
learner that deals each env's own steps into the minibatches (``TrainConfig.minibatch_shuffle``).
Writes JSON and Markdown.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.children import child_or_report, run_in_child
from benchmarks.common import format_rate
from slamorl_jax.cli_args import OneLineArgumentParser, bounded, positive_int_list, run_command, summary
from slamorl_jax.markdown import markdown_table

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "sharded_training_profile.json"
COLLECTIVE = re.compile(
    r"= (\(.*?\)|\S+) (all-gather|all-reduce|all-to-all|collective-permute|reduce-scatter)(?:-start)?\("
)
BYTES = {"f32": 4, "s32": 4, "u32": 4, "pred": 1, "f16": 2, "bf16": 2, "f64": 8, "s64": 8, "u8": 1}


PROG = "python -m benchmarks.sharded_training_profile"


def shape_bytes(text: str) -> int:
    """Bytes of an HLO shape such as ``f32[16,1024,350]{2,1,0}`` or a tuple of them."""
    total = 0
    for dtype, dims in re.findall(r"([a-z]+\d*)\[([\d,]*)\]", text):
        size = 1
        for d in filter(None, dims.split(",")):
            size *= int(d)
        total += size * BYTES.get(dtype, 4)
    return total


def short(shape: str, width: int = 60) -> str:
    """An HLO shape cut to ``width`` characters (a tuple of every gradient is long)."""
    if len(shape) <= width:
        return shape
    arrays = shape.count("[")
    return f"{shape[: width - 20]}... ({arrays} arrays)"


def measure(num_envs: int, repeats: int, shuffle: str) -> dict[str, Any]:
    """In this process: the two halves of an update, timed over the mesh, and the collectives."""
    import jax

    from slamorl_jax.agent.config import TrainConfig
    from slamorl_jax.agent.trainer import env_params_from_config, make_train
    from slamorl_jax.learner_jit import jit_learner, state_shardings
    from slamorl_jax.sharding import env_mesh, replicated

    config = dataclasses.replace(
        TrainConfig(), num_envs=num_envs, updates_per_chunk=1, minibatch_shuffle=shuffle
    )
    trainer = make_train(config, mesh=env_mesh())
    learner = jit_learner(trainer, env_params_from_config(config))
    env_params = learner.place(env_params_from_config(config))
    state = learner.init(learner.place(jax.random.key(0)), env_params)
    shardings = state_shardings(trainer, env_params_from_config(config))
    whole = replicated(trainer.mesh)
    rollout = jax.jit(trainer._rollout, in_shardings=(shardings, whole)).lower(state, env_params).compile()
    _, traj, _ = rollout(state, env_params)
    learn = jax.jit(trainer._learn, in_shardings=(shardings, None)).lower(state, traj).compile()
    timings: dict[str, list[float]] = {"rollout_s": [], "learn_s": []}
    jax.block_until_ready((rollout(state, env_params), learn(state, traj)))
    for _ in range(repeats):
        tick = time.perf_counter()
        jax.block_until_ready(rollout(state, env_params))
        timings["rollout_s"].append(time.perf_counter() - tick)
        tick = time.perf_counter()
        jax.block_until_ready(learn(state, traj))
        timings["learn_s"].append(time.perf_counter() - tick)
    hlo = learner.chunk.lower(state, env_params).compile().as_text()
    found = Counter(
        (op, re.sub(r"\{[\d,]*\}|/\*index=\d+\*/", "", shape)) for shape, op in COLLECTIVE.findall(hlo)
    )
    collectives = [
        {"op": op, "shape": shape, "count_in_program": n, "bytes": shape_bytes(shape)}
        for (op, shape), n in sorted(found.items(), key=lambda item: -shape_bytes(item[0][1]))
    ]
    return {
        "devices": jax.device_count(),
        "num_envs": num_envs,
        "minibatch_shuffle": shuffle,
        "steps_per_update": config.batch_size,
        **{k: sorted(v)[len(v) // 2] for k, v in timings.items()},
        "collectives": collectives,
    }


def run_child(devices: int, args: argparse.Namespace) -> dict[str, Any]:
    """:func:`measure` in a process with ``devices`` fake CPU devices."""
    flags = [
        f"--num-envs={args.num_envs}",
        f"--repeats={args.repeats}",
        f"--minibatch-shuffle={args.minibatch_shuffle}",
    ]
    return run_in_child("benchmarks.sharded_training_profile", devices, flags)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every device count, and the machine."""
    from benchmarks.common import machine_info

    rows = [run_child(d, args) for d in args.devices]
    return {"machine": machine_info(load_average_at_end=os.getloadavg()), "rows": rows}


def to_markdown(payload: dict[str, Any]) -> str:
    """Timing table and the collectives of each device count."""
    m = payload["machine"]
    rows = [r for r in payload["rows"] if "error" not in r]
    failed = [f"{r['devices']} devices: {r['error']}" for r in payload["rows"] if "error" in r]
    table = [
        [
            r["devices"],
            f"{r['num_envs']:,}",
            f"{r['rollout_s'] * 1e3:.0f} ms ({format_rate(r['steps_per_update'] / r['rollout_s'])} steps/s)",
            f"{r['learn_s'] * 1e3:.0f} ms",
            f"{sum(c['bytes'] * c['count_in_program'] for c in r['collectives']) / 2**20:.1f}",
        ]
        for r in rows
    ]
    lines = [
        "# Sharded training: rollout vs learning, and what crosses devices",
        "",
        f"Machine: {m['processor']}, {m['cpu_count']} CPUs; jax {m['jax_version']}; "
        f"commit {m['git_commit']}; "
        f"load average at the end {', '.join(f'{x:.1f}' for x in m['load_average_at_end'])}; "
        f"minibatch shuffle {rows[0].get('minibatch_shuffle', 'global') if rows else '-'}.",
        "",
        markdown_table(
            [
                "devices",
                "num_envs",
                "rollout (median)",
                "learning (median)",
                "MiB of collectives (each op once)",
            ],
            table,
        ),
        *(["", "Failed: " + "; ".join(failed)] if failed else []),
    ]
    for r in rows:
        if r["devices"] == 1:
            continue
        lines += ["", f"Collectives in the compiled update on {r['devices']} devices (largest first):", ""]
        cells = [
            [c["op"], f"`{short(c['shape'])}`", c["count_in_program"], f"{c['bytes'] / 2**20:.2f}"]
            for c in r["collectives"]
        ]
        lines.append(
            markdown_table(["op", "shape", "times in the program (a loop body once)", "MiB each"], cells)
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Parent: run each device count in its own process and report; child: measure and print JSON."""
    parser = OneLineArgumentParser(prog=PROG, description=summary(__doc__))
    parser.add_argument("--devices", type=positive_int_list, default=[1, 2, 8], help="fake CPU device counts")
    parser.add_argument("--num-envs", type=bounded(int, 1, 2**22), default=1024, help="envs in parallel")
    parser.add_argument(
        "--repeats", type=bounded(int, 1, 100), default=3, help="timed calls per device count"
    )
    parser.add_argument(
        "--minibatch-shuffle",
        choices=("global", "per_env"),
        default="global",
        help="the learner's minibatches",
    )
    child_or_report(
        parser,
        argv,
        DEFAULT_OUT,
        lambda a: measure(a.num_envs, a.repeats, a.minibatch_shuffle),
        run,
        to_markdown,
    )


if __name__ == "__main__":
    run_command(main, PROG)

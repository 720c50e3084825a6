"""Training steps per second: PPO on our env vs PPO on gymnax CartPole with the same learner.

    python -m benchmarks.train_throughput [--num-envs 64,1024,4096,16384] [--hidden-sizes H,H]
        [--rollout-length N] [--update-epochs N] [--num-minibatches N] [--minibatch-shuffle S]
        [--updates-per-call 2] [--repeats 3] [--also-branch-free]
        [--out benchmarks/results/train_throughput.json] [--overwrite]

The learner's flags default to the default learner's (``slamorl_jax.agent.config.TrainConfig``;
``--help`` shows the values). Every size's configuration is checked before the first is measured.

Both runs use ``slamorl_jax.agent.trainer`` unchanged (same network shape, rollout length, epochs,
minibatches, optimiser; PureJaxRL's structure: rollout scan, GAE, epoch and minibatch scans), so
the difference is the environment; CartPole goes through ``cartpole_adapter.py``. "Same network"
two ways: CartPole's own (4 features in, 2 actions out: the hidden layers are ours), and CartPole
padded to our observation width, action count and objectives (``CartPoleForTrainer.as_wide_as``:
exactly our network, priors included), which isolates the environment from the cost of the wider
input and heads our forecast block and targets need. One timed call
is ``--updates-per-call`` PPO updates (``update_chunk``); compile time is measured apart, each
compiled chunk is warmed up once, and all three are timed in turns. Memory is XLA's estimate for one
call (arguments + outputs + temporaries), plus the device's peak where the backend reports it.
``--also-branch-free`` also times our trainer with no branch on device values in its rollout
(``branch_free_trainer``: on a GPU each such branch copies its predicate to the host).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import dataclasses

import jax

from benchmarks.cartpole_adapter import CartPoleForTrainer
from benchmarks.common import (
    add_out_flags,
    check_report_flags,
    compilation_cache_note,
    format_rate,
    in_own_flags,
    machine_info,
    report,
)
from benchmarks.timing import Timing, compile_timed, interleaved_timings
from slamorl_jax.agent.config import MINIBATCH_SHUFFLES, TrainConfig
from slamorl_jax.agent.config_checks import validate_config
from slamorl_jax.agent.trainer import Trainer, env_params_from_config, make_train
from slamorl_jax.cli_args import OneLineArgumentParser, bounded, fail, positive_int_list, run_command, summary
from slamorl_jax.env.job_env import JobAllocationEnv
from slamorl_jax.markdown import markdown_table

DEFAULT_NUM_ENVS = (64, 1024, 4096, 16384)
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "train_throughput.json"
# train's flags that this benchmark spells otherwise than by hyphens (validate_config names train's)
RENAMED_FLAGS = {"--updates_per_chunk": "--updates-per-call"}
TARGET_NUM_ENVS = 4096
TARGET_VS_CARTPOLE = 0.7  # issue 7's bar: >= 0.7x CartPole PPO at 4096 envs


PROG = "python -m benchmarks.train_throughput"


def memory_bytes(compiled: Any) -> int | None:
    """XLA's memory estimate of one call: arguments + outputs + temporaries (None if unknown)."""
    try:
        m = compiled.memory_analysis()
        return int(m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes)
    except (AttributeError, NotImplementedError, TypeError):
        return None


def device_peak_bytes() -> int | None:
    """Peak bytes in use on the default device, where the backend reports it (GPU/TPU)."""
    stats = jax.devices()[0].memory_stats() or {}
    return int(stats["peak_bytes_in_use"]) if "peak_bytes_in_use" in stats else None


def branch_free_trainer(config: TrainConfig) -> Trainer:
    """Our trainer with no branch on device values in its rollout: the env builds new jobs without
    the ``lax.cond`` on its start strategy and the rollout values truncated jobs at every step
    (``JobAllocationEnv.branch_on_init_strategy``, ``Trainer.branch_on_truncation``)."""
    env = JobAllocationEnv(action_set=config.actions, branch_on_init_strategy=False)
    return dataclasses.replace(make_train(config, env), branch_on_truncation=False)


def measure(config: TrainConfig, repeats: int, branch_free: bool = False) -> dict[str, Any]:
    """Compile and time ``update_chunk`` for our env and CartPole at ``config`` (and our trainer
    without branches, :func:`branch_free_trainer`); a JSON-ready row."""
    candidates = {}
    memory = {}
    ours = JobAllocationEnv(action_set=config.actions)
    trainers = {
        "cartpole": (make_train(config, CartPoleForTrainer()), None),
        "cartpole_wide": (make_train(config, CartPoleForTrainer.as_wide_as(ours)), None),
        "ours": (make_train(config, ours), env_params_from_config(config)),
    }
    if branch_free:
        trainers["ours_branch_free"] = (branch_free_trainer(config), env_params_from_config(config))
    for name, (trainer, env_params) in trainers.items():
        if env_params is None:
            env_params = trainer.env.default_params
        state = jax.jit(trainer.init)(jax.random.key(config.seed), env_params)
        compiled, compile_s = compile_timed(trainer.update_chunk, state, env_params)
        work = config.updates_per_chunk * config.batch_size
        candidates[name] = (compiled, (state, env_params), Timing(work=work, compile_s=compile_s))
        memory[name] = memory_bytes(compiled)
    interleaved_timings(candidates, repeats)
    row: dict[str, Any] = {"num_envs": config.num_envs}
    for name, (_, _, timing) in candidates.items():
        row[name] = {**timing.as_dict(), "xla_memory_bytes": memory[name]}
    row["ours_vs_cartpole"] = row["ours"]["steps_per_s_median"] / row["cartpole"]["steps_per_s_median"]
    row["ours_vs_cartpole_wide"] = (
        row["ours"]["steps_per_s_median"] / row["cartpole_wide"]["steps_per_s_median"]
    )
    if branch_free:
        row["ours_branch_free_vs_cartpole_wide"] = (
            row["ours_branch_free"]["steps_per_s_median"] / row["cartpole_wide"]["steps_per_s_median"]
        )
    row["device_peak_bytes"] = device_peak_bytes()
    return row


def to_markdown(payload: dict) -> str:
    """The report as a Markdown table with the machine line."""

    def mib(x: int | None) -> str:
        return "-" if x is None else f"{x / 2**20:.0f}"

    def rates(timing: dict) -> str:
        return f"{format_rate(timing['steps_per_s_median'])} / {format_rate(timing['steps_per_s_best'])}"

    names = [
        name
        for name in ("cartpole", "cartpole_wide", "ours", "ours_branch_free")
        if name in payload["results"][0]
    ]
    branch_free = "ours_branch_free" in names
    rows = [
        [
            r["num_envs"],
            *(rates(r[name]) for name in names),
            f"{r['ours_vs_cartpole']:.2f}x",
            *([f"{r['ours_vs_cartpole_wide']:.2f}x"] if "cartpole_wide" in r else []),
            *([f"{r['ours_branch_free_vs_cartpole_wide']:.2f}x"] if branch_free else []),
            " / ".join(f"{r[name]['compile_s']:.1f}" for name in names),
            " / ".join(mib(r[name]["xla_memory_bytes"]) for name in names),
        ]
        for r in payload["results"]
    ]
    labels = {
        "cartpole": "CartPole",
        "cartpole_wide": "CartPole at our width",
        "ours": "ours",
        "ours_branch_free": "ours without branches",
    }
    wide = "cartpole_wide" in names
    headers = [
        "num_envs",
        *(f"{labels[name]} PPO steps/s (median / best)" for name in names),
        "ours / CartPole",
        *(["ours / CartPole at our width"] if wide else []),
        *(["ours without branches / CartPole at our width"] if branch_free else []),
        f"compile s ({' / '.join(labels[name] for name in names)})",
        f"XLA memory MiB ({' / '.join(labels[name] for name in names)})",
    ]
    c, m = payload["config"], payload["machine"]
    lines = [
        f"# Training throughput (PPO, hidden {c['hidden_sizes']}, rollout {c['rollout_length']}, "
        f"{c['update_epochs']} epochs x {c['num_minibatches']} minibatches)",
        "",
        markdown_table(headers, rows),
    ]
    target = payload.get("target")
    if target:
        lines += [
            "",
            f"Target at {target['num_envs']} envs: ours >= {target.get('threshold', TARGET_VS_CARTPOLE)}x "
            f"CartPole ({'met' if target['met'] else 'missed'}: {target['ratio']:.2f}x)"
            + (
                f"; against CartPole padded to our network's width "
                f"({'met' if target['met_wide'] else 'missed'}: {target['ratio_wide']:.2f}x)."
                if "ratio_wide" in target
                else "."
            ),
        ]
    lines += [
        "",
        f"Machine: jax {m['jax_version']}, backend {m['backend']} ({m['device']}), {m['usable_cpus']} usable "
        f"of {m['cpu_count']} CPUs, commit {m['git_commit']}, {m['timestamp_utc']}. One timed call = "
        f"{c['updates_per_call']} PPO updates; {c['repeats']} timed calls per cell after a warm-up, "
        "all timed in turns; compile time apart." + compilation_cache_note(m),
    ]
    return "\n".join(lines)


def train_config(args: argparse.Namespace, num_envs: int) -> TrainConfig:
    """The learner timed at ``num_envs``: the default one with this benchmark's flags."""
    return TrainConfig(
        num_envs=num_envs,
        rollout_length=args.rollout_length,
        update_epochs=args.update_epochs,
        num_minibatches=args.num_minibatches,
        minibatch_shuffle=args.minibatch_shuffle,
        hidden_sizes=tuple(args.hidden_sizes),
        updates_per_chunk=args.updates_per_call,
        total_timesteps=num_envs * args.rollout_length * args.updates_per_call,
    )


def check_configs(args: argparse.Namespace, prog: str) -> None:
    """Exit 2 with one line, in this benchmark's flag names, unless the learner is valid at every
    ``--num-envs`` (checked before any is measured: a bad later size lost the rows before it)."""
    for num_envs in args.num_envs:
        try:
            validate_config(train_config(args, num_envs))
        except ValueError as error:  # e.g. minibatches that do not divide the rollout
            fail(f"--num-envs {num_envs}: {in_own_flags(str(error), RENAMED_FLAGS)}", prog)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """All measurements of one run as a JSON-ready dict."""
    results = []
    for num_envs in args.num_envs:
        config = train_config(args, num_envs)
        row = measure(config, args.repeats, args.also_branch_free)
        results.append(row)
        print(
            f"num_envs={num_envs}: cartpole {format_rate(row['cartpole']['steps_per_s_median'])}, "
            f"cartpole at our width {format_rate(row['cartpole_wide']['steps_per_s_median'])}, "
            f"ours {format_rate(row['ours']['steps_per_s_median'])} steps/s",
            file=sys.stderr,
            flush=True,
        )
    payload: dict[str, Any] = {
        "benchmark": "train_throughput",
        "machine": machine_info(),
        "config": {
            "num_envs": args.num_envs,
            "hidden_sizes": list(args.hidden_sizes),
            "rollout_length": args.rollout_length,
            "update_epochs": args.update_epochs,
            "num_minibatches": args.num_minibatches,
            "minibatch_shuffle": train_config(args, args.num_envs[0]).minibatch_shuffle,
            "updates_per_call": args.updates_per_call,
            "repeats": args.repeats,
            "also_branch_free": args.also_branch_free,
        },
        "results": results,
    }
    target = next((r for r in results if r["num_envs"] == TARGET_NUM_ENVS), None)
    if target is not None:
        payload["target"] = {
            "num_envs": TARGET_NUM_ENVS,
            "threshold": TARGET_VS_CARTPOLE,
            "ratio": target["ours_vs_cartpole"],
            "met": target["ours_vs_cartpole"] >= TARGET_VS_CARTPOLE,
            "ratio_wide": target["ours_vs_cartpole_wide"],
            "met_wide": target["ours_vs_cartpole_wide"] >= TARGET_VS_CARTPOLE,
        }
    return payload


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line flags; a bad value prints one line and exits with status 2."""
    defaults = TrainConfig()
    parser = OneLineArgumentParser(prog=PROG, description=summary(__doc__))
    shown = " (default: %(default)s)"
    parser.add_argument(
        "--num-envs", type=positive_int_list, default=list(DEFAULT_NUM_ENVS), help="batch sizes" + shown
    )
    parser.add_argument(
        "--hidden-sizes", type=positive_int_list, default=list(defaults.hidden_sizes), help="layers" + shown
    )
    parser.add_argument(
        "--rollout-length", type=bounded(int, 1, 4096), default=defaults.rollout_length, help="steps" + shown
    )
    parser.add_argument(
        "--update-epochs", type=bounded(int, 1, 100), default=defaults.update_epochs, help="epochs" + shown
    )
    parser.add_argument(
        "--num-minibatches",
        type=bounded(int, 1, 4096),
        default=defaults.num_minibatches,
        help="minibatches per epoch" + shown,
    )
    parser.add_argument(
        "--minibatch-shuffle",
        choices=MINIBATCH_SHUFFLES,
        default=None,
        help=f"how minibatches are drawn (default: the default action set's, {defaults.minibatch_shuffle})",
    )
    parser.add_argument(
        "--updates-per-call", type=bounded(int, 1, 1000), default=2, help="PPO updates per timed call" + shown
    )
    parser.add_argument(
        "--repeats", type=bounded(int, 1, 100), default=3, help="timed calls per cell" + shown
    )
    parser.add_argument(
        "--also-branch-free",
        action="store_true",
        help="also time our trainer with no branch on device values in its rollout (branch_free_trainer)",
    )
    add_out_flags(parser, DEFAULT_OUT)
    args = parser.parse_args(argv)
    check_report_flags(args, parser.prog)
    check_configs(args, parser.prog)
    return args


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark, print the Markdown table and write JSON + Markdown."""
    report(parse_args(argv), run, to_markdown, PROG)


if __name__ == "__main__":
    run_command(main, PROG)

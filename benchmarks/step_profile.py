"""Where an env step's (or a PPO update's) time goes, by the Python function that computes it.

    python -m benchmarks.step_profile [--program env|train] [--num-envs 4096] [--steps 64]
        [--step batch|vmap] [--top 20] [--out benchmarks/results/step_profile.json] [--overwrite]
    python -m benchmarks.step_profile --keep-trace PREFIX [...]   # report at PREFIX.json
    python -m benchmarks.step_profile --from-trace PREFIX [--top 20] [--out PREFIX.json] [--overwrite]

On XLA:CPU or XLA:GPU. The rollout of ``env_throughput`` (reset, then ``lax.scan`` of the batched
step with random actions) is compiled and run twice, then once under ``jax.profiler.trace``. On a
CPU the trace times every thunk the XLA runtime executes (a fusion, a concatenate, a reduction,
...), named by its HLO instruction; ``hlo_sources.py`` maps each instruction to the lines of Python
its operations were traced from. An instruction's time is split evenly over the operations fused
into it, so a function's figure is an estimate: XLA may fuse one function's work into another's
loop, and every fused operation does not cost the same. Control-flow instructions (``while``) are
not charged; the thunks of their bodies are. Times are per unit, summed over the thunks (the CPU
runtime may run two thunks at once, so the sum can exceed the wall time); the profiler slows a run
down, so read the shares per unit of work (env step or update), and time steps with
``env_throughput`` or ``step_breakdown``. The profiler's cost per thunk may also weigh the many
small thunks (a step runs hundreds) against the few large ones, and an operation's share is not what
removing it would save: on 0a03a90, computing the targets' prices without the per-job list-price
lookup moved 5 % of the charged time off ``lookup.py`` and left the step's speed where it was
(``env_throughput``'s harness, five runs in turn). Use it to find the large instructions and where
they come from; judge a change by timing it.

``--step batch`` (default) profiles ``env.step_batch``, the trainer's step; ``--step vmap`` the
per-env ``step`` under ``vmap``. ``--program train`` profiles one jitted chunk of the default
learner's PPO updates at ``--num-envs`` instead (rollout, GAE and the minibatch passes), charged
per update. Writes JSON and a Markdown table beside it.

On a GPU the trace times kernels instead: a kernel launched from a command buffer (XLA:GPU runs
loop bodies as CUDA graphs) names the buffer as its instruction, and is charged to the fusion its
own name gives. ``--keep-trace PREFIX`` keeps the trace and the compiled program's text
(``PREFIX.trace.json.gz``, ``PREFIX.hlo.txt.gz``) beside the report, which is then ``PREFIX.json``
(another ``--out`` is refused: ``--from-trace`` reads the run's figures there); ``--from-trace
PREFIX`` charges a run kept so again on any machine, with no JAX program run, and writes its report
to ``PREFIX.json`` unless ``--out`` says otherwise (so ``--overwrite`` rewrites the kept run's report;
``benchmarks/gpu_session.sh`` keeps the GPU's). The flags of what is profiled (``--program``,
``--num-envs``, ``--steps``, ``--step``) are the kept run's, and refused with ``--from-trace``.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import glob
import gzip
import json
import os
import shutil
import sys
import tempfile
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jax

from benchmarks.common import REPO_ROOT, machine_info, parse_and_report
from benchmarks.env_throughput import PerEnvStep, make_rollout
from benchmarks.hlo_sources import CONTROL_FLOW, instruction_sources, parse_module
from slamorl_jax.agent.config import TrainConfig
from slamorl_jax.agent.trainer import env_params_from_config, make_train
from slamorl_jax.atomic_files import temporary_beside
from slamorl_jax.cli_args import OneLineArgumentParser, bounded, fail, file_path, run_command, summary
from slamorl_jax.env import JobAllocationEnv
from slamorl_jax.env.batched_step import step_envs
from slamorl_jax.markdown import markdown_table

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "step_profile.json"
# What is profiled: the flags' defaults, and the flags --from-trace takes from the kept run instead
PROFILED = {"program": "env", "num_envs": 4096, "steps": 64, "step": "batch"}
KEPT_SUFFIXES = (".trace.json.gz", ".hlo.txt.gz")  # what --keep-trace PREFIX writes beside PREFIX.json
WARMUP_CALLS = 2
GROUPS = ("file", "function", "line", "instruction")
RECORDED = ("program", "num_envs", "steps", "step", "units", "machine")  # what --from-trace reads back
OWN_PACKAGES = ("slamorl_jax", "benchmarks")  # the repository's code, wherever it was checked out
PROG = "python -m benchmarks.step_profile"
KEPT_ROWS = 100  # rows of each group in the JSON, largest first (the total counts every instruction)


def timed_instruction(hlo_op: str, event_name: str) -> str:
    """The instruction a trace event times: its ``hlo_op``, except for a GPU kernel launched from a
    command buffer (a CUDA graph), whose ``hlo_op`` names the buffer and whose event is named by the
    kernel: the fusion's name with ``_`` for the ``.`` before its number (``input_scatter_fusion_75``
    is ``input_scatter_fusion.75``; :func:`charge` tries both)."""
    return event_name if hlo_op.startswith("command_buffer") and event_name else hlo_op


def instruction_named(name: str, sources: dict[str, Any]) -> str:
    """``name`` as the module spells it: itself, or a kernel's name with its last ``_`` made ``.``."""
    if name in sources:
        return name
    head, _, number = name.rpartition("_")
    return f"{head}.{number}" if head and number.isdigit() and f"{head}.{number}" in sources else name


def thunk_times_us(trace_path: str, module_name: str) -> tuple[Counter[str], int]:
    """Microseconds per HLO instruction of ``module_name`` in the Perfetto trace at ``trace_path``
    (``.trace.json.gz``), and how many timed events (thunks on a CPU, kernels on a GPU) it holds."""
    with gzip.open(trace_path) as stream:
        trace = json.load(stream)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    times: Counter[str] = Counter()
    count = 0
    for event in events:
        args = event.get("args") or {}
        if event.get("ph") == "X" and args.get("hlo_module") == module_name and "hlo_op" in args:
            instruction = timed_instruction(args["hlo_op"], str(event.get("name", "")))
            times[instruction] += float(event.get("dur", 0.0))
            count += 1
    return times, count


def short_location(location: str) -> str:
    """A source location with the repository root cut off its file; in a trace kept on another
    machine (``--from-trace``), with whatever stands before this repository's packages."""
    root = str(REPO_ROOT) + "/"
    if location.startswith(root):
        return location[len(root) :]
    for package in OWN_PACKAGES:
        if (start := location.find(f"/{package}/")) >= 0:
            return location[start + 1 :]
    return location


def charge(times_us: Counter[str], sources: dict[str, tuple[str, Counter[str]]]) -> dict[str, Counter[str]]:
    """Split each traced instruction's time over its source locations (module docstring):
    microseconds by ``file``, by ``function`` (``file:function``), by ``line`` and by ``instruction``."""
    by: dict[str, Counter[str]] = {group: Counter() for group in GROUPS}
    for timed, micros in times_us.items():
        name = instruction_named(timed, sources)
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


def profile(
    compiled: Any,
    args: tuple,
    keep_trace: Path | None = None,
    staged: list[tuple[Path, Path]] | None = None,
) -> tuple[str, Counter[str], int]:
    """Run ``compiled(*args)`` warm, then once under the profiler: the program's text and
    :func:`thunk_times_us`. ``keep_trace``: a path prefix to keep the trace and the text at
    (``PREFIX.trace.json.gz``, ``PREFIX.hlo.txt.gz``; ``--from-trace`` reads them back), staged in
    ``staged`` (``common.report``'s) and published with the report ``PREFIX.json``, so a run that
    fails or is stopped leaves a kept set as it was."""
    for _ in range(WARMUP_CALLS):
        jax.block_until_ready(compiled(*args))
    text = compiled.as_text()
    with tempfile.TemporaryDirectory() as trace_dir:
        with jax.profiler.trace(trace_dir, create_perfetto_trace=True):
            jax.block_until_ready(compiled(*args))
        paths = glob.glob(f"{trace_dir}/**/*.trace.json.gz", recursive=True)
        if not paths:
            raise RuntimeError(f"the profiler wrote no Perfetto trace under {trace_dir}")
        times, events = thunk_times_us(paths[0], module_name(text))
        if keep_trace is not None:
            if staged is None:  # its files would stay temporary, never published nor removed
                raise ValueError("keep_trace needs the staged list of common.report, to publish with it")
            keep(paths[0], text, keep_trace, staged)
    return text, times, events


def keep(trace: str, text: str, prefix: Path, staged: list[tuple[Path, Path]]) -> None:
    """Copy ``trace`` for ``PREFIX.trace.json.gz`` and gzip ``text`` for ``PREFIX.hlo.txt.gz``, each
    into a temporary file beside its target, put in ``staged`` as soon as it exists."""
    trace_path, text_path = (Path(f"{prefix}{suffix}") for suffix in KEPT_SUFFIXES)
    staged.append((temporary_beside(trace_path), trace_path))
    shutil.copyfile(trace, staged[-1][0])
    os.chmod(staged[-1][0], 0o644)
    staged.append((temporary_beside(text_path), text_path))
    with gzip.open(staged[-1][0], "wt") as stream:
        stream.write(text)
    os.chmod(staged[-1][0], 0o644)


def kept_trace(prefix: Path) -> tuple[dict[str, Any], str, Counter[str], int]:
    """A run kept by ``--keep-trace PREFIX --out PREFIX.json``, read back: its payload (for what it
    profiled, on which machine), the program's text and :func:`thunk_times_us`."""
    try:
        recorded = json.loads(Path(f"{prefix}.json").read_text())
        if (
            not isinstance(recorded, dict)
            or not all(name in recorded for name in RECORDED)
            or not isinstance(recorded["units"], int)
            or recorded["units"] < 1
            or not isinstance(recorded["machine"], dict)
        ):
            raise ValueError(f"{prefix}.json is not a step_profile result")
        with gzip.open(f"{prefix}.hlo.txt.gz", "rt") as stream:
            text = stream.read()
        times, events = thunk_times_us(f"{prefix}.trace.json.gz", module_name(text))
        if not times:
            raise ValueError(f"the trace times no instruction of the program in {prefix}.hlo.txt.gz")
    except (OSError, EOFError, zlib.error, ValueError, RuntimeError, KeyError, TypeError) as err:
        fail(f"--from-trace {prefix}: {err}", PROG)
    return recorded, text, times, events


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
    if args.from_trace is not None:
        recorded, text, times, events = kept_trace(args.from_trace)
        what = {name: recorded[name] for name in RECORDED if name != "machine"}
        machine = recorded["machine"]
    else:
        if jax.default_backend() not in ("cpu", "gpu"):
            fail(
                f"profiles XLA:CPU's thunks or XLA:GPU's kernels, but JAX runs on {jax.default_backend()}; "
                "run it with JAX_PLATFORMS=cpu",
                PROG,
            )
        compiled, call_args, units = (env_rollout if args.program == "env" else training_chunk)(args)
        text, times, events = profile(compiled, call_args, args.keep_trace, getattr(args, "staged", None))
        what = {"program": args.program, "num_envs": args.num_envs, "steps": args.steps, "step": args.step}
        if args.program == "train":  # the learner's chunk: no env steps of either kind are profiled
            what.update(steps=None, step=None)
        what["units"] = units
        machine = machine_info()
    if not times:
        raise RuntimeError(f"the trace timed no instruction of the program on {machine['backend']}")
    charged = charge(times, instruction_sources(parse_module(text)))
    units = what["units"]
    total = sum(charged["instruction"].values())
    per_unit = {
        group: [(name, micros / units / 1e3) for name, micros in counter.most_common(KEPT_ROWS)]
        for group, counter in charged.items()
    }
    return {
        **what,
        "unit": "env step" if what["program"] == "env" else "PPO update",
        "top": args.top,
        "total_ms_per_unit": total / units / 1e3,
        "events_per_unit": events / units,
        "ms_per_unit": per_unit,
        "machine": machine,
    }


def to_markdown(payload: dict[str, Any]) -> str:
    """One table per group (by file, function, line and instruction), the top rows of each."""
    total, unit = payload["total_ms_per_unit"], payload["unit"]
    what = (
        f"`--step {payload['step']}`, {payload['steps']} steps profiled"
        if payload["program"] == "env"
        else f"the default learner, {payload['units']} updates profiled"
    )
    timed = "kernels" if payload["machine"].get("backend") == "gpu" else "thunks"
    events = payload.get("events_per_unit")  # absent from payloads written before it was counted
    count = f"; {events:,.0f} {timed} per {unit}" if events is not None else ""
    sections = [
        f"{timed.capitalize()}' time per {unit}, summed: {total:.3f} ms{count} "
        f"({payload['num_envs']} envs, {what})."
    ]
    for group in GROUPS:
        top = payload["ms_per_unit"][group][: payload["top"]]
        rows = [[name, f"{ms:.3f}", f"{ms / total:.1%}"] for name, ms in top]
        sections.append(f"By {group}:\n\n" + markdown_table([group, f"ms per {unit}", "share"], rows))
    sections.append(f"Machine: {payload['machine']}")
    return "\n\n".join(sections) + "\n"


def check_paths(args: argparse.Namespace, prog: str) -> None:
    """The report's path and what is profiled, before anything runs (exit 2 with one line): with
    ``--from-trace PREFIX``, no flag of what is profiled (the kept run's are used) and the report at
    ``PREFIX.json`` unless ``--out`` is given (it went to the CPU's ``step_profile.json``); with
    ``--keep-trace PREFIX``, the report at ``PREFIX.json`` (another ``--out`` is refused), a folder to
    keep the files in, and no kept file there already unless ``--overwrite``."""
    given = [name for name in PROFILED if getattr(args, name) is not None]
    if args.program == "train" and (ignored := [name for name in ("steps", "step") if name in given]):
        flags = ", ".join("--" + name for name in ignored)
        fail(
            f"--program train profiles one chunk of the default learner's updates: {flags} cannot be given",
            prog,
        )
    if args.from_trace is not None and given:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        fail(f"--from-trace takes what it profiled from the kept run: {flags} cannot be given with it", prog)
    for name, default in PROFILED.items():
        if getattr(args, name) is None:
            setattr(args, name, default)
    prefix = args.keep_trace if args.keep_trace is not None else args.from_trace
    report = DEFAULT_OUT if prefix is None else Path(f"{prefix}.json")
    if args.out is None:
        args.out = report
    if args.keep_trace is None:
        return
    if args.out.resolve() != report.resolve():
        fail(
            f"--keep-trace {prefix} writes its report to {report}, where --from-trace reads it back; "
            f"leave --out out or give --out {report}",
            prog,
        )
    if not report.absolute().parent.is_dir():
        fail(f"--keep-trace {prefix}: no folder to keep it in", prog)
    for suffix in KEPT_SUFFIXES:
        if Path(f"{prefix}{suffix}").exists() and not args.overwrite:
            fail(
                f"--keep-trace {prefix}: {prefix}{suffix} is there already; pass --overwrite to replace it",
                prog,
            )


def main(argv: list[str] | None = None) -> None:
    """Parse flags, profile, write the JSON and Markdown."""
    parser = OneLineArgumentParser(prog=PROG, description=summary(__doc__))
    shown = " (default: {})"
    parser.add_argument(
        "--num-envs",
        type=bounded(int, 1, 1 << 22),
        default=None,
        help="batch size" + shown.format(PROFILED["num_envs"]),
    )
    parser.add_argument(
        "--steps",
        type=bounded(int, 1, 10_000),
        default=None,
        help="steps profiled" + shown.format(PROFILED["steps"]),
    )
    parser.add_argument(
        "--program",
        choices=("env", "train"),
        default=None,
        help="env steps or PPO updates" + shown.format(PROFILED["program"]),
    )
    parser.add_argument(
        "--step",
        choices=("batch", "vmap"),
        default=None,
        help="step_batch or vmap(step)" + shown.format(PROFILED["step"]),
    )
    parser.add_argument("--top", type=bounded(int, 1, KEPT_ROWS), default=20, help="rows per table")
    kept = parser.add_mutually_exclusive_group()
    kept.add_argument(
        "--keep-trace",
        type=file_path,
        default=None,
        metavar="PREFIX",
        help="also keep the trace and the program's text (PREFIX.trace.json.gz, PREFIX.hlo.txt.gz)",
    )
    kept.add_argument(
        "--from-trace",
        type=file_path,
        default=None,
        metavar="PREFIX",
        help="charge a run kept with --keep-trace PREFIX again instead of running",
    )
    shown_out = f"{DEFAULT_OUT}; PREFIX.json with --keep-trace or --from-trace PREFIX"
    parse_and_report(parser, argv, None, run, to_markdown, check_paths, shown_out)


if __name__ == "__main__":
    run_command(main, PROG)

"""What XLA's compile settings do to the env: compile time of its batched step, and run time.

    python -m benchmarks.compile_flags [--variants O3,O1,O0,O3-legacy,O0-legacy] [--rounds 1]
        [--compile-envs 32] [--run-envs 1024] [--steps 20] [--repeats 5]
        [--out benchmarks/results/compile_flags.json] [--overwrite]

A variant ``O<n>`` sets LLVM's optimisation level (``--xla_backend_optimization_level=n``, 0-3; XLA's
default is 3); ``-legacy`` adds ``--xla_cpu_use_fusion_emitters=false``, XLA:CPU's older loop emitters
instead of its MLIR fusion emitters. The test suite compiles its programs with ``O0-legacy``
(``slamorl_jax.xla_flags.FAST_COMPILE_FLAGS``, ``tests/conftest.py``) because it compiles far more than
it runs; this measures that trade on the env. Each variant runs in its own process (XLA reads
``XLA_FLAGS`` once, when JAX starts), with no persistent compilation cache: the compile time of
``vmap(env.step)`` over ``--compile-envs`` jobs (jit, lower and compile, timed apart), and the run time
of a ``lax.scan`` of ``--steps`` steps over ``--run-envs`` jobs (compiled, warmed up once, then the
median of ``--repeats`` calls). ``--rounds`` runs the whole list that many times, in turn, so a busy
machine's drift shows.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.children import run_child
from benchmarks.common import REPO_ROOT, add_out_flags, check_report_flags, machine_info, report
from slamorl_jax.cli_args import OneLineArgumentParser, bounded, fail, run_command, summary
from slamorl_jax.compilation_cache import JAX_CACHE_VARIABLE
from slamorl_jax.markdown import markdown_table
from slamorl_jax.xla_flags import FUSION_EMITTERS_FLAG, LLVM_LEVEL_FLAG, with_xla_flags

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "compile_flags.json"
VARIANT_PATTERN = re.compile(r"O([0-3])(-legacy)?")


PROG = "python -m benchmarks.compile_flags"


def measure(compile_envs: int, run_envs: int, steps: int, repeats: int) -> dict[str, float]:
    """In this process (its ``XLA_FLAGS`` as set): the step's compile seconds and the scan's run ms."""
    import jax
    import jax.numpy as jnp

    from benchmarks.timing import compile_timed, time_call
    from slamorl_jax.env import make

    env, params = make()

    def batch(num_envs: int) -> tuple[jax.Array, Any]:
        keys = jax.random.split(jax.random.key(0), num_envs)
        _, state = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(keys, params)
        return keys, state

    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))
    keys, state = batch(compile_envs)
    _, compile_s = compile_timed(step, keys, state, jnp.zeros(compile_envs, jnp.int32), params)

    def rollout(state: Any, key: jax.Array) -> jax.Array:
        def body(s: Any, k: jax.Array) -> tuple[Any, jax.Array]:
            actions = jnp.zeros(run_envs, jnp.int32)
            _, s, reward, *_ = step(jax.random.split(k, run_envs), s, actions, params)
            return s, reward.sum()

        return jax.lax.scan(body, state, jax.random.split(key, steps))[1]

    _, state = batch(run_envs)
    compiled, _ = compile_timed(rollout, state, jax.random.key(1))
    time_call(compiled, state, jax.random.key(1))  # warm-up
    run_s = [time_call(compiled, state, jax.random.key(2 + i)) for i in range(repeats)]
    return {"step_compile_s": compile_s, "rollout_ms": 1000 * statistics.median(run_s)}


def variant_flags(variant: str) -> dict[str, object]:
    """The XLA flags of a variant name such as ``O1`` or ``O0-legacy`` (see the module docstring)."""
    match = VARIANT_PATTERN.fullmatch(variant)
    if match is None:
        raise ValueError(f"variant {variant!r} is not O0-O3 with an optional -legacy")
    flags: dict[str, object] = {LLVM_LEVEL_FLAG: int(match.group(1))}
    if match.group(2):
        flags[FUSION_EMITTERS_FLAG] = "false"
    return flags


def variant_list(text: str) -> list[str]:
    """``argparse`` type: comma-separated variant names."""
    variants = [part.strip() for part in text.split(",") if part.strip()]
    for variant in variants:
        try:
            variant_flags(variant)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
    if not variants:
        raise argparse.ArgumentTypeError("expected at least one variant")
    return variants


def run(args: argparse.Namespace) -> dict[str, Any]:
    """One child process per variant and round, in the order given."""
    rows = []
    child = [
        sys.executable,
        "-m",
        "benchmarks.compile_flags",
        "--child",
        f"--compile-envs={args.compile_envs}",
        f"--run-envs={args.run_envs}",
        f"--steps={args.steps}",
        f"--repeats={args.repeats}",
    ]
    for _ in range(args.rounds):
        for variant in args.variants:
            # Cold compiles: a persistent cache named by the environment would turn them into reads.
            env = {**with_xla_flags(variant_flags(variant)), "JAX_PLATFORMS": "cpu"}
            env.pop(JAX_CACHE_VARIABLE, None)
            done = run_child(child, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
            if done.returncode != 0:
                last = (done.stderr.strip().splitlines() or ["no message"])[-1]
                fail(f"variant {variant} failed (exit {done.returncode}): {last}", PROG)
            rows.append({"variant": variant, **json.loads(done.stdout.strip().splitlines()[-1])})
            print(f"{variant}: {rows[-1]}", file=sys.stderr, flush=True)
    return {
        "compile_envs": args.compile_envs,
        "run_envs": args.run_envs,
        "steps": args.steps,
        "rows": rows,
        "machine": machine_info(),
    }


def to_markdown(payload: dict[str, Any]) -> str:
    """The table: per variant, compile seconds and run milliseconds, each against the first row's."""
    first = payload["rows"][0]
    rows = [
        [
            row["variant"],
            f"{row['step_compile_s']:.2f}",
            f"{row['step_compile_s'] / first['step_compile_s']:.2f}x",
            f"{row['rollout_ms']:.1f}",
            f"{row['rollout_ms'] / first['rollout_ms']:.2f}x",
        ]
        for row in payload["rows"]
    ]
    headers = [
        "variant",
        f"compile s, step of {payload['compile_envs']} envs",
        "vs first",
        f"run ms, {payload['steps']} steps of {payload['run_envs']} envs",
        "vs first",
    ]
    table = markdown_table(headers, rows)
    legend = "`O<n>`: `--xla_backend_optimization_level=n`; `-legacy`: `--xla_cpu_use_fusion_emitters=false`."
    return f"# XLA compile settings vs the env\n\n{table}\n\n{legend}\n\nMachine: {payload['machine']}\n"


def main(argv: list[str] | None = None) -> None:
    """Parse, then run every variant (or, with ``--child``, measure this process's settings)."""
    parser = OneLineArgumentParser(prog=PROG, description=summary(__doc__))
    parser.add_argument(
        "--variants",
        type=variant_list,
        default=["O3", "O1", "O0", "O3-legacy", "O0-legacy"],
        help="comma-separated O0-O3, each with an optional -legacy",
    )
    parser.add_argument(
        "--rounds", type=bounded(int, 1, 100), default=1, help="sweeps over the variants, in turns"
    )
    parser.add_argument(
        "--compile-envs", type=bounded(int, 1, 1 << 16), default=32, help="envs of the compiled step"
    )
    parser.add_argument(
        "--run-envs", type=bounded(int, 1, 1 << 20), default=1024, help="envs of the timed run"
    )
    parser.add_argument("--steps", type=bounded(int, 1, 10_000), default=20, help="env steps per timed call")
    parser.add_argument("--repeats", type=bounded(int, 1, 1000), default=5, help="timed calls per variant")
    add_out_flags(parser, DEFAULT_OUT)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.compile_envs, args.run_envs, args.steps, args.repeats)))
        return
    check_report_flags(args, parser.prog)
    report(args, run, to_markdown, PROG)


if __name__ == "__main__":
    run_command(main, PROG)

"""Scaling: env-only and training steps/s vs num_envs and vs device count, compile time, peak memory.

    python -m benchmarks.scaling [--devices 1,2,4,8] [--env-num-envs 4096] [--train-num-envs 1024]
        [--steps 0] [--repeats 3] [--python-seconds 2] [--row-timeout 600] [--budget-s 0] [--rounds 2]
        [--no-one-core] [--out benchmarks/results/scaling_cpu.json] [--overwrite]
    python -m benchmarks.scaling --devices native ...   # the devices JAX finds (GPUs), no fake ones

Each row runs in its own process (``benchmarks/scaling_worker.py``), since the device count is
fixed when JAX starts: ``--devices 1,2,4,8`` sets ``--xla_force_host_platform_device_count`` per row
(fake CPU devices sharing this machine's cores), and ``native`` leaves the platform alone (one GPU,
or all of them). With fake devices, env-only also runs on one device in a process pinned to one
core (``--one-core``, Linux): XLA:CPU already spreads one device's large operations over the cores,
so that row says how much of the machine is left for more devices to use. The whole sweep runs
``--rounds`` times in turns (1, 2, 4, 8, 1, 2, ... devices), so a change in the machine's load hits
every device count alike, and a row reports the median over its rounds. Rows run one at a time; a
row that fails (out of memory, a timeout) is recorded with its error and the others go on. The
plain-Python single-job loop is timed in this process, so the env's speed-up over it is measured
on the same machine. Writes JSON and a Markdown table beside it, both naming the machine (CPU model
and count, accelerator, jax/jaxlib versions, commit).

Speed is a property of the machine and its load: rerun this on an idle machine before quoting it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.children import check_batches_split, run_child
from benchmarks.common import (
    REPO_ROOT,
    add_out_flags,
    check_report_flags,
    compilation_cache_note,
    format_rate,
    machine_info,
    report,
)
from slamorl_jax.cli_args import (
    OneLineArgumentParser,
    bounded,
    first_line,
    positive_int_list,
    run_command,
    summary,
)
from slamorl_jax.markdown import markdown_table
from slamorl_jax.xla_flags import fake_cpu_devices_env

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "scaling_cpu.json"
TARGET_TWO_DEVICES = 1.3  # env-only, 2 fake devices vs 1 (issue 10)
TARGET_VS_PYTHON = 100.0  # env-only at 4096 envs vs the Python loop, this CPU (issue 10)
BUDGET_SKIP = "skipped: --budget-s"  # starts the error of a row --budget-s left unrun (shown as such)


PROG = "python -m benchmarks.scaling"


def device_list(text: str) -> list[int | str]:
    """``argparse`` type: ``native`` or comma-separated positive device counts."""
    return ["native"] if text == "native" else list(positive_int_list(text))


def cpu_model() -> str | None:
    """The CPU's model name from ``/proc/cpuinfo`` (Linux), else ``None``."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def row_env(devices: int | str) -> dict[str, str]:
    """The environment of a row's process: ``devices`` fake CPU devices, or the platform as it is."""
    return dict(os.environ) if devices == "native" else fake_cpu_devices_env(devices)


def pin_to_one_core() -> None:
    """In a child process before it starts: run on this machine's first usable core only (Linux)."""
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def row_identity(kind: str, devices: int | str, num_envs: int, one_core: bool) -> dict[str, Any]:
    """What a row is, before it is measured (:func:`key` reads it back)."""
    return {"kind": kind, "requested_devices": devices, "num_envs": num_envs, "one_core": one_core}


def run_row(
    kind: str, devices: int | str, num_envs: int, args: argparse.Namespace, one_core: bool = False
) -> dict[str, Any]:
    """One worker process's record, or the row with its error; ``one_core`` pins the process to one
    core (the reference for how much of the machine one device already uses)."""
    command = [
        sys.executable,
        "-m",
        "benchmarks.scaling_worker",
        f"--kind={kind}",
        f"--num-envs={num_envs}",
        *([f"--steps={args.steps}"] if args.steps else []),
        f"--repeats={args.repeats}",
    ]
    row = row_identity(kind, devices, num_envs, one_core)
    try:
        done = run_child(
            command,
            cwd=REPO_ROOT,
            env=row_env(devices),
            capture_output=True,
            text=True,
            timeout=args.row_timeout,
            preexec_fn=pin_to_one_core if one_core else None,
        )
    except subprocess.TimeoutExpired:
        return {**row, "error": f"timed out after {args.row_timeout:g} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {**row, "error": f"exit {done.returncode}: {tail[:300]}"}
    record = {**row, **json.loads(lines[-1])}
    print(
        f"{kind} devices={record['devices']}{' (one core)' if one_core else ''} num_envs={num_envs}: "
        f"{format_rate(record['steps_per_s_median'])} steps/s",
        file=sys.stderr,
        flush=True,
    )
    return record


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every row ``--rounds`` times in turns (until ``--budget-s`` runs out), the Python loop and the
    machine; each row's figures are the median over its rounds."""
    start = time.monotonic()
    raw = []
    plan = [("env", n) for n in args.env_num_envs] + [("train", n) for n in args.train_num_envs]
    sweep = [(devices, kind, num_envs, False) for devices in args.devices for kind, num_envs in plan]
    if args.one_core and args.devices != ["native"]:
        sweep = [(1, "env", num_envs, True) for num_envs in args.env_num_envs] + sweep
    for round_index in range(args.rounds):
        for devices, kind, num_envs, one_core in sweep:
            if args.budget_s and time.monotonic() - start > args.budget_s:
                error = f"{BUDGET_SKIP}={args.budget_s:g} spent"
                row = {**row_identity(kind, devices, num_envs, one_core), "error": error}
            else:
                row = run_row(kind, devices, num_envs, args, one_core)
            raw.append({**row, "round": round_index})
    rows = [combine([r for r in raw if key(r) == k]) for k in dict.fromkeys(key(r) for r in raw)]
    python = None
    if args.python_seconds > 0:
        from benchmarks.env_throughput import measure_python

        python = measure_python("mixed", args.python_seconds, 3)
    import jaxlib

    machine = machine_info(
        cpu_model=cpu_model(),
        jaxlib_version=jaxlib.__version__,
        load_average_at_end=os.getloadavg(),
    )
    return {
        "machine": machine,
        "rows": rows,
        "rounds": raw,
        "python_loop": python,
        "settings": vars_of(args),
        "learner": learner_settings(),
    }


# Payloads written before the learner's settings were recorded ran the four-pass default of 22166f8.
FOUR_PASS_LEARNER = {
    "hidden_sizes": [128, 128],
    "rollout_length": 16,
    "update_epochs": 4,
    "num_minibatches": 4,
}


def learner_settings() -> dict[str, Any]:
    """The default learner's settings the train rows run (``scaling_worker`` uses ``TrainConfig()``)."""
    from slamorl_jax.agent.config import TrainConfig

    c = TrainConfig()
    return {
        "hidden_sizes": list(c.hidden_sizes),
        "rollout_length": c.rollout_length,
        "update_epochs": c.update_epochs,
        "num_minibatches": c.num_minibatches,
    }


def key(row: dict[str, Any]) -> tuple:
    """What identifies a row across rounds."""
    return row["kind"], row["requested_devices"], row["num_envs"], row.get("one_core", False)


def combine(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One row from its rounds: median rates and compile time, best of the best rates, the largest
    memory; an error only when every round failed."""
    good = [r for r in rounds if "error" not in r]
    if not good:
        return rounds[0]
    out = dict(good[0])
    out.pop("round", None)
    out["steps_per_s_median"] = statistics.median(r["steps_per_s_median"] for r in good)
    out["steps_per_s_best"] = max(r["steps_per_s_best"] for r in good)
    out["compile_s"] = statistics.median(r["compile_s"] for r in good)
    for name in ("device_peak_bytes", "host_peak_rss_bytes"):
        values = [r[name] for r in good if r.get(name) is not None]
        out[name] = max(values) if values else None
    out["rounds_ok"] = len(good)
    return out


def vars_of(args: argparse.Namespace) -> dict[str, Any]:
    """The command's settings, JSON-ready (not ``staged``, ``common.report``'s list of side files)."""
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k != "staged"}


def speedups(rows: list[dict[str, Any]], one_core: bool = False) -> dict[tuple, float]:
    """Each row's median steps/s over the 1-device row of the same kind and num_envs (with
    ``one_core``: over the 1-device row pinned to one core), keyed by :func:`key`."""
    base = {
        (r["kind"], r["num_envs"]): r["steps_per_s_median"]
        for r in rows
        if "error" not in r and r.get("devices") == 1 and r.get("one_core", False) == one_core
    }
    return {
        key(r): r["steps_per_s_median"] / base[(r["kind"], r["num_envs"])]
        for r in rows
        if "error" not in r and (r["kind"], r["num_envs"]) in base
    }


def to_markdown(payload: dict[str, Any]) -> str:
    """The table, the machine and the targets."""
    m = payload["machine"]
    learner = payload.get("learner", FOUR_PASS_LEARNER)
    python = payload["python_loop"]
    python_rate = python["steps_per_s_median"] if python else None
    ratios, core_ratios = speedups(payload["rows"]), speedups(payload["rows"], one_core=True)
    table = []
    for r in payload["rows"]:
        shown = r.get("devices", r["requested_devices"])  # a failed row has only the requested count
        label = f"{shown} (one core)" if r.get("one_core") else shown
        if "error" in r:
            reason = first_line(r["error"], 80).replace("|", "/")  # kept inside its table cell
            skipped = r["error"].startswith(BUDGET_SKIP)
            outcome = "not run (--budget-s spent)" if skipped else f"failed: {reason}"
            table.append([r["kind"], label, f"{r['num_envs']:,}", outcome, "-", "-", "-", "-", "-"])
            continue
        gib = (r["device_peak_bytes"] or r["host_peak_rss_bytes"]) / 2**30
        where = "device" if r["device_peak_bytes"] else "host RSS"
        ratio = None if r.get("one_core") else ratios.get(key(r))
        core_ratio = core_ratios.get(key(r))
        vs_python = (
            f"{r['steps_per_s_median'] / python_rate:,.0f}x" if python_rate and r["kind"] == "env" else "-"
        )
        table.append(
            [
                r["kind"],
                label,
                f"{r['num_envs']:,}",
                f"{format_rate(r['steps_per_s_median'])} / {format_rate(r['steps_per_s_best'])}",
                f"{ratio:.2f}x" if ratio is not None else "-",
                f"{core_ratio:.2f}x" if core_ratio is not None else "-",
                vs_python,
                f"{r['compile_s']:.1f}",
                f"{gib:.2f} ({where})",
            ]
        )
    headers = [
        "kind",
        "devices",
        "num_envs",
        "steps/s (median / best)",
        "vs 1 device",
        "vs 1 device on one core",
        "vs Python loop",
        "compile s",
        "peak memory GiB",
    ]
    lines = [
        "# Scaling: steps/s vs devices and num_envs",
        "",
        f"Machine: {m.get('cpu_model') or m['processor']}, {m['cpu_count']} CPUs "
        f"({m['usable_cpus']} usable); "
        f"backend {m['backend']} ({m['device']}); jax {m['jax_version']}, jaxlib {m['jaxlib_version']}; "
        f"commit {m['git_commit']}; {m['timestamp_utc']}; load average at the end "
        f"{', '.join(f'{x:.1f}' for x in m['load_average_at_end'])}." + compilation_cache_note(m),
        "",
        markdown_table(headers, table),
        "",
        "env = random actions through reset + scan of steps (the env_throughput harness, env batch "
        "split over the devices); train = one chunk of the default learner (PPO, "
        f"{'-'.join(str(h) for h in learner['hidden_sizes'])} networks, rollout {learner['rollout_length']}, "
        f"{learner['update_epochs']} epochs x {learner['num_minibatches']} minibatches) at that num_envs. "
        "Fake CPU devices share the machine's cores. Peak memory on CPU is the worker process's peak "
        'resident set (JAX included). "one core": the worker process pinned to one core, a '
        "reference for how much of the machine one device already uses (XLA:CPU spreads a "
        "device's large operations over the cores).",
    ]
    if python_rate:
        lines += ["", f"Plain-Python single-job loop: {format_rate(python_rate)} steps/s (median)."]
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (one-line errors, exit 2)."""
    parser = OneLineArgumentParser(prog=PROG, description=summary(__doc__))
    parser.add_argument(
        "--devices",
        type=device_list,
        default=[1, 2, 4, 8],
        help="device counts (fake CPU devices), or native",
    )
    parser.add_argument("--env-num-envs", type=positive_int_list, default=[4096], help="env-only batch sizes")
    parser.add_argument(
        "--train-num-envs", type=positive_int_list, default=[1024], help="training batch sizes"
    )
    parser.add_argument(
        "--steps",
        type=bounded(int, 0, 100_000),
        default=0,
        help="env steps per call (0: about 2**20 env steps)",
    )
    parser.add_argument("--repeats", type=bounded(int, 1, 100), default=3, help="timed calls per row")
    parser.add_argument(
        "--python-seconds", type=bounded(float, 0, 600), default=2.0, help="seconds of the plain-Python loop"
    )
    parser.add_argument(
        "--row-timeout", type=bounded(float, 1, 3600), default=600.0, help="seconds before a row is stopped"
    )
    parser.add_argument(
        "--budget-s", type=bounded(float, 0, 86400), default=0.0, help="start no row after this (0: no limit)"
    )
    parser.add_argument(
        "--rounds", type=bounded(int, 1, 20), default=2, help="sweeps in turns; each row's median is reported"
    )
    parser.add_argument(
        "--one-core",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run env-only on 1 device pinned to one core (Linux; not with --devices native)",
    )
    add_out_flags(parser, DEFAULT_OUT)
    args = parser.parse_args(argv)
    for flag, batches in (("--env-num-envs", args.env_num_envs), ("--train-num-envs", args.train_num_envs)):
        check_batches_split(args.devices, batches, parser.prog, {"--num_envs": flag})
    check_report_flags(args, parser.prog)
    return args


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and write its report."""
    report(parse_args(argv), run, to_markdown, PROG)


if __name__ == "__main__":
    run_command(main, PROG)

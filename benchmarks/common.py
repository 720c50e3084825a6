"""What the benchmarks share besides their timing (``timing.py``) and child processes
(``children.py``): machine facts for the report, JSON + Markdown output, and the flags every
benchmark takes (the one-line argument parser is ``slamorl_jax.cli_args``).

* Every benchmark that writes a report takes ``--out`` (:func:`add_out_flags`; its default, under
  ``benchmarks/results/`` of this checkout whatever the working directory, shown in ``--help``) and
  ``--overwrite``: a report already at ``--out`` (a committed result included) is refused in one line
  with status 2, before anything is measured, unless ``--overwrite`` is given.
* A persistent compilation cache is left as the environment sets it (``JAX_COMPILATION_CACHE_DIR``,
  ``slamorl_jax.compilation_cache.JAX_CACHE_VARIABLE``), not turned off: :func:`machine_info` records
  it as ``compilation_cache`` (the folder, or ``None``), and the reports that give compile times say
  beside them when one was active (:func:`compilation_cache_note`): with one, a compile time is that of
  reading or writing the cache, not of a cold compile.
* A ``--checkpoint`` defaults to the shipped policy and is resolved as the package's commands resolve
  it (:func:`resolve_checkpoints`, ``slamorl_jax.shipped_policy.resolve_checkpoint``), so a benchmark
  run from another folder of a checkout finds it.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from slamorl_jax.atomic_files import publish_staged, stage_text, staging
from slamorl_jax.cli_args import (
    OneLineArgumentParser,
    bounded,
    fail,
    file_path,
    first_line,
    seed_value,
    summary,
)
from slamorl_jax.json_output import dumps_strict
from slamorl_jax.run_dirs import RunDirError, check_dir
from slamorl_jax.shipped_policy import SHIPPED_POLICY, resolve_checkpoint

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = Path(__file__).resolve().parent / "results"  # the committed reports, the default --out's folder
NAME_MAX = 255  # the longest file name (bytes) of common file systems (ext4, XFS, APFS, NTFS)


#: What a report's result depends on, for its commit's ``-dirty`` (a README edit is not code).
CODE_PATHS = ("slamorl_jax", "benchmarks", ":(exclude)benchmarks/results", "pyproject.toml", "setup.py")


def _git_commit() -> str | None:
    """The checkout's commit (short), ``-dirty`` after it when the tracked code differs from it (the
    package, the benchmarks or the build files: a result of code that no commit holds), as ``git
    describe --dirty`` writes it; ``None`` outside a git checkout."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=5
        )
        commit = out.stdout.strip()
        if not commit:
            return None
        diff = ["git", "diff", "--quiet", "HEAD", "--", *CODE_PATHS]
        changed = subprocess.run(diff, cwd=REPO_ROOT, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{commit}-dirty" if changed.returncode == 1 else commit


def machine_info(**extra: Any) -> dict[str, Any]:
    """Facts that make a benchmark result interpretable: versions, backend, device, CPUs."""
    device = jax.devices()[0]
    try:
        usable_cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        usable_cpus = os.cpu_count()
    return {
        "jax_version": jax.__version__,
        "numpy_version": np.__version__,
        "python_version": platform.python_version(),
        "backend": jax.default_backend(),
        "device": str(getattr(device, "device_kind", device.platform)),
        "device_count": jax.device_count(),
        "cpu_count": os.cpu_count(),
        "usable_cpus": usable_cpus,
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "git_commit": _git_commit(),
        "timestamp_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "compilation_cache": active_compilation_cache(),
        **extra,
    }


def active_compilation_cache() -> str | None:
    """The folder of JAX's persistent compilation cache when one is on in this process (set by
    ``JAX_COMPILATION_CACHE_DIR`` or ``jax_compilation_cache_dir``), else ``None``. Children that
    measure inherit the variable, so the parent's answer is theirs."""
    directory = jax.config.jax_compilation_cache_dir
    return str(directory) if directory and jax.config.jax_enable_compilation_cache else None


def compilation_cache_note(machine: Mapping[str, Any]) -> str:
    """A sentence for a report that gives compile times, when ``machine`` (:func:`machine_info`) ran
    with a persistent compilation cache; ``""`` without one (and for reports from before it was
    recorded)."""
    directory = machine.get("compilation_cache")
    if not directory:
        return ""
    return (
        f" Compile times were taken with JAX's persistent compilation cache on ({directory}): they are "
        "those of reading or writing it, not of cold compiles (unset JAX_COMPILATION_CACHE_DIR to time "
        "those)."
    )


def available_memory_bytes() -> int | None:
    """Free memory of the default device (accelerator memory, or the host's ``MemAvailable``)."""
    device = jax.devices()[0]
    if device.platform != "cpu":
        stats = device.memory_stats() or {}
        if "bytes_limit" in stats:
            return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))
        return None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def format_rate(x: float | None) -> str:
    """A rate with a metric suffix: 1234567 -> '1.23M'."""
    if x is None:
        return "-"
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{suffix}"
    return f"{x:.3g}"


def policy_of(payload: Mapping[str, Any]) -> str:
    """The policy a report measured, for its Markdown: ``--checkpoint`` as given and the commit it
    was run on (a path such as ``checkpoints/default`` names another policy after a re-made default)."""
    commit = payload.get("machine", {}).get("git_commit")
    return f"`{payload['checkpoint']}`" + (f" (run on {commit})" if commit else "")


def write_report(
    out: Path,
    payload: Mapping[str, Any],
    markdown: str,
    overwrite: bool = False,
    staged: list[tuple[Path, Path]] | None = None,
) -> tuple[Path, Path]:
    """Write ``payload`` as JSON to ``out`` and ``markdown`` beside it (same name, ``.md``).

    Both are written and flushed to temporary files first (``atomic_files.stage_text``) and moved
    into place together only when both are written, with the files a run staged beside them
    (``staged``, an ``atomic_files.staging`` list the caller removes): a failed write (a full disk)
    or a Ctrl-C leaves the previous report whole and no temporary file behind. Without ``overwrite``
    none replaces a file (``FileExistsError``; one another run wrote after :func:`check_out_path`
    passed)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    md = out.with_suffix(".md")
    texts = {out: dumps_strict(payload, indent=2) + "\n", md: markdown + "\n"}
    with staging() as own:
        for path, text in texts.items():
            own.append((stage_text(path, text), path))
        publish_staged([*(staged or []), *own], replace=overwrite)
    return out, md


def add_out_flags(parser: argparse.ArgumentParser, default: Path | None, shown: str | None = None) -> None:
    """A benchmark's ``--out`` (the JSON report, its Markdown twin beside it; default ``default``,
    shown in ``--help``; required when ``default`` and ``shown`` are ``None``) and ``--overwrite``
    (replace a report already there; :func:`check_out_path`). ``shown``: the default as ``--help``
    gives it when it depends on other flags; ``--out`` is then ``None`` unless given, and the
    benchmark picks the path."""
    if default is None and shown is None:
        parser.add_argument(
            "--out", type=file_path, required=True, help="JSON report (Markdown written beside it)"
        )
    else:
        parser.add_argument(
            "--out",
            type=file_path,
            default=default,
            help=f"JSON report, Markdown written beside it (default: {shown or '%(default)s'})",
        )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the report already at --out (without it, one there is refused before the run)",
    )


def check_out_path(out: Path, prog: str, overwrite: bool = False) -> None:
    """Exit 2 with one line unless the report can be written: ``out`` ends in ``.json``, its name
    fits a file system's 255 bytes, neither it nor its Markdown twin is a folder, the twin is not a
    file of the user's (a Markdown file with no JSON report beside it: ``--out=README.json`` would
    replace ``README.md``), no report is there already unless ``overwrite`` (``--overwrite``: a rerun
    replaced committed results silently), and its folder exists writable or can be created (checked
    before a benchmark runs, so a long run is not lost to a bad ``--out``)."""
    if out.suffix != ".json":
        fail(f"--out must end in .json, got {str(out)!r}", prog)
    if len(os.fsencode(out.name)) > NAME_MAX:
        fail(f"--out {str(out)!r}: its file name is longer than {NAME_MAX} bytes", prog)
    try:
        check_dir("--out", out.parent)
        folder = next((path for path in (out, out.with_suffix(".md")) if path.is_dir()), None)
    except RunDirError as error:
        fail(str(error), prog)
    except OSError as error:  # a name too long to look up
        fail(f"--out {str(out)!r}: {first_line(error)}", prog)
    if folder is not None:
        fail(f"--out {str(out)!r}: {str(folder)!r} is a directory", prog)
    twin = out.with_suffix(".md")
    if twin.exists() and not out.exists():
        fail(
            f"--out {str(out)!r} would replace {str(twin)!r}, which is not its report; choose another --out",
            prog,
        )
    if out.exists() and not overwrite:
        fail(f"--out {str(out)!r}: a report is there already; pass --overwrite to replace it", prog)


def check_report_flags(args: argparse.Namespace, prog: str) -> None:
    """:func:`check_out_path` of a benchmark's parsed ``--out`` and ``--overwrite``
    (:func:`add_out_flags`)."""
    check_out_path(args.out, prog, args.overwrite)


def resolve_checkpoints(value: str, prog: str, several: bool = False) -> str:
    """A ``--checkpoint`` as the package's commands take it (``shipped_policy.resolve_checkpoint``:
    the default finds the checkout's shipped policy from any working directory); with ``several``, each
    of a comma-separated list, none named twice (a spread over policies would count one twice). One
    that does not exist exits 2 with one line, before the run."""
    paths = [path for path in value.split(",") if path] if several else [value]
    if not paths:
        fail("--checkpoint names no policy", prog)
    try:
        resolved = [resolve_checkpoint("--checkpoint", path) for path in paths]
    except ValueError as error:
        fail(str(error), prog)
    seen: dict[Path, str] = {}
    for given, path in zip(paths, resolved, strict=True):
        if (key := Path(path).resolve()) in seen:
            fail(f"--checkpoint names one policy twice ({seen[key]} and {given})", prog)
        seen[key] = given
    return ",".join(resolved)


def check_checkpoint(args: argparse.Namespace, prog: str) -> None:
    """A :func:`parse_and_report` check: the benchmark's ``--checkpoint`` resolved
    (:func:`resolve_checkpoints`; one that does not exist exits 2 with one line)."""
    args.checkpoint = resolve_checkpoints(args.checkpoint, prog)


def add_checkpoint_flag(parser: argparse.ArgumentParser, what: str = "the trained policy") -> None:
    """A benchmark's ``--checkpoint``, default the shipped policy (resolve it with
    :func:`resolve_checkpoints`)."""
    parser.add_argument("--checkpoint", default=SHIPPED_POLICY, help=f"{what} (default: %(default)s)")


def in_own_flags(message: str, renamed: Mapping[str, str] | None = None) -> str:
    """``message`` of the package's (which names ``train``'s flags, ``--num_envs``) in a benchmark's
    flag names: each ``--a_b`` as ``renamed`` maps it, else ``--a-b``."""
    renamed = renamed or {}

    def own(match: re.Match[str]) -> str:
        flag = match.group(0)
        return renamed.get(flag, flag.replace("_", "-"))

    return re.sub(r"--[a-z0-9]+(?:_[a-z0-9]+)+", own, message)


def report(
    args: argparse.Namespace,
    run: Callable[[argparse.Namespace], dict[str, Any]],
    to_markdown: Callable[[dict[str, Any]], str],
    prog: str,
) -> None:
    """Run a benchmark, print its Markdown table and write JSON + Markdown to ``args.out``
    (:func:`publish_report`); a checkpoint that cannot be loaded exits with code 2 and one line.
    Files the run writes beside its report (``step_profile``'s kept trace) it stages in
    ``args.staged`` (``atomic_files.temporary_beside``): they are published with the report, or
    removed with it when the run or the write fails."""
    with staging() as staged:
        args.staged = staged
        try:
            payload = run(args)
        except ValueError as error:
            # Imported only here: a benchmark that loads no policy does not pay for orbax at start-up
            # (a CheckpointError means the module is loaded already).
            from slamorl_jax.checkpoint import CheckpointError

            if isinstance(error, CheckpointError):
                fail(str(error), prog)
            raise
        publish_report(args, payload, to_markdown(payload), prog)


def publish_report(args: argparse.Namespace, payload: Mapping[str, Any], markdown: str, prog: str) -> None:
    """Print ``markdown`` and write the report to ``args.out`` with the files staged in
    ``args.staged`` (if any), replacing a file only with ``args.overwrite``: a report another run
    wrote there meanwhile ends the command with one line and exit 2, the table printed above it."""
    print(markdown)
    try:
        json_path, md_path = write_report(
            args.out, payload, markdown, overwrite=args.overwrite, staged=getattr(args, "staged", None)
        )
    except FileExistsError as error:
        made = error.filename2 or error.filename  # os.link names the new name second
        fail(f"--out {str(args.out)!r}: {made} appeared while this ran; pass --overwrite", prog)
    print(f"\nwrote {json_path} and {md_path}", file=sys.stderr)


def parse_and_report(
    parser: argparse.ArgumentParser,
    argv: list[str] | None,
    default_out: Path | None,
    run: Callable[[argparse.Namespace], dict[str, Any]],
    to_markdown: Callable[[dict[str, Any]], str],
    check: Callable[[argparse.Namespace, str], None] | None = None,
    shown_out: str | None = None,
) -> None:
    """Add ``--out`` (default ``default_out``, or as ``shown_out`` says) and ``--overwrite`` to a
    benchmark's ``parser`` (:func:`add_out_flags`), parse ``argv``, run ``check(args, prog)`` (the
    benchmark's own checks, which may pick ``args.out``), check the output path (exit 2 with one
    line) and :func:`report`."""
    add_out_flags(parser, default_out, shown_out)
    args = parser.parse_args(argv)
    if check is not None:
        check(args, parser.prog)
    check_report_flags(args, parser.prog)

    report(args, run, to_markdown, parser.prog)


def add_job_flags(parser: argparse.ArgumentParser, episodes: int, seed: int = 0, most: int = 1 << 20) -> None:
    """A benchmark's ``--episodes`` (fresh jobs per scenario, default ``episodes``, at most
    ``most``) and ``--seed`` (the jobs' seed, default ``seed``)."""
    parser.add_argument("--episodes", type=bounded(int, 1, most), default=episodes, help="jobs per scenario")
    parser.add_argument("--seed", type=seed_value, default=seed, help="job seed")


def policy_benchmark_payload(args: argparse.Namespace, rows: dict[str, Any]) -> dict[str, Any]:
    """What a :func:`policy_benchmark_main` benchmark reports: its options, ``rows`` and the machine."""
    return {
        "episodes": args.episodes,
        "seed": args.seed,
        "checkpoint": args.checkpoint,
        "rows": rows,
        "machine": machine_info(),
    }


def policy_benchmark_main(
    module: str,
    doc: str | None,
    argv: list[str] | None,
    episodes: int,
    run: Callable[[argparse.Namespace], dict[str, Any]],
    to_markdown: Callable[[dict[str, Any]], str],
    several: bool = False,
) -> None:
    """``main`` of a benchmark that runs a trained policy on fresh jobs: ``--episodes`` (default
    ``episodes``), ``--seed``, ``--checkpoint`` (default the shipped policy; with ``several``, a
    comma-separated list; :func:`resolve_checkpoints`) and ``--out`` (default
    ``benchmarks/results/<name>.json`` of this checkout), then :func:`parse_and_report`; a checkpoint
    that is missing or cannot be loaded exits with code 2 and one line."""
    name = module.rsplit(".", 1)[-1]
    parser = OneLineArgumentParser(prog=f"python -m {module}", description=summary(doc))
    add_job_flags(parser, episodes=episodes, most=1 << 16)
    add_checkpoint_flag(parser, "the trained policies, comma-separated" if several else "the trained policy")

    def check(args: argparse.Namespace, prog: str) -> None:
        args.checkpoint = resolve_checkpoints(args.checkpoint, prog, several)

    parse_and_report(parser, argv, RESULTS_DIR / f"{name}.json", run, to_markdown, check)


def random_action_rollout(
    env: Any, params: Any, num_envs: int, steps: int, key: jax.Array
) -> tuple[Any, jax.Array]:
    """``num_envs`` fresh jobs stepped ``steps`` times with uniformly random actions by the env's
    ``step_batch`` (the trainer's step, auto-reset included), in one compiled scan: ``(the final
    states, the fraction of jobs that ended at each step [steps])``."""

    @jax.jit
    def rollout(key: jax.Array) -> tuple[Any, jax.Array]:
        reset_key, steps_key = jax.random.split(key)
        _, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(reset_key, num_envs), params)

        def body(state: Any, key: jax.Array) -> tuple[Any, jax.Array]:
            action_key, step_key = jax.random.split(key)
            actions = jax.random.randint(action_key, (num_envs,), 0, env.num_actions)
            _, state, _, terminated, truncated, _ = env.step_batch(
                jax.random.split(step_key, num_envs), state, actions, params
            )
            return state, jnp.mean(jnp.logical_or(terminated, truncated))

        return jax.lax.scan(body, state, jax.random.split(steps_key, steps))

    return rollout(key)

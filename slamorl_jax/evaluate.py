"""Evaluate a trained policy: ``python -m slamorl_jax.evaluate [--checkpoint=checkpoints/default]``.

Runs the named scenarios on fresh jobs of every workload of the policy's catalogue (the shipped one's
13, a ``train --catalog`` run's own; ``--catalog``: another's) over several seeds, vectorised, for the
policy, its ablations (cold start, static weights), the policy started from a history store
(``--history``), other trained checkpoints (``--compare``, e.g. a
run trained with static weights), the static baselines (request, min, max), the reference code's
heuristic, the best static allocation in hindsight (an oracle that knows each job's hidden true
constants) and the best walk with the paper's 9 moves in hindsight (the anchor a ``paper`` policy is
judged against; ``evaluation/reachable.py``), all on the same jobs with the same noise; computes the
paper's headline figures against each static baseline and the front over preference vectors
(hypervolume, expected utility). Writes ``evaluation.json``, ``evaluation.md``, ``evaluation.csv``
and, with matplotlib installed (``pip install 'slamorl_jax[plot]'``), ``scenarios.png`` and
``front.png`` into ``--out_dir``, and prints the Markdown. Bad input exits with code 2 and one line;
existing results are never overwritten unless ``--overwrite`` is given.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from slamorl_jax.cli_start import program_name, require_backend  # first of ours: quiet Ctrl-C

require_backend()  # a platform the machine lacks: one line, before an import touches a device
# ruff: noqa: E402  (the imports below may start JAX's backend)
from slamorl_jax import run_dirs
from slamorl_jax.cli_args import (
    OneLineArgumentParser,
    add_hold_below_argument,
    add_relocate_payback_argument,
    bounded,
    cleanup_on_interrupt,
    fail,
    run_command,
    seed_value,
    summary,
)
from slamorl_jax.compilation_cache import add_cache_argument, start_cache
from slamorl_jax.env.scenarios import DEFAULT_FRONT_SCENARIO, EVALUATION_SCENARIOS, SCENARIOS
from slamorl_jax.shipped_policy import SHIPPED_POLICY, resolve_checkpoint

if TYPE_CHECKING:
    from slamorl_jax.env.catalog import Catalog
    from slamorl_jax.history.lookup import HistoryStart
    from slamorl_jax.policy_checkpoint import LoadedPolicy

PROG = program_name("slamorl_jax.evaluate")  # as started: -m or its script
OUTPUT_NAMES = ("evaluation.json", "evaluation.md", "evaluation.csv", "scenarios.png", "front.png")


def scenario_list(text: str) -> tuple[str, ...]:
    """``argparse`` type: comma-separated scenario names."""
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [n for n in names if n not in SCENARIOS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(
            f"unknown scenario(s) {', '.join(unknown) or text!r}; choose from: {', '.join(SCENARIOS)}"
        )
    if twice := sorted({n for n in names if names.count(n) > 1}):
        raise argparse.ArgumentTypeError(f"scenario {twice[0]!r} given twice")
    return names


def out_dir_path(text: str) -> Path:
    """``argparse`` type: a folder path; empty (which would read as the current folder) is refused."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must name a folder (it was empty)")
    return Path(text)


def front_points(text: str) -> int:
    """``argparse`` type: 0 (no front) or 2 to 101 preference points."""
    value = bounded(int, 0, 101)(text)
    if value == 1:
        raise argparse.ArgumentTypeError("must be 0 (no front) or at least 2")
    return value


def named_paths(text: str) -> dict[str, str]:
    """``argparse`` type: ``name=path[,name=path...]`` (unique names of letters, digits, ``_``, ``.``
    and ``-``, which every report writes as they are: a ``|`` split a Markdown table's row)."""
    pairs = {}
    for part in text.split(","):
        name, sep, path = part.partition("=")
        name, path = name.strip(), path.strip()
        if not sep or not name or not path:
            raise argparse.ArgumentTypeError(f"expected name=path[,name=path...], got {text!r}")
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            raise argparse.ArgumentTypeError(
                f"a name may hold letters, digits, _, . and - only, got {name!r}"
            )
        if name in pairs:
            raise argparse.ArgumentTypeError(f"name {name!r} given twice")
        pairs[name] = path
    return pairs


def all_named_paths(given: list[dict[str, str]], flag: str) -> dict[str, str]:
    """The ``name=path`` pairs of every ``flag`` given, in order (a repeated flag adds to the
    earlier ones); exits with status 2 for a name two of them give."""
    pairs: dict[str, str] = {}
    for named in given:
        if twice := sorted(set(pairs) & set(named)):
            fail(f"{flag}: name {twice[0]!r} given twice", PROG)
        pairs.update(named)
    return pairs


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line flags; a bad value prints one line and exits with status 2."""
    parser = OneLineArgumentParser(prog=PROG, description=summary(__doc__))
    parser.add_argument(
        "--checkpoint",
        default=SHIPPED_POLICY,
        help="a run's checkpoint directory (latest step) or one step directory (default: %(default)s)",
    )
    parser.add_argument(
        "--compare",
        type=named_paths,
        action="append",
        default=[],
        help="other checkpoints to run on the same jobs, in the main checkpoint's world, as "
        "name=path[,name=path] (e.g. a run trained with --adapt_strength=0); may be repeated",
    )
    parser.add_argument(
        "--history",
        default=None,
        help="history store (.json/.csv, slamorl_jax.history): also run the policy started at each "
        "job's nearest record (method policy_from_history)",
    )
    parser.add_argument(
        "--episodes",
        type=bounded(int, 1, 1 << 20),
        default=2048,
        help="fresh jobs per scenario and seed (default %(default)s)",
    )
    parser.add_argument(
        "--seeds",
        type=bounded(int, 1, 100),
        default=3,
        help="independent batches of jobs (default %(default)s)",
    )
    parser.add_argument("--seed", type=seed_value, default=0, help="first seed (default %(default)s)")
    parser.add_argument(
        "--catalog",
        default=None,
        help="judge every method on jobs of this calibrated catalogue (as train --catalog takes it: "
        "workloads, GPU types or prices the policy was not trained on) instead of the policy's own",
    )
    parser.add_argument(
        "--scenarios",
        type=scenario_list,
        default=EVALUATION_SCENARIOS,
        help=f"comma-separated scenarios (default: {','.join(EVALUATION_SCENARIOS)})",
    )
    add_hold_below_argument(parser, "--hold_below", "every policy's allocation")
    add_relocate_payback_argument(parser, "--relocate_payback", "run the policy (not a compared one)")
    parser.add_argument(
        "--front_points",
        type=front_points,
        default=11,
        help="preference vectors on the time-cost front (0 skips the front; default %(default)s)",
    )
    parser.add_argument(
        "--front_scenario",
        choices=SCENARIOS,
        default=None,
        help=f"jobs of the preference front (default: {DEFAULT_FRONT_SCENARIO})",
    )
    parser.add_argument(
        "--out_dir", type=out_dir_path, default=None, help="output directory (default: runs/eval-<date-time>)"
    )
    parser.add_argument(
        "--plots",
        choices=("auto", "yes", "no"),
        default="auto",
        help="PNG plots: auto = when matplotlib is installed",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace results already in --out_dir")
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="print each scenario and method to stderr as it runs",
    )
    # train's (absl's) spelling of --no-progress, so either works in both commands.
    parser.add_argument("--noprogress", dest="progress", action="store_false", help=argparse.SUPPRESS)
    add_cache_argument(parser)
    args = parser.parse_args(argv)
    if args.front_points == 0 and args.front_scenario is not None:
        fail("--front_scenario has no effect with --front_points=0 (no front is traced); leave it out", PROG)
    args.front_scenario = args.front_scenario or DEFAULT_FRONT_SCENARIO
    if args.out_dir is not None:  # the default is a new folder, claimed when the results are written
        check_out_dir(args.out_dir, args.overwrite)
    have_matplotlib = importlib.util.find_spec("matplotlib") is not None
    if args.plots == "yes" and not have_matplotlib:
        fail("--plots=yes needs matplotlib: pip install 'slamorl_jax[plot]'", PROG)
    args.plots = args.plots == "yes" or (args.plots == "auto" and have_matplotlib)
    args.compare = all_named_paths(args.compare, "--compare")
    try:
        args.checkpoint = resolve_checkpoint("--checkpoint", args.checkpoint)
        args.compare = {name: resolve_checkpoint("--compare", path) for name, path in args.compare.items()}
    except ValueError as err:
        fail(str(err), PROG)
    return args


def check_out_dir(out_dir: Path, overwrite: bool) -> None:
    """Exit 2 if ``out_dir`` is a file or cannot be created, or holds results and ``overwrite`` is
    not set."""
    try:
        run_dirs.check_dir("--out_dir", out_dir)
    except run_dirs.RunDirError as err:
        fail(str(err), PROG)
    if folders := [name for name in OUTPUT_NAMES if (out_dir / name).is_dir()]:
        fail(f"--out_dir {str(out_dir)!r} holds a folder named {folders[0]}, where a result goes", PROG)
    existing = [name for name in OUTPUT_NAMES if (out_dir / name).exists()]
    if existing and not overwrite:
        fail(f"--out_dir {str(out_dir)!r} already holds {existing[0]}; pass --overwrite to replace it", PROG)


def main(argv: list[str] | None = None) -> int:
    """Evaluate, write the outputs, print the Markdown; the exit status."""
    args = parse_args(argv)
    start_cache(args.compilation_cache_dir, PROG)
    from slamorl_jax.agent.trainer import catalog_for_config
    from slamorl_jax.checkpoint import CheckpointError
    from slamorl_jax.env.action_sets import WIDEST_ACTION_SET
    from slamorl_jax.env.job_env import JobAllocationEnv
    from slamorl_jax.evaluation.report import to_markdown, write_outputs
    from slamorl_jax.evaluation.suite import SuiteConfig, check_compared_policies, run_suite
    from slamorl_jax.policy_checkpoint import load_policy

    try:
        policy = load_policy(args.checkpoint).deciding(args.hold_below, args.relocate_payback)
        compare = {name: load_policy(path).holding(args.hold_below) for name, path in args.compare.items()}
        for loaded in (policy, *compare.values()):
            _ = loaded.env_params  # a config that loads but builds no env: one line here, not later
        check_compared_policies(policy, compare)
        # The jobs' catalogue: the policy's own, or --catalog's (the policy judged on another).
        catalog = policy.catalog if args.catalog is None else catalog_for_config(args.catalog, policy.config)
        env = JobAllocationEnv(action_set=WIDEST_ACTION_SET, catalog=catalog)
    except (CheckpointError, ValueError) as err:
        fail(str(err), PROG)
    history = history_start(args.history, policy, catalog)
    config = SuiteConfig(
        scenarios=args.scenarios,
        episodes=args.episodes,
        seeds=args.seeds,
        seed=args.seed,
        front_points=args.front_points,
        front_scenario=args.front_scenario,
    )

    def progress(message: str) -> None:
        if args.progress:
            print(f"evaluating {message}", file=sys.stderr, flush=True)

    try:
        if args.out_dir is None:
            args.out_dir, created = run_dirs.claim_stamped_folder("eval-")
        else:
            created = run_dirs.create_run_dirs([("--out_dir", args.out_dir)])
    except run_dirs.RunDirError as err:
        fail(str(err), PROG)
    except OSError as err:
        fail(run_dirs.unclaimable("the output folder", err), PROG)
    # Nothing of an interrupted or failed evaluation stays: its outputs appear all at once at the end
    # (``write_outputs``), and the folders it made go if nothing else was written into them since
    # (another evaluation into the same --out_dir, whose results stay).
    new_files = [args.out_dir / name for name in OUTPUT_NAMES if not (args.out_dir / name).exists()]
    done = False

    def remove_partial() -> None:
        if not done:
            run_dirs.remove_created(created, only_empty=True)

    with cleanup_on_interrupt(remove_partial):
        try:
            payload, _ = run_suite(
                policy, config, env=env, progress=progress, compare=compare, history=history
            )
            payload["config"].update(
                checkpoint=str(args.checkpoint),
                catalog=args.catalog or policy.config.catalog,  # None: the shipped one
                compare={name: str(path) for name, path in args.compare.items()},
                history=args.history,
            )
            # Another evaluation may have written into --out_dir while this one ran: never replaced
            # without --overwrite, and never removed by this one's clean-up.
            if not args.overwrite and (taken := [p for p in new_files if p.exists()]):
                fail(
                    f"--out_dir {str(args.out_dir)!r} received {taken[0].name} from another evaluation while "
                    "this one ran; pass --overwrite to replace it, or another --out_dir",
                    PROG,
                )
            try:
                written = write_outputs(args.out_dir, payload, args.plots)
            except OSError as err:  # a full disk, a folder removed meanwhile: the earlier files stay
                fail(
                    f"cannot write the results into --out_dir {str(args.out_dir)!r}: {err.strerror or err}",
                    PROG,
                )
            done = True
        finally:
            remove_partial()
    # An --overwrite'd earlier evaluation's plots this one did not make would read as this one's.
    # Without --overwrite none was there at the start: one there now is another evaluation's.
    for name in OUTPUT_NAMES if args.overwrite else ():
        if args.out_dir / name not in written:
            (args.out_dir / name).unlink(missing_ok=True)
    print(to_markdown(payload))
    print("wrote " + ", ".join(str(p) for p in written), file=sys.stderr)
    return 0


def history_start(path: str | None, policy: LoadedPolicy, catalog: Catalog) -> HistoryStart | None:
    """The start rule of the ``--history`` store (``None`` without one), its names read in
    ``catalog`` (the jobs'); exit 2 with one line when the store cannot be used or holds a best
    allocation outside ``policy``'s cluster."""
    if path is None:
        return None
    from slamorl_jax.history.lookup import HistoryStart
    from slamorl_jax.history.records import load_records

    try:
        records = load_records(path, catalog, cluster=policy.env_params)
        return HistoryStart.from_records(records, catalog, loaded=True)
    except ValueError as err:
        fail(f"--history: {err}", PROG)


def run() -> None:
    """Console-script entry point."""
    run_command(main, PROG)


if __name__ == "__main__":
    run()

"""The host loop of a training run: chunks, logging, checkpoints, signals, final evaluation.

Everything with side effects lives here; the learner itself (``agent/trainer.py``) is pure.
The env batch is sharded over every device JAX sees (every process's, in a multi-process run); only
process 0 prints, logs and writes files of its own, while every process computes and takes part in
the checkpoint saves orbax coordinates.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shlex
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import jax

from slamorl_jax import checkpoint as ckpt
from slamorl_jax.agent.config import TrainConfig
from slamorl_jax.agent.trainer import config_catalog, make_train, summarise
from slamorl_jax.atomic_files import write_text_atomically
from slamorl_jax.checkpoint_catalog import catalog_meta, stored_catalog
from slamorl_jax.checkpoint_resume import newest_readable_meta, nothing_to_resume, restore_newest_intact
from slamorl_jax.cli_args import STOP_SIGNALS
from slamorl_jax.distributed import any_process, is_primary
from slamorl_jax.env.catalog import catalog_from_flag, same_catalog
from slamorl_jax.env.job_env import JobAllocationEnv
from slamorl_jax.learner_jit import jit_learner
from slamorl_jax.quality_bar import evaluate_against_request, format_evaluation, quality_bar
from slamorl_jax.run_log_names import CONFIG_FILE, METRICS_FILE, SUMMARY_FILE, has_metrics, run_log_files
from slamorl_jax.run_logging import MetricsLogger
from slamorl_jax.sharding import check_divisible, env_mesh
from slamorl_jax.train_checks import budget_note
from slamorl_jax.warm_start import catalogue_note, warm_start

EXIT_OK = 0
EXIT_NON_FINITE = 3


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """Run-level options (not part of the learner's config)."""

    checkpoint_dir: Path
    log_dir: Path
    save_interval: int = 100
    keep: int = 3
    resume: bool = False
    eval_episodes: int = 1024
    progress: bool = True
    explicit_flags: tuple[str, ...] = ()
    #: Which of :data:`SAVED_RUN_OPTIONS` the command line gave: a resumed run keeps its own others.
    explicit_run_options: tuple[str, ...] = ()


#: The run options a checkpoint records (``meta["run_options"]``) and ``--resume`` keeps unless given.
SAVED_RUN_OPTIONS = ("save_interval", "keep", "eval_episodes")


def saved_run_options(options: RunOptions) -> dict[str, Any]:
    """The ``extra`` a checkpoint's ``meta`` records of ``options``."""
    return {"run_options": {name: getattr(options, name) for name in SAVED_RUN_OPTIONS}}


def resumed_options(options: RunOptions, meta: dict[str, Any], steps_held: int) -> RunOptions:
    """``options`` for resuming the run whose newest ``meta`` is given: each of
    :data:`SAVED_RUN_OPTIONS` the command line left out is the run's own. A run saved before they
    were recorded keeps at least the ``steps_held`` checkpoints it holds (``--keep`` would delete the
    others at its next save)."""
    stored = meta.get("run_options")
    stored = stored if isinstance(stored, dict) else {}
    changes: dict[str, int] = {}
    for name in SAVED_RUN_OPTIONS:
        value = stored.get(name)
        lowest = 0 if name == "eval_episodes" else 1
        if name not in options.explicit_run_options and type(value) is int and value >= lowest:
            changes[name] = value
    if "keep" not in options.explicit_run_options and "keep" not in changes:
        changes["keep"] = max(options.keep, steps_held)
    return dataclasses.replace(options, **changes)


class StopRequest:
    """Remembers a stop signal (``cli_args.STOP_SIGNALS``: SIGINT, SIGTERM, SIGHUP) so the loop can
    checkpoint and exit between chunks."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def __call__(self, signum: int, frame: Any) -> None:
        """The signal handler: note ``signum`` (the loop acts on it after the chunk it is in)."""
        self.signum = signum


@contextmanager
def catch_stop_signals() -> Iterator[StopRequest]:
    """Install the stop signals' handlers for the duration of the block."""
    stop = StopRequest()
    previous = {s: signal.signal(s, stop) for s in STOP_SIGNALS}
    try:
        yield stop
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def resolve_run(config: TrainConfig, options: RunOptions) -> tuple[TrainConfig, dict[str, Any] | None]:
    """The config to run, the checkpoint's when resuming (explicit flags must agree with it), and the
    newest readable checkpoint meta it resumes from (``None`` for a fresh run), read once for the
    config and the run options."""
    if not options.resume:
        if ckpt.has_checkpoint(options.checkpoint_dir):
            raise ckpt.CheckpointError(
                f"{options.checkpoint_dir} already holds checkpoints; pass --resume to continue that run "
                "or choose another --checkpoint_dir"
            )
        checkpoint_dir = Path(options.checkpoint_dir)
        if checkpoint_dir.name == "checkpoints" and ckpt.has_checkpoint(checkpoint_dir.parent):
            # --checkpoint=<that folder> would load its policy and --resume its run: two policies
            raise ckpt.CheckpointError(
                f"{checkpoint_dir.parent} holds a policy checkpoint of its own (an exported or "
                "pre-trained policy); a run in it would give the folder two policies: choose another "
                "--run_dir (or --checkpoint_dir)"
            )
        if checkpoint_dir.is_dir() and any(checkpoint_dir.iterdir()):
            # orbax would take numbered folders in it for its steps and delete them past --keep
            raise ckpt.CheckpointError(
                f"{options.checkpoint_dir} holds files that are not checkpoints; choose an empty or new "
                "--checkpoint_dir"
            )
        if existing := run_log_files(options.log_dir):
            # Another run's config, summary and TensorBoard events would be overwritten or mixed in.
            shown = listed(existing)
            raise ckpt.CheckpointError(
                f"{options.log_dir} already holds a run's logs ({shown}); pass --resume to continue that "
                "run or choose another --log_dir"
                if ckpt.has_checkpoint(Path(options.log_dir).parent / "checkpoints")
                else f"{options.log_dir} already holds run logs ({shown}) and no run's checkpoint beside "
                "them, so --resume has nothing to continue: remove them to start again there, or choose "
                "another --log_dir or --run_dir"
            )
        return config, None
    if not ckpt.has_checkpoint(options.checkpoint_dir) and run_log_files(options.log_dir):
        raise ckpt.CheckpointError(nothing_to_resume(Path(options.checkpoint_dir), Path(options.log_dir)))
    meta = newest_readable_meta(options.checkpoint_dir)
    ckpt.check_resumable(meta, options.checkpoint_dir)
    stored = TrainConfig.from_dict(meta["config"])
    conflicts = [
        name
        for name in options.explicit_flags
        if not resumed_flag_matches(name, getattr(stored, name), getattr(config, name))
        and not (name == "catalog" and holds_run_catalogue(config.catalog, meta, options.checkpoint_dir))
    ]
    if conflicts:
        longer = "total_timesteps" in conflicts  # the learning-rate schedule is the run's whole length
        raise ckpt.CheckpointError(
            f"--resume: flags differ from the checkpoint's config: {', '.join(sorted(conflicts))}"
            + (
                f" (a run resumes to its own end; to train on, start a new run from this one's "
                f"policy with --init_from={options.checkpoint_dir}: a fresh optimiser and schedule)"
                if longer
                else ""
            )
        )
    logged, held = logged_config(options.log_dir), run_log_files(options.log_dir)
    if logged not in (None, stored):
        # Its metrics past the checkpoint's update, its summary and config would be replaced.
        raise ckpt.CheckpointError(
            f"--resume: {options.log_dir} holds the logs of another run (its {CONFIG_FILE} is not the "
            "checkpoint's config): resume with this run's own --log_dir"
        )
    if logged is None and held:  # a run writes its config first, atomically: whose logs are these?
        raise ckpt.CheckpointError(
            f"--resume: {options.log_dir} holds run logs ({listed(held)}) without a readable "
            f"{CONFIG_FILE}, so they may be another run's: resume with this run's own --log_dir, or "
            "move them aside if they are its own"
        )
    return stored, meta


def listed(names: list[str]) -> str:
    """The first three of a folder's ``names`` and how many more, for a one-line message."""
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def logged_config(log_dir: Path) -> TrainConfig | None:
    """The config a run's ``config.json`` in ``log_dir`` records; ``None`` where there is none or it
    cannot be read (the resumed run then writes its own)."""
    try:
        return TrainConfig.from_dict(json.loads((Path(log_dir) / CONFIG_FILE).read_text()))
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def checkpoint_due(update: int, last_saved: int, save_interval: int) -> bool:
    """Whether the chunk that ended at ``update`` saves: the first chunk end at or past each multiple
    of ``save_interval`` does (checkpoints fall on chunk ends), so saves keep to the multiples, where
    counting ``save_interval`` from the last save drifted by the chunk's remainder at every save."""
    return update // save_interval > last_saved // save_interval


def resumed_flag_matches(name: str, stored: Any, given: Any) -> bool:
    """Whether a flag given with ``--resume`` says what the checkpoint's config holds. ``init_from`` is
    recorded as the absolute step folder it loaded, so the paths the first command could have typed
    (that step, or the checkpoint or policy folder holding it) match it too; no other folder above
    it does (``--init_from`` refuses a run's folder or ``/``). ``catalog`` is recorded absolute too:
    the path typed first, relative or not, matches it (the run keeps the copy its checkpoint carries,
    whatever the file holds now); a file at another path matches where it holds that copy
    (:func:`holds_run_catalogue`, which :func:`resolve_run` asks)."""
    if name == "init_from" and stored is not None and given is not None:
        step, typed = (Path(os.path.normpath(Path(path).absolute())) for path in (stored, given))
        return typed in (step, step.parent)
    if name == "catalog" and stored is not None and given is not None:  # recorded absolute
        return os.path.normpath(Path(given).absolute()) == stored
    return stored == given


def holds_run_catalogue(path: str | None, meta: dict[str, Any], checkpoint_dir: Path) -> bool:
    """Whether the file a resumed run's ``--catalog`` names holds the catalogue its checkpoint
    carries (the same content at another path: the file moved or was copied); ``False`` for no path
    or a file that cannot be read as a catalogue."""
    if path is None:
        return False
    try:
        given = catalog_from_flag(path)
    except ValueError:
        return False
    return same_catalog(given, stored_catalog(meta, checkpoint_dir))


def diverged_message(update: int, last_saved: int, checkpoint_dir: Path, log_dir: Path | None = None) -> str:
    """What a run that hit a non-finite loss at ``update`` keeps (``last_saved``: its latest save;
    ``log_dir``: where its metrics are, kept when it logged any)."""
    if ckpt.has_checkpoint(checkpoint_dir):
        kept = f"The last good checkpoint (update {last_saved}) in {checkpoint_dir} is kept."
    else:
        kept = "No checkpoint had been saved yet."
    if log_dir is not None and has_metrics(log_dir):
        kept += f" Its metrics up to there are in {Path(log_dir) / METRICS_FILE}."
    return f"non-finite loss at update {update}; stopping. {kept}"


def run_training(config: TrainConfig, options: RunOptions) -> int:
    """Train (or resume) per ``options``; returns the process exit code."""
    config, meta = resolve_run(config, options)
    if meta is not None:  # resuming
        options = resumed_options(options, meta, len(ckpt.complete_steps(Path(options.checkpoint_dir))))
        try:
            check_divisible(config.num_envs, jax.device_count())  # the run's, not the flags' count
        except ValueError as err:
            raise ckpt.CheckpointError(f"--resume: the run's {err}") from None
    primary = is_primary()
    say = print_error if primary else _quiet
    note = budget_note(config)
    if note and not options.resume:
        say(note)
    say(
        f"run: checkpoints in {Path(options.checkpoint_dir).absolute()}, metrics, TensorBoard events and "
        f"{SUMMARY_FILE} in {Path(options.log_dir).absolute()}"
    )
    mesh = env_mesh()
    if mesh.size > 1:
        share = config.num_envs // mesh.size
        say(f"devices: {mesh.size} ({jax.process_count()} processes), {share:,} jobs each")
    # The run's catalogue: the copy its checkpoint carries when resuming (the file may have moved or
    # changed), else the one --catalog names (None: the shipped one).
    catalog = stored_catalog(meta, options.checkpoint_dir) if meta is not None else config_catalog(config)
    trainer = make_train(config, JobAllocationEnv(action_set=config.actions, catalog=catalog), mesh=mesh)
    learner = jit_learner(trainer, trainer.env_params)
    env_params = learner.place(trainer.env_params)
    saved_extra = {**saved_run_options(options), **catalog_meta(catalog)}

    start = time.perf_counter()
    held = ckpt.complete_steps(Path(options.checkpoint_dir)) if options.resume else []
    finished = bool(held) and held[-1] >= config.num_updates  # its newest step, if intact, ends it
    if options.progress and not finished:
        say("compiling (the first run with these shapes takes a while; later runs load the cache)")
    state = learner.init(learner.place(jax.random.key(config.seed)), env_params)
    if config.init_from is not None and not options.resume:  # a resumed run restores its own
        state = warm_start(state, config.init_from, learner.place)
        say(f"init: the policy starts from {config.init_from}")
        if note := catalogue_note(config, catalog):
            say(note)
    if options.resume:
        state = restore_newest_intact(options.checkpoint_dir, state, report=say)
        if int(state.update) >= config.num_updates:
            done = f"the run is complete ({int(state.update):,} of {config.num_updates:,} updates)"
            # Its summary and logs stay as they are; and where the log folder is not this run's own
            # (a --checkpoint_dir resumed without its --log_dir logs to a new folder), the summary,
            # if any, is in the one it had.
            if (Path(options.log_dir) / SUMMARY_FILE).exists() or logged_config(options.log_dir) != config:
                say(f"{done}: nothing to train")
                return 0
            # Stopped after its last save and before its summary (in the final evaluation): the
            # summary, with the evaluation, is what is left to do.
            say(f"{done} but stopped before writing {SUMMARY_FILE}: writing it")
            if primary:
                figures = {"env_steps_this_run": 0, "steps_per_s": 0.0, "compile_s": 0.0}
                write_summary(trainer, state, config, options, figures, start, int(state.update))
            return EXIT_OK
        say(f"resume: from update {int(state.update):,} of {config.num_updates:,}")
    # After the restore, which may set damaged steps aside: the manager lists the steps it finds.
    manager = ckpt.make_manager(options.checkpoint_dir, options.keep)
    compile_start = time.perf_counter()
    compiled = learner.chunk.lower(state, env_params).compile()
    compile_s = time.perf_counter() - compile_start

    first_chunk = int(state.update) // config.updates_per_chunk
    logger = (
        MetricsLogger(
            options.log_dir,
            config,
            total_steps=config.num_updates * config.batch_size,
            initial_steps=int(state.update) * config.batch_size,
            progress=options.progress,
        )
        if primary
        else SilentLogger()
    )
    last_saved = int(state.update)
    train_s = 0.0
    code = EXIT_OK
    with catch_stop_signals() as stop, logger:
        for _ in range(first_chunk, config.num_chunks):
            tick = time.perf_counter()
            new_state, metrics = compiled(state, env_params)
            metrics = summarise(jax.device_get(metrics))
            jax.block_until_ready(new_state)
            train_s += time.perf_counter() - tick
            if not math.isfinite(metrics["loss"]):
                update = int(new_state.update)
                logger.message(diverged_message(update, last_saved, options.checkpoint_dir, options.log_dir))
                return EXIT_NON_FINITE
            state = new_state
            update = int(state.update)
            steps_this_run = (update - first_chunk * config.updates_per_chunk) * config.batch_size
            logger.log(update, metrics, steps_per_s=steps_this_run / max(train_s, 1e-9))
            if checkpoint_due(update, last_saved, options.save_interval):
                last_saved = ckpt.save(manager, state, config, saved_extra)
            # Every process stops after the same chunk (each saves its share of the checkpoint), even
            # when the signal reaches them between different chunks.
            if any_process(stop.signum is not None):
                if update != last_saved:
                    last_saved = ckpt.save(manager, state, config, saved_extra)
                signum = stop.signum or signal.SIGTERM
                name = signal.Signals(signum).name
                logger.message(f"{name}: saved checkpoint at update {update} in {options.checkpoint_dir}")
                return 128 + signum
        if int(state.update) != last_saved:
            last_saved = ckpt.save(manager, state, config, saved_extra)
    env_steps = (int(state.update) - first_chunk * config.updates_per_chunk) * config.batch_size
    if primary:
        figures = {
            "env_steps_this_run": env_steps,
            "steps_per_s": env_steps / max(train_s, 1e-9),
            "compile_s": compile_s,
        }
        write_summary(trainer, state, config, options, figures, start, last_saved)
    return code


def write_summary(
    trainer: Any,
    state: Any,
    config: TrainConfig,
    options: RunOptions,
    figures: dict[str, Any],
    start: float,
    last_saved: int,
) -> None:
    """Process 0's end of a run: the final evaluation of ``state``'s policy against the request
    (``options.eval_episodes`` fresh jobs a scenario kind; none for 0) beside the run's ``figures``,
    written whole to ``summary.json`` (a run stopped while writing it leaves none, and ``--resume``
    writes it) and printed."""
    summary: dict[str, Any] = {
        "config": dataclasses.asdict(config),
        "updates": int(state.update),
        **figures,
        "wall_s": time.perf_counter() - start,
        "checkpoint": str(Path(options.checkpoint_dir).absolute() / str(last_saved)),
        "log_dir": str(Path(options.log_dir).absolute()),
    }
    if options.eval_episodes > 0:
        if options.progress:
            print_error(
                f"evaluating the policy and the request on {options.eval_episodes:,} fresh jobs per "
                "scenario kind"
            )
        # Host copies of the (replicated) parameters: the evaluation runs on this process alone.
        evaluation = evaluate_against_request(
            trainer, jax.device_get(state.params), config, options.eval_episodes, config.seed
        )
        summary["evaluation"] = evaluation
        summary["quality_bar"] = quality_bar(evaluation)
        summary["evaluation_markdown"] = format_evaluation(evaluation)
    summary["wall_s"] = time.perf_counter() - start
    Path(options.log_dir).mkdir(parents=True, exist_ok=True)
    write_text_atomically(Path(options.log_dir) / SUMMARY_FILE, json.dumps(summary, indent=2))
    print_summary(summary)


class SilentLogger:
    """The logger of processes other than 0: they train and checkpoint but record nothing."""

    def log(self, update: int, metrics: dict[str, float], steps_per_s: float) -> None:
        """Nothing: process 0 records the run."""

    def message(self, text: str) -> None:
        """Nothing: process 0 says it."""

    def __enter__(self) -> SilentLogger:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


def _quiet(line: str) -> None:
    """What processes other than 0 do with a status line: nothing."""


def print_error(line: str) -> None:
    """One line on stderr, at once."""
    print(line, file=sys.stderr, flush=True)


def print_summary(summary: dict[str, Any]) -> None:
    """The end-of-run report on stdout."""
    print(
        f"\ntrained {summary['updates']} updates; {summary['env_steps_this_run']:,} env steps this run at "
        f"{summary['steps_per_s']:,.0f} steps/s (compile {summary['compile_s']:.1f} s, "
        f"wall {summary['wall_s']:.1f} s)\ncheckpoint: {summary['checkpoint']}\nlogs: {summary['log_dir']}"
    )
    if "evaluation_markdown" in summary:
        print("\nevaluation on fresh jobs (greedy policy vs the requested static allocation):")
        print(summary["evaluation_markdown"])
        verdicts = ", ".join(f"{k}: {'yes' if v else 'no'}" for k, v in summary["quality_bar"].items())
        print(f"\nbetter than the request on the scenario's objective and on all SLAs met: {verdicts}")
    if summary.get("checkpoint"):
        policy = shlex.quote(str(Path(summary["checkpoint"]).parent))
        print(f"\nnext: python -m slamorl_jax.evaluate --checkpoint={policy}  (against baselines, oracle)")
        print(
            f"      python -m slamorl_jax.recommend --checkpoint={policy} --job=JOB.json  "
            "(a running job's next allocation; docs/example_job.json is one)"
        )
    sys.stdout.flush()

"""Train an SLA-MORL policy: ``python -m slamorl_jax.train [--flag=value ...] [--flagfile=...]``.

One run trains one preference-conditioned policy on the chosen scenario (default ``mixed``), logs
to JSONL and TensorBoard, checkpoints with orbax (``--resume`` continues exactly), and ends with
an evaluation on fresh jobs of each scenario kind (deadline-critical, budget-constrained, balanced)
against the jobs' requested static allocations.
Bad flags, stray arguments and unusable output paths exit with code 2 and one line, before anything
is written; SIGTERM, SIGINT and SIGHUP save a checkpoint before exiting (before the first update they
exit with 128 + signal and remove the directories the run created); a diverged run exits 3.
A run holds its checkpoint and log folders' locks while it runs: a second run into either is refused
(exit 2).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from absl import app, flags
from absl import logging as absl_logging  # defines --log_dir, which we use for metrics too

from slamorl_jax.cli_start import program_name, require_backend  # first of ours: quiet Ctrl-C
from slamorl_jax.distributed_start import join_if_launched

join_if_launched(sys.argv)  # a multi-process run joins before anything touches a device
require_backend()  # a platform the machine lacks: one line, before an import touches a device
# ruff: noqa: E402  (the imports below may start JAX's backend)
from slamorl_jax import run_dirs, train_checks, train_flags
from slamorl_jax.agent.config import TrainConfig
from slamorl_jax.agent.config_checks import check_finite, validate_config
from slamorl_jax.cli_args import cleanup_on_interrupt, one_line, run_command
from slamorl_jax.compilation_cache import enable_compilation_cache, usable_cache_dir
from slamorl_jax.distributed import DistributedOptions
from slamorl_jax.distributed import resolve as resolve_distributed
from slamorl_jax.distributed_agreement import StartRefusedError, agree_to_start, agreement_pending
from slamorl_jax.run_log_names import metrics_size
from slamorl_jax.train_flags import (
    AGREED_RUN_FLAGS,
    CONFIG_FLAGS,
    FLAGS,
    absl_spelling,
    check_run_flags,
    config_from_flags,
    refuse_ignored_flags,
)

if TYPE_CHECKING:
    from slamorl_jax.training_loop import RunOptions

PROG = program_name("slamorl_jax.train")  # as started: -m or its script
# The flags are train's own: ``--help`` lists a program's main module's key flags.
flags.adopt_module_key_flags(train_flags)


def distributed_options() -> DistributedOptions:
    """The multi-process settings of the flags and the environment, checked."""
    options = resolve_distributed(
        DistributedOptions(
            enabled=FLAGS.distributed if FLAGS["distributed"].present else None,
            coordinator_address=FLAGS.coordinator_address,
            num_processes=FLAGS.num_processes,
            process_id=FLAGS.process_id,
            heartbeat_timeout_s=FLAGS.distributed_heartbeat_s,
            initialization_timeout_s=FLAGS.distributed_init_timeout_s,
        )
    )
    for name in ("distributed_heartbeat_s", "distributed_init_timeout_s"):
        if not options.enabled and FLAGS[name].present:  # recorded nowhere, read by nothing
            raise ValueError(
                f"--{name} has no effect without --distributed (a one-process run); leave it out"
            )
    if options.enabled and FLAGS.run_dir is None and FLAGS.checkpoint_dir is None:
        raise ValueError(
            "a --distributed run needs --run_dir (or --checkpoint_dir): every process uses the same folder"
        )
    if options.enabled and default_run_dir_needed():
        raise ValueError(
            "a --distributed run given --checkpoint_dir needs --log_dir too (or --run_dir): each process "
            "would otherwise make a runs/<date-time> folder of its own for the logs"
        )
    return options


def fail(message: str) -> NoReturn:
    """Print one line to stderr and exit with code 2 (bad input). In a multi-process run that has not
    started yet, the other processes are told first, so they stop too (``distributed_agreement``)."""
    # (--only_check_args: no process starts, so none waits to hear of this one's refusal)
    if agreement_pending() and not FLAGS["only_check_args"].value:
        with contextlib.suppress(StartRefusedError):  # this process's own refusal: the line below
            agree_to_start(message, FLAGS["distributed_init_timeout_s"].value)
    print(f"{PROG}: error: {one_line(message)}", file=sys.stderr)
    sys.exit(2)


def parse_flags(argv: list[str]) -> list[str]:
    """absl flag parsing with bad flags reported in one line and exit code 2 (each argument spelled
    by :func:`absl_spelling`); the help flags (absl ends them with status 1) end with status 0. With
    absl's ``--only_check_args`` (after which absl exits 0) the run's own checks come first
    (:func:`validated_config`: values, the files the flags name; :func:`check_run_folders`: the
    run's folders, as :func:`start` and ``training_loop.resolve_run`` check them), so bad input
    exits 2 and nothing is written."""
    FLAGS.unparse_flags()  # a fresh parse: no value of an earlier in-process run carries over
    end = argv.index("--") if "--" in argv else len(argv)
    argv = [*(absl_spelling(arg) for arg in argv[:end]), *argv[end:]]
    try:
        parsed = FLAGS(argv)
    except SystemExit as exit_:
        # absl's --help, --helpshort, --helpfull and --helpxml print and exit with status 1; a
        # bad flag raises flags.Error instead, so status 1 here is a help that was asked for.
        raise SystemExit(0 if exit_.code == 1 else exit_.code) from None
    except flags.Error as err:
        fail(str(err).splitlines()[0])
    except (OSError, UnicodeError, ValueError) as err:  # a --flagfile that cannot be read as text
        fail(f"cannot read the command line: {err}")
    if FLAGS.only_check_args:  # absl exits 0 once the flags parse: check first what main checks
        check_run_folders(validated_config(parsed)[0])
    return parsed


def checkpoints_of_a_run_dir() -> bool:
    """Whether ``--checkpoint_dir`` names a run folder's ``checkpoints`` (``<run>/checkpoints``,
    whose logs a resumed run keeps in ``<run>/logs``)."""
    return bool(FLAGS.checkpoint_dir) and Path(FLAGS.checkpoint_dir).name == "checkpoints"


def default_run_dir_needed() -> bool:
    """Whether the run's folders come from a new default run folder: no ``--run_dir``, and no
    ``--checkpoint_dir`` with a ``--log_dir`` or named ``checkpoints`` (whose run folder holds the
    logs). A resumed run needs one only for its logs, when it is given a ``--checkpoint_dir`` not
    named ``checkpoints`` and no ``--log_dir`` (its logs then go to a new folder of their own rather
    than one another command may take)."""
    logs_known = FLAGS.run_dir or FLAGS.log_dir or checkpoints_of_a_run_dir()
    if FLAGS.resume:
        return bool(FLAGS.checkpoint_dir) and not logs_known
    return not (FLAGS.run_dir or (FLAGS.checkpoint_dir and logs_known))


def resolve_paths(default_run_dir: Path | None = None) -> tuple[Path, Path, str, str]:
    """Checkpoint and log directories from the flags, and the flag each comes from;
    ``default_run_dir`` (else ``runs/<date-time>``) stands in for an unset ``--run_dir``.

    A run given only ``--checkpoint_dir=<run>/checkpoints`` keeps its logs in ``<run>/logs``, started
    and resumed alike, so its metrics stay in one folder."""
    run_dir = Path(FLAGS.run_dir or default_run_dir or run_dirs.stamped_folder())
    if not FLAGS.run_dir and checkpoints_of_a_run_dir():
        run_dir = Path(FLAGS.checkpoint_dir).parent
    checkpoint_dir = Path(FLAGS.checkpoint_dir) if FLAGS.checkpoint_dir else run_dir / "checkpoints"
    # --log_dir is absl's own flag (its log files); metrics.jsonl, TensorBoard events and
    # summary.json go there too.
    log_dir = Path(FLAGS.log_dir) if FLAGS.log_dir else run_dir / "logs"
    return (
        checkpoint_dir,
        log_dir,
        "--checkpoint_dir" if FLAGS.checkpoint_dir else "--run_dir",
        "--log_dir" if FLAGS.log_dir else "--run_dir",
    )


def validated_config(argv: list[str]) -> tuple[TrainConfig, DistributedOptions]:
    """The validated config and multi-process settings of the command line (``fail`` with one line
    on any bad value)."""
    from slamorl_jax.checkpoint import checkpoint_step_dir  # loads JAX: only once the flags parsed
    from slamorl_jax.warm_start import init_from_config

    try:
        train_checks.check_no_positional(argv)
        config = config_from_flags()
        if FLAGS.resume:  # a resumed run keeps its checkpoint's (checked) config and budget; a
            # flag given with --resume must equal it (training_loop.resolve_run), so the flags'
            # defaults are never checked against the ones given: only a non-finite flag is named
            check_finite(config)
        else:
            validate_config(config)  # check_finite among its checks
            refuse_ignored_flags(config)
            config = train_checks.checked_catalog(config)
        check_run_flags()
        if config.init_from is not None and not FLAGS.resume:
            absl_logging.set_verbosity(absl_logging.WARNING)  # orbax logs every restore at INFO
            given = [name for name in FLAGS if FLAGS[name].present]
            config = init_from_config(config, given)
            try:  # the source's network settings may leave a flag given here without an effect
                refuse_ignored_flags(config)
            except ValueError as err:
                raise ValueError(f"{err} (with --init_from the network is its source's)") from None
            # Recorded as the step folder it loads (the typed path is relative to where the command
            # ran, and a run folder's latest step moves on as that run trains).
            config = dataclasses.replace(config, init_from=str(checkpoint_step_dir(config.init_from)))
        distributed = distributed_options()
        FLAGS.compilation_cache_dir = usable_cache_dir(FLAGS.compilation_cache_dir)
    except ValueError as err:  # CheckpointError (--init_from) is one
        fail(str(err))
    return config, distributed


def agreed_settings(config: TrainConfig, checkpoint_dir: Path, log_dir: Path) -> dict[str, Any]:
    """What every process of a multi-process run must be given alike: the config, the folders and
    :data:`AGREED_RUN_FLAGS`. The folders as given (nodes may mount one shared folder at other paths;
    ``check_shared`` then finds whether they share it) and a new run's catalogue by its content (one
    file may sit at other paths, and other files at one path would train each process in another
    world)."""
    settings = {
        **dataclasses.asdict(config),
        "checkpoint_dir": str(checkpoint_dir),
        "log_dir": str(log_dir),
        **{name: FLAGS[name].value for name in AGREED_RUN_FLAGS},
    }
    if config.catalog is not None and not FLAGS.resume:  # read already (checked_catalog)
        from slamorl_jax.env.catalog import catalog_digest, load_catalog

        settings["catalog"] = catalog_digest(load_catalog(config.catalog))
    return settings


class SetUpFolders:
    """The folders a starting run has created so far, for a stop signal that arrives before the run's
    own clean-up (``remove_if_empty`` in :func:`start`) is armed: nothing is written in them yet, so
    they go (empty ones only: another run may have started in them)."""

    def __init__(self) -> None:
        self.created: list[run_dirs.CreatedDirs] = []
        self.handed_over = False  # the run's own clean-up is armed: it decides from then on

    def remove(self) -> None:
        """The clean-up of a stop signal during the set-up."""
        if not self.handed_over:
            for created in reversed(self.created):
                run_dirs.remove_created(created, only_empty=True)


def main(argv: list[str]) -> None:
    """Validate everything, then hand over to :func:`slamorl_jax.training_loop.run_training`."""
    config, distributed = validated_config(argv)
    set_up = SetUpFolders()
    # Armed before the first folder is made: a signal while they are made and locked leaves none.
    with cleanup_on_interrupt(set_up.remove):
        start(config, distributed, set_up)


def start(config: TrainConfig, distributed: DistributedOptions, set_up: SetUpFolders) -> NoReturn:
    """Make and lock the run's folders, start the processes together and train; exits the process."""
    claimed = run_dirs.CreatedDirs([], [])
    default_run_dir = None
    if default_run_dir_needed():
        try:
            default_run_dir, claimed = run_dirs.claim_stamped_folder()
        except OSError as err:
            fail(run_dirs.unclaimable("the run's folder", err))
        set_up.created.append(claimed)
    checkpoint_dir, log_dir, checkpoint_flag, log_flag = resolve_paths(default_run_dir)
    if FLAGS.resume and (problem := resume_folder_problem(checkpoint_flag, checkpoint_dir)):
        run_dirs.remove_created(claimed)
        fail(problem)
    try:
        made = run_dirs.create_run_dirs([(checkpoint_flag, checkpoint_dir), (log_flag, log_dir)])
    except run_dirs.RunDirError as err:
        run_dirs.remove_created(claimed)
        fail(str(err))
    set_up.created.append(made)
    created = run_dirs.CreatedDirs([*claimed.own, *made.own], [*claimed.parents, *made.parents])
    saved_before = run_dirs.checkpoint_marks(checkpoint_dir)
    logged_before = metrics_size(log_dir)
    owns_dirs = [True]  # once a multi-process run starts, only process 0 removes the shared folders
    # One run at a time per checkpoint folder; a --distributed run's process 0 takes it for all of its
    # processes once they have joined (below), so a run cannot start in a launched run's folder.
    folders = [(checkpoint_flag, checkpoint_dir), (log_flag, log_dir)]
    locks: list[int] = []
    if not distributed.enabled:
        locks, busy = run_dirs.lock_run_dirs(folders)
        if busy is not None:
            # The folders are the other run's now, whoever created them: only empty new ones go.
            run_dirs.remove_created(created, only_empty=True)
            fail(in_use_message(*busy))

    def remove_if_empty() -> None:
        # A run that saves no checkpoint and logs no update (bad input found late, Ctrl-C while
        # importing or compiling) leaves none of the directories it created. One that logged
        # updates and then diverged before its first save keeps them: its metrics show the loss.
        unsaved = run_dirs.checkpoint_marks(checkpoint_dir) == saved_before
        if owns_dirs[0] and unsaved and metrics_size(log_dir) <= logged_before:
            run_dirs.remove_created(created)

    code = 1
    try:
        # Armed before the heavy imports: a signal during them must not leave the new directories.
        with cleanup_on_interrupt(remove_if_empty):
            set_up.handed_over = True
            absl_logging.set_verbosity(absl_logging.WARNING)  # orbax logs every save at INFO
            enable_compilation_cache(FLAGS.compilation_cache_dir)
            # Heavy imports (JAX compilation, orbax) only after the flags are known to be good.
            import jax

            from slamorl_jax.checkpoint import CheckpointError, CheckpointWriteError
            from slamorl_jax.distributed import join
            from slamorl_jax.sharding import check_divisible
            from slamorl_jax.training_loop import run_training

            try:
                if distributed.enabled:
                    join(distributed)  # already done at start-up when launched as a command
                    if jax.process_index() == 0:
                        locks, busy = run_dirs.lock_run_dirs(folders)
                        if busy is not None:  # every process is told, and stops (fail)
                            fail(in_use_message(*busy))
                if not FLAGS.resume:  # a resumed run's own num_envs is checked once it is read
                    check_divisible(config.num_envs, jax.device_count())
                # Every process has checked its flags and folders: all start, or all stop. Until
                # they all start, each process removes what it created if it stops.
                # The run options with the config: processes given other folders trained apart and
                # hung at their first save, each waiting for the others' shards of one checkpoint.
                settings = agreed_settings(config, checkpoint_dir, log_dir)
                agree_to_start(None, distributed.initialization_timeout_s, settings, checkpoint_dir)
                owns_dirs[0] = not distributed.enabled or jax.process_index() == 0
            except ValueError as err:  # StartRefusedError is one
                fail(str(err))

            try:
                code = run_training(config, run_options(checkpoint_dir, log_dir))
            except CheckpointError as err:
                code = 2
                fail(str(err))
            except CheckpointWriteError as err:  # the machine's trouble, not bad input: status 1
                # The failed save's other threads still fail, each logging a traceback (hundreds
                # of lines on a full disk) as the process ends: this line is the run's report.
                # (Process-wide and not undone: the command exits next.)
                logging.disable(logging.CRITICAL)
                warnings.simplefilter("ignore")
                hint = "--resume continues from the newest intact checkpoint, if the run saved one"
                print(f"{PROG}: error: {one_line(str(err))}; {hint}", file=sys.stderr)
                code = 1
    finally:  # a run that saved and logged nothing (refused late, stopped, or a finished run
        remove_if_empty()  # resumed into a new log folder) leaves none of the folders it made
        for lock in locks:
            run_dirs.unlock_run_dir(lock)
    sys.exit(code)


def resume_folder_problem(checkpoint_flag: str, checkpoint_dir: Path) -> str | None:
    """Why ``--resume`` cannot continue a run in ``checkpoint_dir`` (a folder that is missing, not a
    folder, or not writable), or ``None``."""
    try:
        run_dirs.check_dir(checkpoint_flag, checkpoint_dir, must_exist=True)
    except run_dirs.RunDirError as err:
        if run_dirs.path_exists(checkpoint_dir) and checkpoint_dir.is_dir():  # there, not writable
            return f"--resume: {err}: a resumed run saves its checkpoints and logs there"
        return f"--resume: no run to continue: {err} (pass the run's --run_dir or --checkpoint_dir)"
    return None


def run_options(checkpoint_dir: Path, log_dir: Path) -> RunOptions:
    """The run's :class:`RunOptions` from the flags, for its folders."""
    from slamorl_jax.training_loop import SAVED_RUN_OPTIONS, RunOptions

    return RunOptions(
        checkpoint_dir=checkpoint_dir,
        log_dir=log_dir,
        save_interval=FLAGS.save_interval,
        keep=FLAGS.keep,
        resume=FLAGS.resume,
        eval_episodes=FLAGS.eval_episodes,
        progress=FLAGS.progress,
        explicit_flags=tuple(name for name in CONFIG_FLAGS if FLAGS[name].present),
        explicit_run_options=tuple(name for name in SAVED_RUN_OPTIONS if FLAGS[name].present),
    )


def check_run_folders(config: TrainConfig) -> None:
    """``--only_check_args``: the checks a starting run makes of its folders, making none (``fail``
    with one line): a resumed run's checkpoint folder holds a run whose config the flags agree with;
    a new run's folders can be made and hold no other run. Where the flags leave a folder to a new
    dated one under ``runs``, that folder is named (not made) and checked as a new folder."""
    default_run_dir = None
    if default_run_dir_needed():
        default_run_dir = run_dirs.stamped_folder()  # a path only: nothing is created
        if problem := run_dirs.dir_problem(default_run_dir):
            fail(f"the run's folder {str(default_run_dir)!r} {problem}")
    checkpoint_dir, log_dir, checkpoint_flag, log_flag = resolve_paths(default_run_dir)
    if FLAGS.resume and (problem := resume_folder_problem(checkpoint_flag, checkpoint_dir)):
        fail(problem)
    from slamorl_jax.checkpoint import CheckpointError
    from slamorl_jax.training_loop import resolve_run

    try:
        run_dirs.check_dirs([(checkpoint_flag, checkpoint_dir), (log_flag, log_dir)])  # as made in start
        resolve_run(config, run_options(checkpoint_dir, log_dir))
    except (run_dirs.RunDirError, CheckpointError) as err:
        fail(str(err))


def in_use_message(flag: str, folder: Path) -> str:
    """The refusal of a folder another training run holds (its lock, ``run_dirs.lock_run_dirs``)."""
    return f"{flag} {str(folder)!r} is in use by another training run; wait for it"


def run(argv: list[str] | None = None) -> None:
    """Console-script entry point; ``argv`` is the whole command line (default ``sys.argv``)."""
    help_as_main_module()
    run_command(lambda: app.run(main, argv=argv, flags_parser=parse_flags), PROG)


def help_as_main_module() -> None:
    """Make this module's flags and docstring the ``--help`` of the program that calls :func:`run`:
    absl lists the flags and docstring of the program's main module, which for the ``slamorl-train``
    console script is pip's wrapper (it listed none). ``python -m`` needs nothing: this module is
    the main one there."""
    program = sys.modules.get("__main__")
    if __name__ == "__main__" or program is None or not sys.argv:
        return
    for flag in FLAGS.get_key_flags_for_module(__name__):
        FLAGS.register_key_flag_for_module(sys.argv[0], flag)
    if not program.__doc__:
        program.__doc__ = __doc__


if __name__ == "__main__":
    run()

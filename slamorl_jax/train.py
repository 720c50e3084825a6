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
from typing import NoReturn

from absl import app, flags
from absl import logging as absl_logging  # defines --log_dir, which we use for metrics too

from slamorl_jax.cli_start import program_name, require_backend  # first of ours: quiet Ctrl-C
from slamorl_jax.distributed_start import join_if_launched

join_if_launched(sys.argv)  # a multi-process run joins before anything touches a device
require_backend()  # a platform the machine lacks: one line, before an import touches a device
# ruff: noqa: E402  (the imports below may start JAX's backend)
from slamorl_jax import run_dirs, train_checks
from slamorl_jax.agent.config import (
    LR_SCHEDULES,
    MINIBATCH_SHUFFLES,
    OBSERVATIONS,
    TrainConfig,
)
from slamorl_jax.agent.config_checks import check_finite, ignored_settings, validate_config
from slamorl_jax.agent.networks import ACTIVATIONS, INITIALIZERS
from slamorl_jax.cli_args import cleanup_on_interrupt, one_line, respelled, run_command
from slamorl_jax.compilation_cache import DEFAULT_CACHE_DIR, enable_compilation_cache, usable_cache_dir
from slamorl_jax.distributed import DistributedOptions
from slamorl_jax.distributed import resolve as resolve_distributed
from slamorl_jax.distributed_agreement import StartRefusedError, agree_to_start, agreement_pending
from slamorl_jax.env.action_sets import ACTION_SETS, NUM_TARGET_CPUS_PER_GPU, NUM_TARGET_GPUS
from slamorl_jax.env.params import INIT_STRATEGIES, WEIGHT_MODES
from slamorl_jax.env.prices import PRICE_PRESETS
from slamorl_jax.env.scenarios import SCENARIOS
from slamorl_jax.run_log_names import metrics_size

DEFAULTS = TrainConfig()
FLAGS = flags.FLAGS

flags.DEFINE_integer("num_envs", DEFAULTS.num_envs, "Jobs simulated in parallel (vectorised environments).")
flags.DEFINE_integer(
    "total_timesteps", DEFAULTS.total_timesteps, "Environment steps (job epochs) to train on."
)
flags.DEFINE_integer("rollout_length", DEFAULTS.rollout_length, "Steps per environment per PPO update.")
flags.DEFINE_integer("update_epochs", DEFAULTS.update_epochs, "PPO passes over each rollout.")
flags.DEFINE_integer(
    "num_minibatches",
    DEFAULTS.num_minibatches,
    "Minibatches per pass; must divide num_envs x rollout_length.",
)
flags.DEFINE_float(
    "learning_rate", DEFAULTS.learning_rate, "Adam learning rate (initial value of the schedule)."
)
flags.DEFINE_enum("lr_schedule", DEFAULTS.lr_schedule, LR_SCHEDULES, "Learning-rate schedule over training.")
flags.DEFINE_float("max_grad_norm", DEFAULTS.max_grad_norm, "Global-norm gradient clipping.")
flags.DEFINE_float("gamma", DEFAULTS.gamma, "Discount factor.")
flags.DEFINE_float("gae_lambda", DEFAULTS.gae_lambda, "GAE lambda.")
flags.DEFINE_float("clip_eps", DEFAULTS.clip_eps, "PPO ratio clipping.")
flags.DEFINE_float("value_coef", DEFAULTS.value_coef, "Weight of the (vector) value loss.")
flags.DEFINE_float("entropy_coef", DEFAULTS.entropy_coef, "Weight of the entropy bonus.")
flags.DEFINE_float("value_clip_eps", DEFAULTS.value_clip_eps, "Value clipping range (0 disables).")
flags.DEFINE_boolean(
    "normalise_advantages",
    DEFAULTS.normalise_advantages,
    "Normalise the scalarised advantages per minibatch.",
)
flags.DEFINE_float(
    "shaping",
    DEFAULTS.shaping,
    "Coefficient of potential-based reward shaping from the projected remaining time and cost (0 = off).",
)
flags.DEFINE_enum(
    "minibatch_shuffle",
    None,  # the action set's (agent/config.py, DEFAULT_MINIBATCH_SHUFFLE)
    list(MINIBATCH_SHUFFLES),
    "How each PPO pass deals transitions into minibatches: global (all shuffled together) or per_env "
    "(each env's steps shuffled, every minibatch an equal share of every env's: on a device mesh no "
    "transition leaves its device; needs --num_minibatches to divide --rollout_length). Default: "
    "per_env with --actions=targets or targets_relocate, global with --actions=paper.",
)
flags.DEFINE_float(
    "sla_met_bonus",
    DEFAULTS.sla_met_bonus,
    "End-of-job SLA reward per job-level SLA met (of six); 0 with --all_slas_bonus=0 is the paper's "
    "reward, where SLAs count only through the weighted mean severity.",
)
flags.DEFINE_float(
    "all_slas_bonus", DEFAULTS.all_slas_bonus, "Extra end-of-job SLA reward when all six SLAs are met."
)
flags.DEFINE_boolean(
    "moves_leave_contention",
    DEFAULTS.moves_leave_contention,
    "A GPU change restarts the job on fresh nodes, leaving their contention, spells and slower "
    "nodes (env/shifts.py); --nomoves_leave_contention keeps them, as the env before 7553e9f did.",
)
flags.DEFINE_float(
    "reallocation_pause_s",
    None,
    "Seconds a GPU change or a relocation pauses the job to checkpoint and restart it (billed). "
    "Unset: the environment's 30 s (Pollux's measurement); a platform whose restarts cost more "
    "(queueing, a cold cache) sets its own; at 120 s, --relocate_gain_init=12 keeps every seed "
    "relocating (docs/scenarios.md, 'Relocation').",
)
flags.DEFINE_list(
    "hidden_sizes",
    [str(h) for h in DEFAULTS.hidden_sizes],
    "Hidden layer sizes of actor and critic, e.g. 256,256.",
)
flags.DEFINE_list(
    "target_cpus_per_gpu",
    [f"{x:g}" for x in DEFAULTS.target_cpus_per_gpu],
    f"The absolute targets' {NUM_TARGET_CPUS_PER_GPU} CPUs-per-GPU values, increasing (0: the fewest "
    f"CPUs), each with every GPU count 1-{NUM_TARGET_GPUS}: the allocations the targets name and the "
    "forecast block describes.",
)
flags.DEFINE_enum("activation", DEFAULTS.activation, list(ACTIVATIONS), "Hidden-layer activation.")
flags.DEFINE_enum("initializer", DEFAULTS.initializer, list(INITIALIZERS), "Kernel initialiser.")
flags.DEFINE_float(
    "adapt_strength",
    DEFAULTS.adapt_strength,
    "Adaptation strength eta of the SLA-severity weights (0 = static).",
)
flags.DEFINE_enum(
    "weights",
    DEFAULTS.weights,
    list(WEIGHT_MODES),
    "Objective weights the policy sees and the loss uses: static (the preference; as "
    "--adapt_strength=0), severity (the paper's: tilted by eta x the current SLA severities) or dual "
    "(per-SLA multipliers that grow while an SLA is at risk and decay when it holds; env/dual_weights.py).",
)
flags.DEFINE_float(
    "dual_step",
    DEFAULTS.dual_step,
    "--weights=dual: each SLA's multiplier grows by this times its severity at every reading it is at risk.",
)
flags.DEFINE_float(
    "dual_decay",
    DEFAULTS.dual_decay,
    "--weights=dual: fraction of an SLA's multiplier lost at every reading it holds (0 to 1).",
)
flags.DEFINE_string("scenario", DEFAULTS.scenario, f"Training scenario: {', '.join(SCENARIOS)}.")
flags.DEFINE_float(
    "event_share",
    None,
    "Share of training jobs that meet one mid-run event (a contention spell, a slower node, a price "
    "rise, a deadline or budget cut, a preemption; env/shifts.py), every kind equally likely. "
    "Unset: the scenario's own (mixed 0.3, shifting 1, the others 0).",
)
flags.DEFINE_string(
    "preference",
    None,
    "Fixed preference for every job: time, cost, balanced or 'w_time,w_cost,w_sla'. "
    "Unset: each job's scenario preset or a random one (mixed).",
)
flags.DEFINE_enum(
    "init_strategy",
    DEFAULTS.init_strategy,
    INIT_STRATEGIES,
    "Initial allocation of each job (mixed: the request, random allocations and cold starts).",
)
flags.DEFINE_boolean(
    "target_head",
    DEFAULTS.target_head,
    "With --actions=targets, score every target with one shared head from its own forecast "
    "(--notarget_head: a plain MLP actor).",
)
flags.DEFINE_boolean(
    "suggestion_prior",
    DEFAULTS.suggestion_prior,
    "With --actions=targets, add a learned gain on the action the forecast ranks first to the "
    "actor's logits (--nosuggestion_prior: a plain MLP actor; --target_head replaces it).",
)
flags.DEFINE_boolean(
    "paper_suggestion_prior",
    DEFAULTS.paper_suggestion_prior,
    "With --actions=paper, add a learned gain on the move toward the candidate the forecast ranks "
    "first to the actor's logits (keep: the no-op; a target: GPUs and CPUs each one step its way; "
    "--nopaper_suggestion_prior: a plain MLP actor).",
)
flags.DEFINE_float(
    "suggestion_gain_init",
    DEFAULTS.suggestion_gain_init,
    "The suggestion prior's starting gain, 0-20 (0: no head start; 4: the suggested action starts "
    "with about 40 % of the policy's probability).",
)
flags.DEFINE_float(
    "relocate_gain_init",
    DEFAULTS.relocate_gain_init,
    "With --actions=targets_relocate and the suggestion prior, the starting gain, 0-20, on relocating "
    "after an epoch slower than the job's model forecast (0: no relocate prior).",
)
flags.DEFINE_float(
    "relocate_gate",
    DEFAULTS.relocate_gate,
    "With the relocate prior, relocate is masked unless the last epoch ran at least this much slower "
    "than the job's model forecast, in log time, 0-1 (0.1: x1.105, one std of the forecast noise; "
    "0: never masked).",
)
flags.DEFINE_float(
    "relocate_payback",
    DEFAULTS.relocate_payback,
    "With the relocate prior, relocate is also masked unless a relocation after contention is "
    "expected to save at least this many pauses, 0-100 (1: break even; 0: never masked).",
)
flags.DEFINE_enum(
    "actions",
    DEFAULTS.actions,
    ACTION_SETS,
    "Action set: paper = the paper's 9 one-step moves; targets = those plus 80 absolute targets; "
    "targets_relocate = targets plus relocate (the same allocation on fresh nodes, one GPU pause).",
)
flags.DEFINE_enum(
    "observation",
    DEFAULTS.observation,
    OBSERVATIONS,
    "What the policy reads: full = every feature (the paper's 21, then the forecast block); paper = "
    "the paper's 21 features alone (with --actions=paper and --paper_suggestion_prior=false: the "
    "paper's design).",
)
flags.DEFINE_enum("prices", DEFAULTS.prices, PRICE_PRESETS, "Price preset.")
flags.DEFINE_integer(
    "seed", DEFAULTS.seed, "Random seed (same seed and flags give identical parameters on CPU)."
)
flags.DEFINE_integer(
    "updates_per_chunk",
    DEFAULTS.updates_per_chunk,
    "PPO updates per jitted chunk: also how often metrics.jsonl, TensorBoard and the progress bar get "
    "a line and when a checkpoint can be saved.",
)
flags.DEFINE_string(
    "init_from",
    DEFAULTS.init_from,
    "Start the actor-critic from this checkpoint's policy (a run's checkpoint directory or a step; "
    "same network layout), with a fresh optimiser; unset: a fresh initialisation.",
)
flags.DEFINE_string(
    "checkpoint_dir",
    None,
    "Checkpoint directory (default: <run_dir>/checkpoints); <X>/checkpoints without --run_dir or "
    "--log_dir logs to <X>/logs.",
)
# --log_dir is absl's own flag; listed in --help with what a run writes there.
LOG_DIR_HELP = "Directory of metrics.jsonl, the TensorBoard events, config.json and summary.json "
FLAGS["log_dir"].help = LOG_DIR_HELP + "(default: <run_dir>/logs)."
flags.declare_key_flag("log_dir")
flags.DEFINE_string(
    "run_dir",
    None,
    "Parent of the default checkpoint and log directories (default: runs/<date-time>; with --resume, "
    "the run to continue, or the parent of --checkpoint_dir=<run>/checkpoints).",
)
flags.DEFINE_integer(
    "save_interval",
    100,
    "Save a checkpoint at each multiple of this many PPO updates (at the end of the chunk that reaches "
    "it: checkpoints, like the metrics' lines, fall on --updates_per_chunk boundaries) and at the end.",
)
flags.DEFINE_integer("keep", 3, "Checkpoints to keep.")
flags.DEFINE_boolean(
    "resume",
    False,
    "Continue from the latest checkpoint of --run_dir or --checkpoint_dir (a damaged one is set aside).",
)
flags.DEFINE_integer("eval_episodes", 1024, "Fresh jobs per scenario in the final evaluation (0 skips it).")
flags.DEFINE_boolean("progress", True, "Show a progress bar.")

flags.DEFINE_boolean(
    "distributed",
    False,
    "Join a multi-process run (jax.distributed): settings from the flags below, else "
    "JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and JAX_PROCESS_ID, else the cluster JAX detects "
    "(SLURM); see launch/README.md.",
)
flags.DEFINE_string(
    "coordinator_address", None, "host:port of process 0's coordination service (implies --distributed)."
)
flags.DEFINE_integer("num_processes", None, "Processes in a --distributed run.")
flags.DEFINE_integer("process_id", None, "This process's index in a --distributed run (0 logs and writes).")
flags.DEFINE_integer(
    "distributed_heartbeat_s",
    DistributedOptions.heartbeat_timeout_s,
    "A --distributed run ends with an error when a process has not answered for this many seconds.",
)
flags.DEFINE_integer(
    "distributed_init_timeout_s",
    DistributedOptions.initialization_timeout_s,
    "Seconds to wait for every process of a --distributed run to join.",
)

flags.DEFINE_string(
    "compilation_cache_dir",
    DEFAULT_CACHE_DIR,
    "JAX persistent compilation cache (later runs skip most compilation); empty disables it.",
)

CONFIG_FLAGS = tuple(f.name for f in dataclasses.fields(TrainConfig))
#: Flags beside the config that every process of a multi-process run must be given alike (with
#: the run's folders): how often it saves, what it keeps, whether it resumes, what it evaluates.
AGREED_RUN_FLAGS = ("save_interval", "keep", "resume", "eval_episodes")


def config_from_flags() -> TrainConfig:
    """The :class:`TrainConfig` the command line asks for (not yet validated)."""
    values = {name: FLAGS[name].value for name in CONFIG_FLAGS}
    try:
        values["hidden_sizes"] = tuple(int(h) for h in FLAGS.hidden_sizes)
    except ValueError:
        raise ValueError(f"--hidden_sizes must be integers, got {','.join(FLAGS.hidden_sizes)}") from None
    try:
        values["target_cpus_per_gpu"] = tuple(float(x) for x in FLAGS.target_cpus_per_gpu)
    except ValueError:
        grid = ",".join(FLAGS.target_cpus_per_gpu)
        raise ValueError(f"--target_cpus_per_gpu must be numbers, got {grid}") from None
    return TrainConfig(**values)


def refuse_ignored_flags(config: TrainConfig) -> None:
    """``ValueError`` for a flag given with another value than its default that ``config``'s weight
    mode or action set never reads (``agent.config_checks.ignored_settings``): the run would record it in
    its config and train as if it were not there."""
    defaults = TrainConfig(actions=config.actions)
    for name, why in ignored_settings(config).items():
        if FLAGS[name].present and getattr(config, name) != getattr(defaults, name):
            raise ValueError(f"--{name} has no effect {why}; leave it out")


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


def check_run_flags() -> None:
    """Validate the flags that are not part of the training config."""
    if FLAGS.save_interval < 1:
        raise ValueError(f"--save_interval must be >= 1, got {FLAGS.save_interval}")
    if FLAGS.keep < 1:
        raise ValueError(f"--keep must be >= 1, got {FLAGS.keep}")
    train_checks.check_eval_episodes(FLAGS.eval_episodes)
    for name in ("run_dir", "checkpoint_dir", "log_dir"):
        # An unset shell variable: not the default folder. --log_dir is absl's, whose default is "".
        given = FLAGS[name].present if name == "log_dir" else True
        if given and getattr(FLAGS, name) == "":
            raise ValueError(f"--{name} is empty: name a folder (or leave the flag out)")
    if FLAGS.resume and FLAGS.checkpoint_dir is None and FLAGS.run_dir is None:
        raise ValueError("--resume needs --run_dir or --checkpoint_dir (the run to continue)")


def fail(message: str) -> NoReturn:
    """Print one line to stderr and exit with code 2 (bad input). In a multi-process run that has not
    started yet, the other processes are told first, so they stop too (``distributed_agreement``)."""
    if agreement_pending():
        with contextlib.suppress(StartRefusedError):  # this process's own refusal: the line below
            agree_to_start(message, FLAGS["distributed_init_timeout_s"].value)
    print(f"error: {one_line(message)}", file=sys.stderr)
    sys.exit(2)


def absl_spelling(arg: str) -> str:
    """``arg`` as absl reads it: ``-h`` is ``--help``, a name with ``-`` for ``_`` is the flag's
    (``--num-envs``: ``cli_args.respelled``), and argparse's ``--no-NAME`` of a boolean flag
    (``evaluate --no-progress``) is absl's ``--noNAME``, so either spelling works in every command."""
    if arg == "-h":
        return "--help"
    arg = respelled(arg, _is_flag)
    for negation in ("--no-", "--no"):  # argparse's and absl's negation of a boolean, either spelling
        name = arg.removeprefix(negation)
        if name != arg and not _is_flag(arg):
            name = respelled(f"--{name}", _is_flag).removeprefix("--")
            if name in FLAGS and FLAGS[name].boolean:
                return f"--no{name}"
    return arg


def _is_flag(flag: str) -> bool:
    """Whether ``flag`` (``--name``, ``-name``) names one of train's flags."""
    return flag.lstrip("-") in FLAGS


def parse_flags(argv: list[str]) -> list[str]:
    """absl flag parsing with bad flags reported in one line and exit code 2 (each argument spelled
    by :func:`absl_spelling`); the help flags (absl ends them with status 1) end with status 0."""
    FLAGS.unparse_flags()  # a fresh parse: no value of an earlier in-process run carries over
    end = argv.index("--") if "--" in argv else len(argv)
    argv = [*(absl_spelling(arg) for arg in argv[:end]), *argv[end:]]
    try:
        return FLAGS(argv)
    except SystemExit as exit_:
        # absl's --help, --helpshort, --helpfull and --helpxml print and exit with status 1; a
        # bad flag raises flags.Error instead, so status 1 here is a help that was asked for.
        raise SystemExit(0 if exit_.code == 1 else exit_.code) from None
    except flags.Error as err:
        fail(str(err).splitlines()[0])
    except (OSError, UnicodeError, ValueError) as err:  # a --flagfile that cannot be read as text
        fail(f"cannot read the command line: {err}")
    return argv  # unreachable


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
    if FLAGS.resume:
        try:
            run_dirs.check_dir(checkpoint_flag, checkpoint_dir, must_exist=True)
        except run_dirs.RunDirError as err:
            run_dirs.remove_created(claimed)
            if run_dirs.path_exists(checkpoint_dir) and checkpoint_dir.is_dir():  # there, not writable
                fail(f"--resume: {err}: a resumed run saves its checkpoints and logs there")
            fail(f"--resume: no run to continue: {err} (pass the run's --run_dir or --checkpoint_dir)")
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
            from slamorl_jax.training_loop import SAVED_RUN_OPTIONS, RunOptions, run_training

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
                settings = {
                    **dataclasses.asdict(config),
                    # as given: nodes may mount one shared folder at other paths (check_shared
                    # then finds whether they share it)
                    "checkpoint_dir": str(checkpoint_dir),
                    "log_dir": str(log_dir),
                    **{name: FLAGS[name].value for name in AGREED_RUN_FLAGS},
                }
                agree_to_start(None, distributed.initialization_timeout_s, settings, checkpoint_dir)
                owns_dirs[0] = not distributed.enabled or jax.process_index() == 0
            except ValueError as err:  # StartRefusedError is one
                fail(str(err))

            options = RunOptions(
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
            try:
                code = run_training(config, options)
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
                print(f"error: {one_line(str(err))}; {hint}", file=sys.stderr)
                code = 1
    finally:  # a run that saved and logged nothing (refused late, stopped, or a finished run
        remove_if_empty()  # resumed into a new log folder) leaves none of the folders it made
        for lock in locks:
            run_dirs.unlock_run_dir(lock)
    sys.exit(code)


def in_use_message(flag: str, folder: Path) -> str:
    """The refusal of a folder another training run holds (its lock, ``run_dirs.lock_run_dirs``)."""
    return f"{flag} {str(folder)!r} is in use by another training run; wait for it"


def run(argv: list[str] | None = None) -> None:
    """Console-script entry point; ``argv`` is the whole command line (default ``sys.argv``)."""
    help_as_main_module()
    run_command(lambda: app.run(main, argv=argv, flags_parser=parse_flags), program_name("slamorl_jax.train"))


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

"""The training command's flags (absl): one per ``TrainConfig`` field, with its default, and the
run's own (folders, checkpoints, evaluation, many processes); :func:`config_from_flags` reads the
config they ask for, :func:`check_run_flags` checks the others, and :func:`absl_spelling` lets
every flag be spelled as the package's other commands take it. ``train.py`` runs them."""

from __future__ import annotations

import dataclasses

import absl.logging  # noqa: F401  (defines --log_dir, which a run's metrics use too)
from absl import flags

from slamorl_jax import train_checks
from slamorl_jax.agent.config import LR_SCHEDULES, MINIBATCH_SHUFFLES, OBSERVATIONS, TrainConfig
from slamorl_jax.agent.config_checks import ignored_settings
from slamorl_jax.agent.networks import ACTIVATIONS, INITIALIZERS
from slamorl_jax.cli_args import respelled
from slamorl_jax.compilation_cache import DEFAULT_CACHE_DIR
from slamorl_jax.distributed import DistributedOptions
from slamorl_jax.env.action_sets import ACTION_SETS, NUM_TARGET_CPUS_PER_GPU, NUM_TARGET_GPUS
from slamorl_jax.env.params import INIT_STRATEGIES, WEIGHT_MODES
from slamorl_jax.env.prices import PRICE_PRESETS
from slamorl_jax.env.scenarios import SCENARIOS

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
    "Unset: the environment's 30 s (Pollux's simulator's constant); a platform whose restarts cost more "
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
    "With --actions=targets or targets_relocate, score every target with one shared head from its "
    "own forecast (--notarget_head: a plain MLP actor).",
)
flags.DEFINE_boolean(
    "suggestion_prior",
    DEFAULTS.suggestion_prior,
    "With --actions=targets or targets_relocate, add a learned gain on the action the forecast ranks "
    "first to the actor's logits (--nosuggestion_prior: a plain MLP actor; --target_head replaces it).",
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
flags.DEFINE_string(
    "catalog",
    DEFAULTS.catalog,
    "A calibrated catalogue of your own (the JSON `python -m slamorl_jax.calibration --output=...` "
    "writes: workloads, GPU types, prices, request mix) to train on; unset: the shipped one. The "
    "run's checkpoints carry it, so its policy runs on it wherever it is loaded.",
)
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

"""``TrainConfig``: every knob of the learner, with up-front validation (one clear message per error)."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from typing import Any

import numpy as np

from slamorl_jax.agent.networks import ACTIVATIONS, INITIALIZERS, NetworkConfig
from slamorl_jax.cli_args import INT32_MAX
from slamorl_jax.env.action_sets import (
    ACTION_SETS,
    DEFAULT_ACTION_SET,
    NUM_MOVES,
    NUM_TARGETS,
    RELOCATE_ACTION,
    can_relocate,
    has_targets,
    num_actions,
)
from slamorl_jax.env.actions import NO_OP_ACTION
from slamorl_jax.env.defaults import (
    DEFAULT_ADAPT_STRENGTH,
    DEFAULT_ALL_SLAS_BONUS,
    DEFAULT_CONTENTION_END_PROB,
    DEFAULT_CONTENTION_START_PROB,
    DEFAULT_DUAL_DECAY,
    DEFAULT_DUAL_STEP,
    DEFAULT_RELOCATE_GATE,
    DEFAULT_RELOCATE_PAYBACK,
    DEFAULT_SLA_MET_BONUS,
    DEFAULT_TARGET_CPUS_PER_GPU,
)
from slamorl_jax.env.objectives import PREFERENCES, preference_vector
from slamorl_jax.env.observation import FEATURE_NAMES, NUM_PAPER_FEATURES, TARGET_BLOCK
from slamorl_jax.env.params import INIT_STRATEGIES, WEIGHT_MODES
from slamorl_jax.env.prices import PRICE_PRESETS
from slamorl_jax.env.relocation_payback import contention_persistence
from slamorl_jax.env.scenarios import SCENARIOS
from slamorl_jax.env.target_grid import check_target_grid, with_target_grid

LR_SCHEDULES = ("constant", "linear", "cosine")
#: What the actor-critic reads of the observation: every feature, or the paper's 21 alone.
OBSERVATIONS = ("full", "paper")
# How each PPO pass deals the rollout's transitions into minibatches: ``global`` shuffles them all
# together (PureJaxRL's way); ``per_env`` shuffles each env's own steps and gives every minibatch
# an equal share of every env's, so a sharded env batch never leaves its device (trainer._learn).
MINIBATCH_SHUFFLES = ("global", "per_env")
# Each action set's shuffle when none is asked for (``TrainConfig.minibatch_shuffle = None``): per
# env for ``targets`` (7 % faster on one device, scores the same); global for ``paper``, where three
# seeds with per-env minibatches missed issue 7's bar (README, "The main job").
DEFAULT_MINIBATCH_SHUFFLE = {"targets": "per_env", "targets_relocate": "per_env", "paper": "global"}


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """PPO with adaptive-weight advantages on ``JobAllocationEnv`` (see ``slamorl_jax.train --helpfull``)."""

    num_envs: int = 1024
    total_timesteps: int = 24_576_000
    rollout_length: int = 16
    # Two PPO passes over each rollout: with the 351-feature observation the learner, not the env,
    # dominates an update on CPU (4 passes: 35k steps/s, 2 passes: 56k on the 2-core machine), and
    # three training seeds at 2 score as those at 4 did (README, "The main job").
    update_epochs: int = 2
    num_minibatches: int = 4
    # MINIBATCH_SHUFFLES; None = the action set's (DEFAULT_MINIBATCH_SHUFFLE), resolved on
    # construction. ``per_env`` (targets): each env's own steps shuffled into the minibatches, every
    # minibatch a share of every env's: on one device the learning half of an update runs 14 %
    # faster than with the global shuffle (the default command 7 %), and on a mesh no transition
    # leaves its device (README, "Many devices and many hosts"); three seeds of the default score as
    # with the global shuffle. ``global`` (paper): three paper seeds score 1.027x their anchor on
    # deadline-critical jobs against 1.053x per env (README, "The main job").
    minibatch_shuffle: str | None = None
    learning_rate: float = 1e-3
    lr_schedule: str = "linear"
    max_grad_norm: float = 0.5
    # Jobs are finite (2-200 decisions) and judged on their undiscounted totals, and the observation
    # carries progress and epochs left, so values are time-aware: no discount. A discount of 0.99
    # would shrink a 200-epoch job's end-of-job SLA reward to 0.13 of its worth at the start.
    gamma: float = 1.0
    gae_lambda: float = 0.95
    clip_eps: float = 0.2
    value_coef: float = 0.5
    entropy_coef: float = 0.01
    value_clip_eps: float = 0.2
    normalise_advantages: bool = True
    shaping: float = 1.0  # potential-based shaping from the env's projections (0 = off)
    # The end-of-job SLA reward (env/job_env.py): per job-level SLA met, and extra for all six.
    # 0 and 0 is the paper's reward, where SLAs count only through the weighted mean severity.
    sla_met_bonus: float = DEFAULT_SLA_MET_BONUS
    all_slas_bonus: float = DEFAULT_ALL_SLAS_BONUS
    # Whether a GPU change leaves contended nodes (EnvParams.moves_leave_contention, env/shifts.py).
    moves_leave_contention: bool = True
    # The checkpoint-restart pause of a GPU change or a relocation, in seconds (billed;
    # EnvParams.reallocation_pause_s); None = the environment's (30 s, Pollux's simulator's constant). A
    # platform whose restarts cost more (a scheduler queue, a cold cache) trains with its own.
    reallocation_pause_s: float | None = None
    hidden_sizes: tuple[int, ...] = (128, 128)
    activation: str = "tanh"
    initializer: str = "orthogonal"
    adapt_strength: float = DEFAULT_ADAPT_STRENGTH
    # Form of the objective weights (env/dual_weights.py): static (the preference), severity (the
    # paper's memoryless tilt by eta x severities) or dual (per-SLA multipliers with memory).
    weights: str = "severity"
    # The dual form's multiplier gain per unit of severity and its decay per reading the SLA holds.
    dual_step: float = DEFAULT_DUAL_STEP
    dual_decay: float = DEFAULT_DUAL_DECAY
    scenario: str = "mixed"
    # Share of training jobs that meet one mid-run event (env/shifts.py, every kind equally likely);
    # None = the scenario's own (mixed 0.3, shifting 1, the others 0).
    event_share: float | None = None
    preference: str | None = None  # a preset name, "w_time,w_cost,w_sla", or None = the scenario's
    init_strategy: str = "mixed"  # request, random allocations and cold starts (env/params.py)
    # "paper" (9 moves), "targets" (moves + absolute targets) or "targets_relocate" (and relocate)
    actions: str = DEFAULT_ACTION_SET
    # What the actor-critic reads of the observation (OBSERVATIONS): "full" = every feature;
    # "paper" = the paper's 21 features alone (the env still computes all of them), for a policy of
    # the paper's design (with --actions=paper, no prior that reads the forecast block).
    observation: str = "full"
    target_head: bool = False  # targets: score each target with a shared head (networks.TargetScorer)
    # The absolute targets' CPUs per GPU (every GPU count of the grid x these, ``action_sets.py``; 0 =
    # the fewest CPUs): which allocations the targets name and the forecast block describes, in
    # every action set. A policy runs on the grid it was trained on (``observation_layout``).
    target_cpus_per_gpu: tuple[float, ...] = DEFAULT_TARGET_CPUS_PER_GPU
    # targets: a learned gain on the action the env's forecast ranks first (networks.SuggestionActor;
    # not with the shared target head, which reads the suggestion flags with the other forecasts)
    suggestion_prior: bool = True
    # ... and the gain it starts with: 4 gives the suggested action about 40 % of the first policy's
    # probability over 90 actions, so training starts near following the forecast and learns where
    # not to, instead of having to discover the suggestion first (0: no head start).
    suggestion_gain_init: float = 4.0
    # paper: the same learned gain on the paper move toward the forecast's first choice
    # (networks.move_toward_suggestion): with it the 9-move policy comes within 1.05x of its
    # reachable anchor in the default budget (README, "The main job"); ignored with targets.
    paper_suggestion_prior: bool = True
    # targets_relocate (with the suggestion prior): the head start of a learned gain on relocating
    # after an epoch slower than the job's model forecast (networks.relocate_flag): 6 gives relocate
    # about the suggested action's logit bonus after an epoch 40 % slower than forecast (0: none).
    relocate_gain_init: float = 6.0
    # ... and the gate on it: relocate is masked unless the last epoch ran at least this much slower
    # (log time) than the job's model forecast (networks.relocate_allowed; 0: never masked).
    relocate_gate: float = DEFAULT_RELOCATE_GATE
    # ... and the payback rule: relocate is masked unless a relocation after contention is expected
    # to save at least this many pauses (networks.relocation_pays, env/relocation_payback.py; 0: off).
    relocate_payback: float = DEFAULT_RELOCATE_PAYBACK
    prices: str = "aws"
    seed: int = 0
    updates_per_chunk: int = 10
    # Start the actor-critic from this checkpoint's policy (same network layout; warm_start.py)
    # instead of a fresh initialisation; None = fresh. Recorded so a run says where it started.
    init_from: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.target_cpus_per_gpu, list):  # a tuple, as stored and compared (and hashable)
            object.__setattr__(self, "target_cpus_per_gpu", tuple(self.target_cpus_per_gpu))
        if self.minibatch_shuffle is None:  # the action set's (an unknown set fails validation)
            shuffle = DEFAULT_MINIBATCH_SHUFFLE.get(self.actions, "global")
            object.__setattr__(self, "minibatch_shuffle", shuffle)

    @property
    def batch_size(self) -> int:
        """Transitions collected per update."""
        return self.num_envs * self.rollout_length

    @property
    def minibatch_size(self) -> int:
        """Transitions per gradient step."""
        return self.batch_size // self.num_minibatches

    @property
    def num_updates(self) -> int:
        """PPO updates needed to reach ``total_timesteps`` (rounded up to whole chunks)."""
        updates = -(-self.total_timesteps // self.batch_size)
        return -(-updates // self.updates_per_chunk) * self.updates_per_chunk

    @property
    def num_chunks(self) -> int:
        """Jitted chunks of ``updates_per_chunk`` updates."""
        return self.num_updates // self.updates_per_chunk

    @property
    def network(self) -> NetworkConfig:
        """The actor-critic shape (its outputs sized to the action set)."""
        targets = has_targets(self.actions)
        block = TARGET_BLOCK if targets and self.target_head else ()
        with_prior = targets and self.suggestion_prior and not self.target_head
        prior = suggestion_features(self.actions) if with_prior else ()
        paper_prior = self.actions == "paper" and self.paper_suggestion_prior
        moves = paper_move_prior(self.target_cpus_per_gpu) if paper_prior else {}
        relocating = with_prior and can_relocate(self.actions) and self.relocate_gain_init > 0
        relocate = {
            "relocate_prior": relocate_prior(),
            "relocate_gain_init": self.relocate_gain_init,
            "relocate_gate": self.relocate_gate,
            **(payback_fields(self.relocate_payback) if self.relocate_payback > 0 else {}),
        }
        return NetworkConfig(
            tuple(self.hidden_sizes),
            self.activation,
            self.initializer,
            num_actions(self.actions),
            obs_dim=NUM_PAPER_FEATURES if self.observation == "paper" else None,
            target_block=block,
            suggestion_features=prior,
            suggestion_gain_init=self.suggestion_gain_init if prior or moves else 0.0,
            **moves,
            **(relocate if relocating else {}),
        )

    def to_json(self) -> str:
        """The resolved configuration as JSON (stored beside every checkpoint)."""
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Rebuild from :meth:`to_json`'s dict; unknown keys raise ``ValueError``."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown config keys: {', '.join(unknown)}")
        values = dict(data)
        # Checkpoints written before action sets existed used the paper's 9 moves; they predate
        # the gamma and init_strategy defaults too, and always stored them.
        values.setdefault("actions", "paper")
        values.setdefault("target_head", False)  # nor the shared target head
        values.setdefault("suggestion_prior", False)  # nor the forecast's suggestion
        values.setdefault("suggestion_gain_init", 0.0)  # nor its head start
        # nor the relocate prior: a targets_relocate run then trained without it; for the other sets
        # it changes nothing, so they read the default (and a default run stays equal to its config)
        if values.get("actions") == "targets_relocate":
            values.setdefault("relocate_gain_init", 0.0)
            values.setdefault("relocate_gate", 0.0)  # nor the gate on it (README, "Relocation gate")
            values.setdefault("relocate_payback", 0.0)  # nor the payback rule ("Relocation payback")
        # nor the paper moves' prior (a paper run saved then had none; with targets it is ignored)
        values.setdefault("paper_suggestion_prior", values["actions"] != "paper")
        values.setdefault("weights", "severity")  # the paper's form was the only one
        values.setdefault("observation", "full")  # every feature (the 21 of old ones: their meta says)
        values.setdefault("minibatch_shuffle", "global")  # and every pass shuffled all steps together
        # and the targets' CPUs per GPU were those of the grid before it could be set
        values["target_cpus_per_gpu"] = _float_tuple(
            "target_cpus_per_gpu", values.get("target_cpus_per_gpu", GRID_BEFORE_ITS_FLAG)
        )
        if "hidden_sizes" in values:
            sizes = values["hidden_sizes"]
            if not isinstance(sizes, list | tuple) or not all(type(h) is int for h in sizes):
                raise ValueError(f"hidden_sizes must be a list of integers, got {sizes!r}")
            values["hidden_sizes"] = tuple(sizes)
        for field in dataclasses.fields(cls):
            if field.name in values and field.name not in ("hidden_sizes", "target_cpus_per_gpu"):
                values[field.name] = _typed(field.name, str(field.type), values[field.name])
        return cls(**values)


#: The targets' CPUs per GPU of every run saved before ``TrainConfig.target_cpus_per_gpu`` existed.
GRID_BEFORE_ITS_FLAG = (0.0, 2.0, 4.0, 8.0, 12.0)


def _numbers(value: Any) -> bool:
    """Whether ``value`` is a list or tuple of ints and floats (not bools, not text)."""
    return isinstance(value, list | tuple) and all(type(x) in (int, float) for x in value)


def _float_tuple(name: str, value: Any) -> tuple[float, ...]:
    """A stored list of numbers as a tuple of floats (``ValueError`` for anything else)."""
    if not _numbers(value):
        raise ValueError(f"{name} must be a list of numbers, got {value!r}")
    return tuple(float(x) for x in value)


def _typed(name: str, annotation: str, value: Any) -> Any:
    """``value`` of a stored config field checked against its annotation (``int``, ``float``, ``bool``,
    ``str``, optionally ``| None``): a float seed or a text flag would pass ``validate_config`` and fail
    later with another error. A stored integer is a float field's value too."""
    kind, _, none = annotation.partition(" | ")
    if none and value is None:
        return value
    ok = {
        "int": type(value) is int,
        "bool": type(value) is bool,
        "str": type(value) is str,
        "float": type(value) in (int, float),
    }[kind]
    if not ok:
        raise ValueError(f"{name} must be {annotation}, got {value!r}")
    return float(value) if kind == "float" else value


def suggestion_features(actions: str) -> tuple[int, ...]:
    """Per action of the set, the observation feature that flags it as the forecast's first choice
    (keep's flag for the no-op, each target's own flag), -1 for the one-step moves and relocate
    (the forecast never names it)."""
    index = {name: i for i, name in enumerate(FEATURE_NAMES)}
    out = [-1] * num_actions(actions)
    out[NO_OP_ACTION] = index["keep_suggested"]
    for k in range(NUM_TARGETS if has_targets(actions) else 0):
        out[NUM_MOVES + k] = index[f"target{k}_suggested"]
    return tuple(out)


def payback_fields(threshold: float) -> dict[str, Any]:
    """``NetworkConfig``'s payback-rule fields for ``threshold`` pauses (``networks.relocation_pays``):
    the observation's ``pause_share`` and ``epochs_left`` features and the default contention
    chain's one-epoch autocorrelation (``env/relocation_payback.py``). The rates are the env's
    defaults (no flag sets them), read when the network is built, not saved with a run: a change of
    ``env/defaults.py``'s rates changes every saved policy's rule with them."""
    return {
        "relocate_payback": float(threshold),
        "payback_features": (FEATURE_NAMES.index("pause_share"), FEATURE_NAMES.index("epochs_left")),
        "contention_persistence": contention_persistence(
            DEFAULT_CONTENTION_START_PROB, DEFAULT_CONTENTION_END_PROB
        ),
    }


def relocate_prior() -> tuple[int, int]:
    """``NetworkConfig.relocate_prior``: the relocate action and the observation's surprise feature."""
    return (RELOCATE_ACTION, FEATURE_NAMES.index("surprise"))


@functools.cache
def paper_move_prior(cpus_per_gpu: tuple[float, ...] = DEFAULT_TARGET_CPUS_PER_GPU) -> dict[str, Any]:
    """``NetworkConfig``'s move-prior fields for the default cluster and the target grid of
    ``cpus_per_gpu`` (the grid the observation's forecast block describes, ``observation_layout``)."""
    from slamorl_jax.env.defaults import default_params
    from slamorl_jax.env.observation import allocation_scales

    params = with_target_grid(default_params(), cpus_per_gpu)
    index = {name: i for i, name in enumerate(FEATURE_NAMES)}
    targets = np.asarray(params.target_allocation)
    return {
        "move_prior_flags": (
            index["keep_suggested"],
            *(index[f"target{k}_suggested"] for k in range(len(targets))),
        ),
        "move_prior_targets": tuple((int(g), int(c)) for g, c in targets),
        "move_prior_scale": tuple(float(scale) for scale in allocation_scales(params)),
    }


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


MAX_NUM_ENVS = 2**22  # 4,194,304 jobs in parallel: far beyond one accelerator's memory today
#: The largest float32: a setting beyond it becomes ``inf`` in the learner's arithmetic.
FLOAT32_MAX = 3.4028234663852886e38


def gradient_steps(config: TrainConfig, updates: int) -> int:
    """The optimiser's steps after ``updates`` PPO updates (``update_epochs x num_minibatches`` each)."""
    return updates * config.update_epochs * config.num_minibatches


def check_types(config: TrainConfig) -> None:
    """Every setting has its field's type (an ``int`` count, not ``16.5``, ``True`` or ``"16"``; a
    ``str`` preference; ``hidden_sizes`` a sequence of ``int``, ``target_cpus_per_gpu`` one of
    numbers): a wrong one would fail deep inside JAX with an error that names no setting."""
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if field.name == "hidden_sizes":
            _require(
                isinstance(value, list | tuple) and all(type(h) is int for h in value),
                f"--hidden_sizes must be a sequence of integers, got {value!r}",
            )
        elif field.name == "target_cpus_per_gpu":
            _require(_numbers(value), f"--target_cpus_per_gpu must be a sequence of numbers, got {value!r}")
        else:
            try:
                _typed(field.name, str(field.type), value)
            except ValueError:
                raise ValueError(f"--{field.name} must be {field.type}, got {value!r}") from None


def check_finite(config: TrainConfig) -> None:
    """Every floating-point setting is a finite number that float32, in which the learner computes,
    can hold (``inf`` passes ``>= 0`` checks; 1e39 becomes ``inf`` there)."""
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        values = value if isinstance(value, tuple) else (value,)
        for number in values:
            if isinstance(number, float) and not (math.isfinite(number) and abs(number) <= FLOAT32_MAX):
                raise ValueError(
                    f"--{field.name} must be a finite number within float32's range, got {value}"
                )


def check_sizes(config: TrainConfig) -> None:
    """Counts stay within what one run can index (int32 counters, ``MAX_NUM_ENVS`` jobs)."""
    if config.num_envs > MAX_NUM_ENVS:
        raise ValueError(f"--num_envs must be at most {MAX_NUM_ENVS:,}, got {config.num_envs:,}")
    limits = {
        "--rollout_length": config.rollout_length,
        "--update_epochs": config.update_epochs,
        "--updates_per_chunk": config.updates_per_chunk,
        "num_envs x rollout_length": config.batch_size,
    }
    for name, value in limits.items():
        if value > INT32_MAX:
            raise ValueError(f"{name} must be at most {INT32_MAX:,} (2**31 - 1), got {value:,}")
    steps = gradient_steps(config, config.num_updates)
    if steps > INT32_MAX:
        raise ValueError(
            f"--total_timesteps={config.total_timesteps:,} needs {steps:,} gradient steps (updates x "
            f"update_epochs x num_minibatches); at most {INT32_MAX:,} fit the optimiser's counter"
        )


def check_budget(config: TrainConfig) -> None:
    """``--total_timesteps`` buys at least one PPO update of ``num_envs x rollout_length`` steps."""
    if config.total_timesteps < config.batch_size:
        raise ValueError(
            f"--total_timesteps={config.total_timesteps:,} is less than one update: num_envs x "
            f"rollout_length = {config.batch_size:,} steps"
        )


def validate_config(c: TrainConfig) -> TrainConfig:
    """Raise ``ValueError`` naming the flag of the first invalid value (a wrong type, a non-finite
    number, a value out of range, a count past what a run can index, a budget below one update);
    return ``c`` if all are valid. The command line and the Python API check the same way."""
    check_types(c)
    check_finite(c)
    _require(c.num_envs >= 1, f"--num_envs must be >= 1, got {c.num_envs}")
    _require(c.rollout_length >= 1, f"--rollout_length must be >= 1, got {c.rollout_length}")
    _require(c.total_timesteps >= 1, f"--total_timesteps must be >= 1, got {c.total_timesteps}")
    _require(c.update_epochs >= 1, f"--update_epochs must be >= 1, got {c.update_epochs}")
    _require(c.num_minibatches >= 1, f"--num_minibatches must be >= 1, got {c.num_minibatches}")
    _require(
        c.batch_size % c.num_minibatches == 0,
        f"--num_minibatches={c.num_minibatches} must divide the rollout batch "
        f"num_envs x rollout_length = {c.batch_size}",
    )
    _require(
        c.minibatch_shuffle in MINIBATCH_SHUFFLES,
        f"--minibatch_shuffle must be one of {', '.join(MINIBATCH_SHUFFLES)}",
    )
    _require(
        c.minibatch_shuffle != "per_env" or c.rollout_length % c.num_minibatches == 0,
        f"--minibatch_shuffle=per_env needs --num_minibatches={c.num_minibatches} to divide "
        f"--rollout_length={c.rollout_length} (or --minibatch_shuffle=global)",
    )
    _require(c.updates_per_chunk >= 1, f"--updates_per_chunk must be >= 1, got {c.updates_per_chunk}")
    _require(0 < c.learning_rate < 1, f"--learning_rate must be in (0, 1), got {c.learning_rate}")
    _require(c.lr_schedule in LR_SCHEDULES, f"--lr_schedule must be one of {', '.join(LR_SCHEDULES)}")
    _require(c.max_grad_norm > 0, f"--max_grad_norm must be > 0, got {c.max_grad_norm}")
    _require(0 <= c.gamma <= 1, f"--gamma must be in [0, 1], got {c.gamma}")
    _require(0 <= c.gae_lambda <= 1, f"--gae_lambda must be in [0, 1], got {c.gae_lambda}")
    _require(0 < c.clip_eps < 1, f"--clip_eps must be in (0, 1), got {c.clip_eps}")
    _require(c.value_coef >= 0, f"--value_coef must be >= 0, got {c.value_coef}")
    _require(c.entropy_coef >= 0, f"--entropy_coef must be >= 0, got {c.entropy_coef}")
    _require(c.value_clip_eps >= 0, f"--value_clip_eps must be >= 0, got {c.value_clip_eps}")
    _require(0 <= c.shaping <= 100, f"--shaping must be in [0, 100], got {c.shaping}")
    _require(0 <= c.sla_met_bonus <= 100, f"--sla_met_bonus must be in [0, 100], got {c.sla_met_bonus}")
    _require(0 <= c.all_slas_bonus <= 100, f"--all_slas_bonus must be in [0, 100], got {c.all_slas_bonus}")
    _require(
        len(c.hidden_sizes) >= 1 and all(1 <= h <= 8192 for h in c.hidden_sizes),
        f"--hidden_sizes must be 1 to 8192 units per layer, got {list(c.hidden_sizes)}",
    )
    _require(c.activation in ACTIVATIONS, f"--activation must be one of {', '.join(ACTIVATIONS)}")
    _require(c.initializer in INITIALIZERS, f"--initializer must be one of {', '.join(INITIALIZERS)}")
    _require(0 <= c.adapt_strength <= 100, f"--adapt_strength must be in [0, 100], got {c.adapt_strength}")
    _require(c.weights in WEIGHT_MODES, f"--weights must be one of {', '.join(WEIGHT_MODES)}")
    _require(0 <= c.dual_step <= 100, f"--dual_step must be in [0, 100], got {c.dual_step}")
    _require(0 <= c.dual_decay <= 1, f"--dual_decay must be in [0, 1], got {c.dual_decay}")
    _require(c.scenario in SCENARIOS, f"--scenario must be one of {', '.join(SCENARIOS)}")
    _require(
        c.event_share is None or 0 <= c.event_share <= 1,
        f"--event_share must be in [0, 1], got {c.event_share}",
    )
    _require(
        c.reallocation_pause_s is None or 0 <= c.reallocation_pause_s <= 3600,
        f"--reallocation_pause_s must be in [0, 3600] seconds, got {c.reallocation_pause_s}",
    )
    _require(
        c.init_strategy in INIT_STRATEGIES, f"--init_strategy must be one of {', '.join(INIT_STRATEGIES)}"
    )
    _require(
        0 <= c.suggestion_gain_init <= 20,
        f"--suggestion_gain_init must be in [0, 20], got {c.suggestion_gain_init}",
    )
    _require(
        0 <= c.relocate_gain_init <= 20,
        f"--relocate_gain_init must be in [0, 20], got {c.relocate_gain_init}",
    )
    _require(
        0 <= c.relocate_gate <= 1,
        f"--relocate_gate must be in [0, 1] (log time), got {c.relocate_gate}",
    )
    _require(
        0 <= c.relocate_payback <= 100,
        f"--relocate_payback must be in [0, 100] (pauses), got {c.relocate_payback}",
    )
    _require(c.actions in ACTION_SETS, f"--actions must be one of {', '.join(ACTION_SETS)}")
    _require(c.observation in OBSERVATIONS, f"--observation must be one of {', '.join(OBSERVATIONS)}")
    if c.observation == "paper" and (reader := forecast_reader(c)):
        what, remedy = reader
        raise ValueError(
            f"--observation=paper: the network reads the paper's {NUM_PAPER_FEATURES} features only, but "
            f"{what} reads the forecast block: {remedy}"
        )
    check_target_grid(c.target_cpus_per_gpu)
    _require(c.prices in PRICE_PRESETS, f"--prices must be one of {', '.join(PRICE_PRESETS)}")
    _require(0 <= c.seed <= INT32_MAX, f"--seed must be in [0, 2**31), got {c.seed}")
    _require(c.init_from is None or c.init_from.strip() != "", "--init_from must name a checkpoint")
    if c.preference is not None:
        try:
            preference_vector(parse_preference(c.preference))
        except ValueError as err:
            raise ValueError(
                f"--preference: {err} (presets: {', '.join(PREFERENCES)}, or 'time,cost,sla' weights)"
            ) from None
    check_sizes(c)
    check_budget(c)
    return c


def forecast_reader(c: TrainConfig) -> tuple[str, str] | None:
    """What of ``c``'s network reads observation features past the paper's 21 (the forecast block)
    and the flag that leaves it out; ``None`` when the network reads none of them."""
    network = c.network
    if network.target_block:
        return "the shared target head", "leave out --target_head"
    if network.suggestion_features:
        return "the suggestion prior", "add --suggestion_prior=false"
    if network.move_prior_flags:
        return "the paper moves' suggestion prior", "add --paper_suggestion_prior=false"
    return None  # the relocate prior and its rules come only with the suggestion prior


def ignored_settings(c: TrainConfig) -> dict[str, str]:
    """The settings ``c``'s weight mode and action set leave unused, each with why (``"with
    --weights=static"``): the command line refuses one given explicitly with another value than its
    default, which the run would record and never apply."""
    targets = has_targets(c.actions)
    target_prior = targets and c.suggestion_prior and not c.target_head
    move_prior = c.actions == "paper" and c.paper_suggestion_prior
    ignored = {}
    if c.weights == "static":
        ignored["adapt_strength"] = "with --weights=static (the weights are the preference)"
    if c.weights != "dual":
        for name in ("dual_step", "dual_decay"):
            ignored[name] = f"with --weights={c.weights} (only --weights=dual has multipliers)"
    if not targets:
        for name in ("target_head", "suggestion_prior"):
            ignored[name] = f"with --actions={c.actions} (it has no targets)"
    else:
        ignored["paper_suggestion_prior"] = f"with --actions={c.actions} (it is the paper moves' prior)"
        if c.target_head:
            ignored["suggestion_prior"] = "with --target_head (the shared head reads the suggestion flags)"
    if not (target_prior or move_prior):
        ignored["suggestion_gain_init"] = "without a suggestion prior to start"
    if not (target_prior and can_relocate(c.actions)):
        ignored["relocate_gain_init"] = (
            "without --actions=targets_relocate and its suggestion prior (no relocate prior to start)"
        )
    if not c.network.relocate_prior:  # the gate and the payback rule mask relocate through that prior
        for name in ("relocate_gate", "relocate_payback"):
            ignored[name] = (
                "without the relocate prior (--actions=targets_relocate, its suggestion prior and "
                "--relocate_gain_init > 0)"
            )
    return ignored


def parse_preference(text: str) -> str | list[float]:
    """A preset name, or comma-separated weights ``"0.5,0.3,0.2"`` as floats."""
    if text in PREFERENCES:
        return text
    try:
        return [float(x) for x in text.split(",")]
    except ValueError:
        raise ValueError(f"unknown preference {text!r}") from None

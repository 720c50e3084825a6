"""``TrainConfig``: every knob of the learner, its JSON form and the network it builds (its checks:
``config_checks.py``; the actor's priors: ``network_priors.py``)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from slamorl_jax.agent.network_priors import (
    paper_move_prior,
    payback_fields,
    relocate_prior,
    suggestion_features,
)
from slamorl_jax.agent.networks import NetworkConfig
from slamorl_jax.env.action_sets import (
    DEFAULT_ACTION_SET,
    can_relocate,
    has_targets,
    num_actions,
)
from slamorl_jax.env.defaults import (
    DEFAULT_ADAPT_STRENGTH,
    DEFAULT_ALL_SLAS_BONUS,
    DEFAULT_DUAL_DECAY,
    DEFAULT_DUAL_STEP,
    DEFAULT_RELOCATE_GATE,
    DEFAULT_RELOCATE_PAYBACK,
    DEFAULT_SLA_MET_BONUS,
    DEFAULT_TARGET_CPUS_PER_GPU,
)
from slamorl_jax.env.observation import NUM_PAPER_FEATURES, TARGET_BLOCK

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
    # A calibrated catalogue of your own (the JSON ``python -m slamorl_jax.calibration --output``
    # writes: workloads, GPU types, prices, request mix); None = the one shipped with the package.
    # Recorded as the path it was read from; the run's checkpoints carry the catalogue itself
    # (``checkpoint_catalog.CATALOG_KEY``), which a loaded policy and ``--resume`` use.
    catalog: str | None = None
    seed: int = 0
    updates_per_chunk: int = 10
    # Start the actor-critic from this checkpoint's policy (same network layout; warm_start.py)
    # instead of a fresh initialisation; None = fresh. Recorded so a run says where it started.
    init_from: str | None = None

    def __post_init__(self) -> None:
        for name in ("target_cpus_per_gpu", "hidden_sizes"):  # tuples, as stored and compared (hashable)
            if isinstance(getattr(self, name), list):
                object.__setattr__(self, name, tuple(getattr(self, name)))
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
        """Rebuild from :meth:`to_json`'s dict; unknown keys, or anything but a dict, raise
        ``ValueError``."""
        if not isinstance(data, dict):  # a damaged meta's null said "'NoneType' object is not iterable"
            raise ValueError(f"a config must be a JSON object of its settings, got {type(data).__name__}")
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
                values[field.name] = typed_field(field.name, str(field.type), values[field.name])
        return cls(**values)


#: The targets' CPUs per GPU of every run saved before ``TrainConfig.target_cpus_per_gpu`` existed.
GRID_BEFORE_ITS_FLAG = (0.0, 2.0, 4.0, 8.0, 12.0)


def all_numbers(value: Any) -> bool:
    """Whether ``value`` is a list or tuple of ints and floats (not bools, not text)."""
    return isinstance(value, list | tuple) and all(type(x) in (int, float) for x in value)


def _float_tuple(name: str, value: Any) -> tuple[float, ...]:
    """A stored list of numbers as a tuple of floats (``ValueError`` for anything else)."""
    if not all_numbers(value):
        raise ValueError(f"{name} must be a list of numbers, got {value!r}")
    return tuple(float(x) for x in value)


def typed_field(name: str, annotation: str, value: Any) -> Any:
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

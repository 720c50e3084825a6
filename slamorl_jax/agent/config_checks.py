"""Up-front checks of a ``TrainConfig`` (:func:`validate_config`: one clear message per error), and
what a config leaves unused (:func:`ignored_settings`) or reads past the paper's features
(:func:`forecast_reader`)."""

from __future__ import annotations

import dataclasses
import math

from slamorl_jax.agent.config import (
    LR_SCHEDULES,
    MINIBATCH_SHUFFLES,
    OBSERVATIONS,
    TrainConfig,
    all_numbers,
    typed_field,
)
from slamorl_jax.agent.networks import ACTIVATIONS, INITIALIZERS
from slamorl_jax.cli_args import INT32_MAX
from slamorl_jax.env.action_sets import ACTION_SETS, can_relocate, has_targets
from slamorl_jax.env.objectives import PREFERENCES, preference_vector
from slamorl_jax.env.observation import NUM_PAPER_FEATURES
from slamorl_jax.env.params import INIT_STRATEGIES, WEIGHT_MODES
from slamorl_jax.env.prices import PRICE_PRESETS
from slamorl_jax.env.scenarios import SCENARIOS
from slamorl_jax.env.target_grid import check_target_grid


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


MAX_NUM_ENVS = 2**22  # 4,194,304 jobs in parallel: far beyond one accelerator's memory today
#: The deepest actor-critic a run may ask for (each layer of each head is compiled unrolled).
MAX_HIDDEN_LAYERS = 16
#: The largest float32: a setting beyond it becomes ``inf`` in the learner's arithmetic.
FLOAT32_MAX = 3.4028234663852886e38


def gradient_steps(config: TrainConfig, updates: int) -> int:
    """The optimiser's steps after ``updates`` PPO updates (``update_epochs x num_minibatches`` each)."""
    return updates * config.update_epochs * config.num_minibatches


def check_types(config: TrainConfig) -> None:
    """Every setting has its field's type (an ``int`` count, not ``16.5``, ``True`` or ``"16"``; a
    ``str`` preference; ``hidden_sizes`` a sequence of ``int``, ``target_cpus_per_gpu`` one of
    numbers): a wrong one would fail deep inside JAX with an error that names no setting.
    ``TypeError`` for anything but a :class:`TrainConfig` (a dict of settings: ``TrainConfig(**d)``)."""
    if not isinstance(config, TrainConfig):
        raise TypeError(
            f"config must be a TrainConfig (TrainConfig(**settings)), not {type(config).__name__}"
        )
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if field.name == "hidden_sizes":
            _require(
                isinstance(value, list | tuple) and all(type(h) is int for h in value),
                f"--hidden_sizes must be a sequence of integers, got {value!r}",
            )
        elif field.name == "target_cpus_per_gpu":
            _require(
                all_numbers(value), f"--target_cpus_per_gpu must be a sequence of numbers, got {value!r}"
            )
        else:
            try:
                typed_field(field.name, str(field.type), value)
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
    _require(  # 500 layers compiled for minutes before the first update
        1 <= len(c.hidden_sizes) <= MAX_HIDDEN_LAYERS,
        f"--hidden_sizes must give 1 to {MAX_HIDDEN_LAYERS} layers, got {len(c.hidden_sizes)}",
    )
    _require(
        all(1 <= h <= 8192 for h in c.hidden_sizes),
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
    _require(c.catalog is None or c.catalog.strip() != "", "--catalog must name a calibration file")
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

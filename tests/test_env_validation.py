"""Up-front validation: bad ``EnvParams`` and unknown names fail with a clear one-line ``ValueError``."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slamorl_jax.env import (
    INIT_STRATEGIES,
    MAX_GPUS,
    PREFERENCES,
    SCENARIOS,
    EnvParams,
    default_params,
    load_catalog,
    make,
    preference_vector,
    scenario_params,
    validate_params,
    with_derived_tables,
    with_preference,
    with_scenario,
)
from slamorl_jax.env.action_sets import NUM_TARGET_CPUS_PER_GPU, NUM_TARGET_GPUS
from slamorl_jax.env.catalog import gpu_type_index, workload_index
from slamorl_jax.env.params import MIXED_INIT_STRATEGIES
from slamorl_jax.env.params import with_values as with_same_dtype
from slamorl_jax.env.shifts import SHIFT_KINDS, SLOW_NODE


def with_values(tree: Any, **values: Any) -> Any:
    """``with_same_dtype`` allowing shape changes (validation must reject them)."""
    return with_same_dtype(tree, same_shape=False, **values)


def with_workload_values(params: EnvParams, **values: Any) -> EnvParams:
    """``params`` with fields of ``params.workloads`` replaced."""
    return params.replace(workloads=with_values(params.workloads, **values))


@pytest.fixture(scope="module")
def params() -> EnvParams:
    """The shipped defaults."""
    return default_params(load_catalog())


def fresh(params: EnvParams) -> EnvParams:
    """Derived tables recomputed, so only the field under test is wrong."""
    return with_derived_tables(params)


def target_gpus(**at: int) -> list[int]:
    """The default GPU counts of the target grid (1 to ``NUM_TARGET_GPUS``), with ``at={index: value}``
    replaced (keys as ``i<index>``, ``last`` for the last)."""
    gpus = list(range(1, NUM_TARGET_GPUS + 1))
    for key, value in at.items():
        gpus[-1 if key == "last" else int(key[1:])] = value
    return gpus


def nan_at_first(array: Any) -> np.ndarray:
    """A float copy of ``array`` with a NaN in its first element."""
    out = np.array(array, dtype=np.float32)
    out.reshape(-1)[0] = np.nan
    return out


# (test id, change to the defaults, text the error must contain)
BAD_PARAMS: list[tuple[str, Callable[[EnvParams], EnvParams], str]] = [
    ("zero cpu_step", lambda p: fresh(with_values(p, cpu_step=0)), "cpu_step"),
    ("negative cpu_step", lambda p: fresh(with_values(p, cpu_step=-4)), "cpu_step"),
    # A float cpu_step or target_gpus is a TypeError now: tests/test_env_api_edges.py.
    (
        "workload probs sum to 1.3",
        lambda p: with_values(p, workload_probs=np.full(p.workload_probs.shape, 0.1)),
        "workload_probs",
    ),
    (
        "negative gpu type prob",
        lambda p: with_values(
            p, gpu_type_probs=np.eye(p.gpu_type_probs.size)[0] * 1.5 - np.eye(p.gpu_type_probs.size)[1] * 0.5
        ),
        "gpu_type_probs",
    ),
    (
        "scenario probs sum to 0.5",
        lambda p: with_values(p, scenario_probs=[0.25, 0.25, 0.0]),
        "scenario_probs",
    ),
    (
        "request ratio probs sum to 2",
        lambda p: with_values(p, requested_cpus_per_gpu_probs=np.asarray(p.requested_cpus_per_gpu_probs) * 2),
        "requested_cpus_per_gpu_probs",
    ),
    (
        "workload request probs off",
        lambda p: with_workload_values(
            p, requested_gpu_probs=np.asarray(p.workloads.requested_gpu_probs) * 0.5
        ),
        "workloads.requested_gpu_probs",
    ),
    ("NaN adapt_strength", lambda p: with_values(p, adapt_strength=np.nan), "adapt_strength"),
    (
        "NaN price",
        lambda p: with_values(p, gpu_price_per_hour=nan_at_first(p.gpu_price_per_hour)),
        "gpu_price",
    ),
    ("infinite pause", lambda p: with_values(p, reallocation_pause_s=np.inf), "reallocation_pause_s"),
    (
        "NaN workload constant",
        lambda p: with_workload_values(p, compute_alpha_s=nan_at_first(p.workloads.compute_alpha_s)),
        "workloads.compute_alpha_s",
    ),
    ("negative noise", lambda p: with_values(p, epoch_time_noise=-0.1), "epoch_time_noise"),
    ("probability above 1", lambda p: with_values(p, contention_start_prob=1.5), "contention_start_prob"),
    (
        "init strategy out of range",
        lambda p: with_values(p, init_strategy=len(INIT_STRATEGIES)),
        "init_strategy",
    ),
    ("negative init strategy", lambda p: with_values(p, init_strategy=-1), "init_strategy"),
    ("init mix probs sum to 0.9", lambda p: with_values(p, init_mix_probs=[0.2, 0.4, 0.3]), "init_mix_probs"),
    (
        "negative init mix prob",
        lambda p: with_values(p, init_mix_probs=[1.2, -0.2, 0.0]),
        "init_mix_probs",
    ),
    ("NaN init mix prob", lambda p: with_values(p, init_mix_probs=[np.nan, 0.5, 0.5]), "init_mix_probs"),
    ("negative compute_spread", lambda p: with_values(p, compute_spread=-0.1), "compute_spread"),
    ("compute_spread above 2", lambda p: with_values(p, compute_spread=2.5), "compute_spread"),
    ("NaN compute_spread", lambda p: with_values(p, compute_spread=np.nan), "compute_spread"),
    ("negative sync_spread", lambda p: with_values(p, sync_spread=-0.01), "sync_spread"),
    ("infinite sync_spread", lambda p: with_values(p, sync_spread=np.inf), "sync_spread"),
    ("zero forecast_noise", lambda p: with_values(p, forecast_noise=0.0), "forecast_noise"),
    ("NaN forecast_noise", lambda p: with_values(p, forecast_noise=np.nan), "forecast_noise"),
    ("forecast_noise above 10", lambda p: with_values(p, forecast_noise=11.0), "forecast_noise"),
    (
        "zero target GPUs",
        lambda p: fresh(with_values(p, target_gpus=target_gpus(i0=0))),
        "target_gpus",
    ),
    (
        "target GPUs above MAX_GPUS",
        lambda p: fresh(with_values(p, target_gpus=target_gpus(last=MAX_GPUS + 1))),
        "target_gpus",
    ),
    (
        "negative target CPUs per GPU",
        lambda p: fresh(with_values(p, target_cpus_per_gpu=[-2.0, 2.0, 4.0, 8.0, 12.0])),
        "target_cpus_per_gpu",
    ),
    (
        "NaN target CPUs per GPU",
        lambda p: with_values(p, target_cpus_per_gpu=[0.0, 2.0, np.nan, 8.0, 12.0]),
        "target_cpus_per_gpu",
    ),
    ("negative sla_met_bonus", lambda p: with_values(p, sla_met_bonus=-1.0), "sla_met_bonus"),
    ("NaN sla_met_bonus", lambda p: with_values(p, sla_met_bonus=np.nan), "sla_met_bonus"),
    ("all_slas_bonus above 100", lambda p: with_values(p, all_slas_bonus=101.0), "all_slas_bonus"),
    ("negative all_slas_bonus", lambda p: with_values(p, all_slas_bonus=-0.5), "all_slas_bonus"),
    ("max_episode_steps 0", lambda p: with_values(p, max_episode_steps=0), "max_episode_steps"),
    (
        "sla_factor_low above high",
        lambda p: with_values(p, sla_factor_low=np.asarray(p.sla_factor_high) + 0.1),
        "sla_factor_low",
    ),
    (
        "epochs_min above epochs_max",
        lambda p: with_workload_values(p, epochs_min=np.asarray(p.workloads.epochs_max) + 1),
        "epochs_min",
    ),
    ("cluster above MAX_GPUS", lambda p: fresh(with_values(p, gpus_per_node=8, max_nodes=8)), "MAX_GPUS"),
    (
        "fewer CPUs per node than a step",
        lambda p: fresh(with_values(p, cpus_per_node=2, cpu_step=4)),
        "cpus_per_node",
    ),
    ("zero fixed preference", lambda p: with_values(p, fixed_preference=[0.0, 0.0, 0.0]), "fixed_preference"),
    # Flags and shapes that used to pass validation (or fail with a broadcasting error).
    ("flag of 2", lambda p: p.replace(use_fixed_preference=jnp.int32(2)), "use_fixed_preference is a flag"),
    ("NaN flag", lambda p: p.replace(moves_leave_contention=jnp.float32(np.nan)), "moves_leave_contention"),
    (
        "NaN workload flag",
        lambda p: p.replace(workloads=p.workloads.replace(data_parallel=jnp.full(13, np.nan))),
        "workloads.data_parallel is a flag",
    ),
    ("two preference weights", lambda p: with_values(p, fixed_preference=[0.5, 0.5]), "must have shape (3,)"),
    (
        "three workload probs",
        lambda p: with_values(p, workload_probs=[0.5, 0.25, 0.25]),
        "workload_probs must have shape (13,) (one per workload)",
    ),
    (
        "five GPU type probs",
        lambda p: with_values(p, gpu_type_probs=np.full(5, 0.2)),
        "gpu_type_probs must have shape (4,)",
    ),
    ("two GPU prices", lambda p: with_values(p, gpu_price_per_hour=[1.0, 2.0]), "gpu_price_per_hour must"),
    ("SLA factors a vector", lambda p: with_values(p, sla_factor_low=[1.0, 1.0, 1.0]), "shape (3, 6)"),
    ("a vector cluster size", lambda p: with_values(p, gpus_per_node=[4, 4]), "gpus_per_node must have"),
    (
        "request ratios without their probs",
        lambda p: with_values(p, requested_cpus_per_gpu_values=[4.0, 8.0]),
        "requested_cpus_per_gpu_probs must have shape (2,)",
    ),
    (
        "epochs of three workloads",
        lambda p: with_workload_values(p, epochs_min=[1, 1, 1]),
        "workloads.epochs_min must have shape (13,)",
    ),
    (
        "a stacked sweep",
        lambda p: jax.tree.map(lambda x: jnp.stack([x, x]), p),
        "one configuration at a time",
    ),
    ("a derived table of another shape", lambda p: p.replace(target_allocation=jnp.zeros((3, 2))), "stale"),
    (
        "stale tables after a link change",
        lambda p: with_values(p, inter_node_gbps=1.0),
        "with_derived_tables",
    ),
    (
        "stale tables after a price change",
        lambda p: with_values(p, vcpu_price_per_hour=5.0),
        "cheapest_epoch_usd",
    ),
    (
        "stale tables after a target GPUs change",
        lambda p: with_values(p, target_gpus=target_gpus(i0=3)),
        "target_allocation",
    ),
    (
        "stale tables after a target CPUs change",
        lambda p: with_values(p, target_cpus_per_gpu=[1.0, 3.0, 6.0, 10.0, 16.0]),
        "target_profile",
    ),
    (
        "stale tables after a sync change",
        lambda p: with_workload_values(p, sync_node_alpha_s=np.asarray(p.workloads.sync_node_alpha_s) * 3),
        "target_profile",
    ),
    (  # a slower node of factor 0 made a 0 s step and NaN utilisations
        "a slow_node event of size 0",
        lambda p: with_values(
            p, shift_size_low=np.where(np.arange(len(SHIFT_KINDS)) == SLOW_NODE, 0.0, p.shift_size_low)
        ),
        "shift_size_low of a slow_node event",
    ),
    (  # the tables come out NaN: this was reported as stale, even right after recomputing them
        "a workload without compute time",
        lambda p: fresh(
            with_workload_values(
                p,
                compute_alpha_s=np.zeros_like(p.workloads.compute_alpha_s),
                compute_beta_s=np.zeros_like(p.workloads.compute_beta_s),
            )
        ),
        "come out non-finite from the workload",
    ),
    (  # the opposed preference's share was cut silently (0.8 + 0.8 gave 0.2 of jobs opposed)
        "preference shares summing past 1",
        lambda p: with_values(p, random_preference_prob=0.8, opposed_preference_prob=0.8),
        "random_preference_prob + opposed_preference_prob must be at most 1",
    ),
    (
        "stale tables after a speed change",
        lambda p: with_workload_values(p, compute_speed=np.asarray(p.workloads.compute_speed) * 2),
        "fastest_epoch_s",
    ),
    (  # the message held the whole 13 x 4 table
        "one speed out of range",
        lambda p: with_workload_values(
            p, compute_speed=jnp.asarray(p.workloads.compute_speed).at[2, 3].set(-1.0)
        ),
        "compute_speed must lie in [1e-06, 1000000.0], got -1.0 at index [2, 3] (1 of 52 entries)",
    ),
    (
        "one CPU exponent out of range",
        lambda p: with_workload_values(p, cpu_p=jnp.asarray(p.workloads.cpu_p).at[4].set(0.0)),
        "cpu_p must lie in [0.001, 100.0], got 0.0 at index 4 (1 of 13 entries)",
    ),
]


def test_shipped_defaults_validate(params: EnvParams) -> None:
    """The shipped defaults, every scenario and every preference preset validate."""
    assert validate_params(params) is params
    for name in SCENARIOS:
        validate_params(scenario_params(name))
        _, made = make(name)
        validate_params(made)
    for preference in PREFERENCES:
        validate_params(with_preference(params, preference))


@pytest.mark.parametrize(("change", "expected"), [c[1:] for c in BAD_PARAMS], ids=[c[0] for c in BAD_PARAMS])
def test_bad_params_raise_value_error_naming_the_field(
    params: EnvParams, change: Callable[[EnvParams], EnvParams], expected: str
) -> None:
    """Each bad value raises a one-line ValueError naming its field."""
    bad = change(params)
    with pytest.raises(ValueError, match=re.escape(expected)) as info:
        validate_params(bad)
    message = str(info.value)
    assert "\n" not in message
    assert "EnvParams." in message


def test_stale_tables_pass_once_recomputed(params: EnvParams) -> None:
    """Stale derived tables fail until with_derived_tables recomputes them."""
    changed = with_values(params, inter_node_gbps=1.0, intra_node_gbps=2.0, vcpu_price_per_hour=5.0)
    with pytest.raises(ValueError, match="stale"):
        validate_params(changed)
    validate_params(with_derived_tables(changed))


def test_largest_valid_cluster_passes(params: EnvParams) -> None:
    """A cluster of exactly MAX_GPUS GPUs is valid."""
    validate_params(
        fresh(with_values(params, gpus_per_node=8, max_nodes=MAX_GPUS // 8, max_gpus_per_job=MAX_GPUS))
    )


# --- unknown names ----------------------------------------------------------------------------


def assert_lists(err: pytest.ExceptionInfo, names: tuple[str, ...] | list[str]) -> None:
    """The error names every valid choice."""
    message = str(err.value)
    for name in names:
        assert name in message, f"{name!r} missing from {message!r}"


@pytest.mark.parametrize("call", [scenario_params, lambda name: with_scenario(default_params(), name), make])
def test_unknown_scenario_lists_the_valid_ones(call: Callable[[str], Any]) -> None:
    """Unknown scenario names fail listing every scenario."""
    with pytest.raises(ValueError, match="unknown scenario 'rush-hour'") as err:
        call("rush-hour")
    assert_lists(err, SCENARIOS)


def test_unknown_preference_lists_the_valid_ones(params: EnvParams) -> None:
    """Unknown preference presets fail listing every preset."""
    with pytest.raises(ValueError, match="unknown preference 'speed'") as err:
        preference_vector("speed")
    assert_lists(err, list(PREFERENCES))
    with pytest.raises(ValueError, match="unknown preference") as err:
        with_preference(params, "speed")
    assert_lists(err, list(PREFERENCES))


@pytest.mark.parametrize(
    "weights",
    [
        [1.0, -0.5, 0.5],
        [0.0, 0.0, 0.0],
        [0.5, 0.5],
        [np.nan, 0.5, 0.5],
        ["a", "b", "c"],
        {"time": 1.0},
        None,
        [True, False, True],
    ],
)
def test_bad_preference_weights_raise(weights: Any) -> None:
    """Negative, all-zero, wrongly sized, NaN or non-numeric (strings, a mapping, bools) preference
    weights fail with a ValueError that names the preference."""
    with pytest.raises(ValueError, match="preference") as info:
        preference_vector(weights)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("bad", "phrase"),
    [
        (None, "params must be EnvParams, got NoneType"),
        ({}, "params must be EnvParams, got dict"),
        ("workloads", "EnvParams.workloads must be WorkloadParams"),
        ("string field", "EnvParams.gpus_per_node must hold numbers"),
    ],
)
def test_what_is_not_params_raises_type_error(params: EnvParams, bad: Any, phrase: str) -> None:
    """Not ``EnvParams`` at all, or a field that holds no numbers: a TypeError naming it (it used to be
    ``vars()``'s TypeError, or a string multiply deep in the cluster check)."""
    if bad == "workloads":
        bad = params.replace(workloads=None)
    elif bad == "string field":
        bad = params.replace(gpus_per_node="4")
    with pytest.raises(TypeError, match=re.escape(phrase)):
        validate_params(bad)


def test_unknown_workload_lists_the_valid_ones() -> None:
    """Unknown workload names fail listing every workload."""
    catalog = load_catalog()
    assert workload_index(catalog.workload_names[2], catalog) == 2
    with pytest.raises(ValueError, match="unknown workload 'gpt-5'") as err:
        workload_index("gpt-5", catalog)
    assert_lists(err, catalog.workload_names)


def test_unknown_gpu_type_lists_the_valid_ones() -> None:
    """Unknown GPU types fail listing every GPU type."""
    catalog = load_catalog()
    assert gpu_type_index(catalog.gpu_types[-1], catalog) == catalog.num_gpu_types - 1
    with pytest.raises(ValueError, match="unknown GPU type 'H100'") as err:
        gpu_type_index("H100", catalog)
    assert_lists(err, catalog.gpu_types)


# --- shapes of the fixed-size fields -------------------------------------------------------------

WRONG_SIZES: list[tuple[str, str, dict[str, Any]]] = [
    ("target_gpus one short", "target_gpus", {"target_gpus": target_gpus()[:-1]}),
    ("target_gpus one more", "target_gpus", {"target_gpus": [*target_gpus(), 16]}),
    ("target_gpus as a matrix", "target_gpus", {"target_gpus": np.reshape(target_gpus(), (2, -1))}),
    (
        "target_cpus_per_gpu one short",
        "target_cpus_per_gpu",
        {"target_cpus_per_gpu": [2.0] * (NUM_TARGET_CPUS_PER_GPU - 1)},
    ),
    ("target_cpus_per_gpu a scalar", "target_cpus_per_gpu", {"target_cpus_per_gpu": 4.0}),
    ("init_mix_probs of four", "init_mix_probs", {"init_mix_probs": [0.1, 0.1, 0.1, 0.7]}),
    ("init_mix_probs of two", "init_mix_probs", {"init_mix_probs": [0.5, 0.5]}),
]


@pytest.mark.parametrize(("field", "values"), [w[1:] for w in WRONG_SIZES], ids=[w[0] for w in WRONG_SIZES])
def test_wrong_sized_fixed_fields_raise_value_error(
    params: EnvParams, field: str, values: dict[str, Any]
) -> None:
    """The fixed-size fields (``NUM_TARGET_GPUS`` target GPU counts, ``NUM_TARGET_CPUS_PER_GPU``
    CPUs-per-GPU values, one start probability per mixed strategy) refuse another shape with a one-line
    ValueError naming the field and both shapes, before any stale-table check could fail on it (it
    used to: a TypeError from a broadcast, or a 4th init_mix_probs bin silently turned into cold
    starts)."""
    expected = {
        "target_gpus": (NUM_TARGET_GPUS,),
        "target_cpus_per_gpu": (NUM_TARGET_CPUS_PER_GPU,),
        "init_mix_probs": (len(MIXED_INIT_STRATEGIES),),
    }[field]
    bad = with_values(params, **values)
    with pytest.raises(ValueError, match=re.escape(f"EnvParams.{field} must have shape {expected}")) as info:
        validate_params(bad)
    assert "\n" not in str(info.value)
    assert str(tuple(np.shape(values[field]))) in str(info.value)

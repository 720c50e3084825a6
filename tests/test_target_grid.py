"""The targets' CPUs-per-GPU grid as a training setting (``env/target_grid.py``): checked, applied
to env params with their derived tables, recorded in a run's config (runs saved before the setting
read the grid of then) and fingerprinted in the observation layout."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from slamorl_jax.agent.config import GRID_BEFORE_ITS_FLAG, TrainConfig
from slamorl_jax.agent.config_checks import validate_config
from slamorl_jax.agent.trainer import env_params_from_config
from slamorl_jax.env.action_sets import target_allocations
from slamorl_jax.env.defaults import DEFAULT_TARGET_CPUS_PER_GPU, default_params
from slamorl_jax.env.derived import stale_derived_fields
from slamorl_jax.env.observation import OBSERVATION_LAYOUT, observation_layout
from slamorl_jax.env.target_grid import check_target_grid, with_target_grid
from slamorl_jax.env.validation import validate_params

OTHER_GRID = (0.0, 2.0, 4.0, 6.0, 10.0)


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        ((0, 2, 4), "must be 5 increasing CPUs-per-GPU values, got 3"),
        ((0, 2, 4, 6, 8, 12), "got 6"),
        ((0, 4, 2, 6, 10), "increasing"),
        ((0, 2, 2, 6, 10), "increasing"),
        ((-1, 2, 4, 6, 10), "in \\[0, 1024\\]"),
        ((0, 2, 4, 6, 2000), "in \\[0, 1024\\]"),
        ((0, 2, 4, 6, float("nan")), "in \\[0, 1024\\]"),
        ((0, 2, 4, 6, float("inf")), "in \\[0, 1024\\]"),
    ],
)
def test_a_grid_that_is_not_five_increasing_values_in_range_is_refused(grid: tuple, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_target_grid(grid)
    with pytest.raises(ValueError, match="--target_cpus_per_gpu"):
        validate_config(TrainConfig(target_cpus_per_gpu=tuple(float(x) for x in grid)))


def test_the_grid_moves_the_targets_and_their_tables() -> None:
    params = default_params()
    assert with_target_grid(params, DEFAULT_TARGET_CPUS_PER_GPU) is params  # nothing to recompute
    other = with_target_grid(params, OTHER_GRID)
    validate_params(other)
    assert not stale_derived_fields(other)
    gpus, cpus = (np.asarray(x) for x in target_allocations(other))
    np.testing.assert_array_equal(np.asarray(other.target_allocation), np.stack([gpus, cpus], axis=-1))
    # 8 GPUs x 6 CPUs each is a target now (48 CPUs) and 8 GPUs x 8 CPUs (64) no longer is.
    eight = set(cpus[gpus == 8].tolist())
    assert 48 in eight and 64 not in eight
    assert not np.array_equal(np.asarray(other.target_profile), np.asarray(params.target_profile))


def test_a_run_records_its_grid_and_runs_saved_before_the_setting_read_the_grid_of_then() -> None:
    config = TrainConfig(target_cpus_per_gpu=OTHER_GRID)
    stored = dataclasses.asdict(config)
    assert TrainConfig.from_dict(stored) == config
    del stored["target_cpus_per_gpu"]
    assert TrainConfig.from_dict(stored).target_cpus_per_gpu == GRID_BEFORE_ITS_FLAG == (0, 2, 4, 8, 12)
    with pytest.raises(ValueError, match="target_cpus_per_gpu must be a list of numbers"):
        TrainConfig.from_dict({**stored, "target_cpus_per_gpu": [0, 2, "4", 6, 10]})
    params = env_params_from_config(config)
    np.testing.assert_array_equal(np.asarray(params.target_cpus_per_gpu), OTHER_GRID)
    assert not stale_derived_fields(params)


def test_the_observation_layout_names_the_grid() -> None:
    assert observation_layout() == observation_layout(DEFAULT_TARGET_CPUS_PER_GPU) == OBSERVATION_LAYOUT
    assert observation_layout(OTHER_GRID) != OBSERVATION_LAYOUT


def test_the_default_layout_is_the_one_every_shipped_checkpoint_was_saved_with() -> None:
    """Pinned: a change of the feature names or of the default grid refuses every saved policy."""
    assert OBSERVATION_LAYOUT == "b7bdb2e5f3466752"


def test_a_grid_given_as_a_list_is_the_tuple_and_the_paper_prior_moves_toward_its_targets() -> None:
    config = TrainConfig(actions="paper", target_cpus_per_gpu=[0, 2, 4, 6, 10])
    assert config.target_cpus_per_gpu == OTHER_GRID and isinstance(config.target_cpus_per_gpu, tuple)
    validate_config(config)
    targets = np.asarray(with_target_grid(default_params(), OTHER_GRID).target_allocation)
    assert config.network.move_prior_targets == tuple((int(g), int(c)) for g, c in targets)
    assert config.network.move_prior_targets != TrainConfig(actions="paper").network.move_prior_targets

"""Params and actions a Python user hands to the env (issue 11, row 12).

``with_values`` refuses a cast that would change a value; ranges are ``validate_params``'s job, which
``make`` runs and ``reset``/``step`` (under ``jit``) do not. Out-of-range actions are clipped to the
action set (documented in ``job_env.py``; the env-level check is
``test_env_actions.py::test_moves_are_the_same_in_both_sets_and_actions_clip``).
"""

from __future__ import annotations

import numpy as np
import pytest

from slamorl_jax.env import default_params, num_actions, validate_params
from slamorl_jax.env.action_sets import ACTION_SETS, clip_action
from slamorl_jax.env.params import with_values

PARAMS = default_params()


@pytest.mark.parametrize(
    ("field", "value", "phrase"),
    [
        ("gpus_per_node", 2.5, "gpus_per_node holds int32"),
        ("cpu_step", np.nan, "cpu_step holds int32"),
        ("max_nodes", 2**40, "max_nodes must lie in"),
        ("use_fixed_preference", 0.5, "use_fixed_preference holds bool"),
        ("use_fixed_preference", 2, "use_fixed_preference must lie in [0, 1]"),
        ("gpus_per_node", "four", "gpus_per_node holds int32"),
    ],
)
def test_with_values_refuses_casts_that_change_a_value(field: str, value: object, phrase: str) -> None:
    with pytest.raises(ValueError) as error:
        with_values(PARAMS, **{field: value})
    assert phrase in str(error.value)


def test_with_values_keeps_exact_casts() -> None:
    params = with_values(PARAMS, gpus_per_node=8.0, use_fixed_preference=1, epoch_time_noise=0.05)
    assert int(params.gpus_per_node) == 8 and bool(params.use_fixed_preference)
    assert params.gpus_per_node.dtype == PARAMS.gpus_per_node.dtype


def test_non_finite_values_are_validate_params_job() -> None:
    """``with_values`` stores a NaN float (a sweep may want any value); ``validate_params`` names it."""
    params = with_values(PARAMS, epoch_time_noise=np.nan)
    with pytest.raises(ValueError, match="epoch_time_noise must be finite"):
        validate_params(params)


@pytest.mark.parametrize("name", ACTION_SETS)
def test_out_of_range_actions_clip_to_the_set(name: str) -> None:
    last = num_actions(name) - 1
    clipped = np.asarray(clip_action(np.array([-1, -7, 0, last, last + 1, 99]), name))
    np.testing.assert_array_equal(clipped, [0, 0, 0, last, last, last])

"""Params and actions a Python user hands to the env (issue 11, row 12).

``with_values`` refuses a cast that would change a value; ranges are ``validate_params``'s job, which
``make`` runs and ``reset``/``step`` (under ``jit``) do not. Out-of-range actions are clipped to the
action set (documented in ``job_env.py``; the env-level check is
``test_env_actions.py::test_moves_are_the_same_in_both_sets_and_actions_clip``). What is static under
``jit`` (the action's dtype and shape, the key's, the params' type) is checked when traced: the
tests trace with ``jax.eval_shape``, which compiles nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slamorl_jax.env import JobAllocationEnv, default_params, num_actions, validate_params
from slamorl_jax.env.action_sets import ACTION_SETS, clip_action
from slamorl_jax.env.params import with_values

PARAMS = default_params()
ENV = JobAllocationEnv()
KEY = jax.random.key(1)
# The abstract state of one job and of a batch of two (shapes only: nothing is run).
STATE = jax.eval_shape(ENV.reset, KEY, PARAMS)[1]
KEYS = jax.random.split(KEY, 2)
STATES = jax.eval_shape(jax.vmap(ENV.reset, in_axes=(0, None)), KEYS, PARAMS)[1]


@pytest.mark.parametrize(
    ("field", "value", "phrase"),
    [
        ("gpus_per_node", 2.5, "gpus_per_node holds int32"),
        ("cpu_step", np.nan, "cpu_step holds int32"),
        ("max_nodes", 2**40, "max_nodes must lie in"),
        ("use_fixed_preference", 0.5, "use_fixed_preference holds bool"),
        ("use_fixed_preference", 2, "use_fixed_preference must lie in [0, 1]"),
        ("gpus_per_node", "four", "gpus_per_node holds int32"),
        ("epoch_time_noise", "x", "epoch_time_noise holds float32"),
        ("epoch_time_noise", None, "epoch_time_noise holds float32"),
    ],
)
def test_with_values_refuses_casts_that_change_a_value(field: str, value: object, phrase: str) -> None:
    with pytest.raises(ValueError) as error:
        with_values(PARAMS, **{field: value})
    assert phrase in str(error.value)


def test_a_count_out_of_range_is_named_as_a_count() -> None:
    """``cpu_step`` 0 was refused as "got 0.0": the host copy of an integer field is float."""
    with pytest.raises(ValueError) as error:
        validate_params(with_values(PARAMS, cpu_step=0))
    assert str(error.value) == "EnvParams.cpu_step must lie in [1, 64], got 0"


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
    clipped = np.asarray(clip_action(np.array([-1, -7, 0, last, last + 1, 99, 2**40, -(2**40)]), name))
    np.testing.assert_array_equal(clipped, [0, 0, 0, last, last, last, last, 0])
    assert int(clip_action(2**31, name)) == last  # a Python int beyond int32 clips too
    # A JAX unsigned index past int32 clips in its own type (the cast wrapped it to action 0).
    assert int(clip_action(jnp.uint32(2**31 + 5), name)) == last
    assert int(jax.jit(lambda a: clip_action(a, name))(jnp.array([2**32 - 1, 1], jnp.uint32))[0]) == last


def _step(action: Any) -> Any:
    """Trace one step with ``action`` as given (a Python value stays one)."""
    return jax.eval_shape(lambda state: ENV.step(KEY, state, action, PARAMS), STATE)


def _step_state(state: Any) -> Any:
    """Trace one step of ``state`` as given."""
    return jax.eval_shape(lambda: ENV.step(KEY, state, 0, PARAMS))


# (id, call, exception, phrase): each is refused when traced, with one line naming the argument.
BAD_ENV_CALLS: list[tuple[str, Callable[[], Any], type[Exception], str]] = [
    ("float action", lambda: _step(2.7), TypeError, "action must be an integer action index"),
    ("float32 action", lambda: _step(jnp.float32(3.0)), TypeError, "got float32"),
    ("NaN action", lambda: _step(np.nan), TypeError, "action must be an integer"),
    ("bool action", lambda: _step(True), TypeError, "action must be an integer"),
    ("string action", lambda: _step("3"), TypeError, "action must be an integer"),
    ("None action", lambda: _step(None), TypeError, "action must be an integer"),
    ("batch of actions", lambda: _step(jnp.array([1, 2])), ValueError, "action must be one action index"),
    ("1x1 action", lambda: _step(jnp.array([[1]])), ValueError, "shape (1, 1)"),
    # A sweep's params stepped without mapping its axis: an error from inside jnp.stack before.
    (
        "unmapped sweep",
        lambda: jax.eval_shape(
            ENV.step, KEY, STATE, 0, with_values(PARAMS, same_shape=False, reallocation_pause_s=[1.0, 2.0])
        ),
        ValueError,
        "reallocation_pause_s has shape (2,), one configuration's 0 dimension(s): map the sweep's axis",
    ),
    # A list holding a traced action (jit's argument): NumPy's TracerArrayConversionError before.
    (
        "traced list action",
        lambda: jax.jit(ENV.step)(KEY, STATE, [jnp.int32(3)], PARAMS),
        ValueError,
        "action must be one action index (shape ()), got shape (1,)",
    ),
    (
        "traced list step_batch action",
        lambda: jax.jit(ENV.step_batch)(KEYS, STATES, [jnp.int32(3)] * 3, PARAMS),
        ValueError,
        "action must have shape (2,)",
    ),
    ("int key", lambda: jax.eval_shape(ENV.reset, 0, PARAMS), TypeError, "key must be one JAX PRNG key"),
    ("batch of keys", lambda: jax.eval_shape(ENV.reset, KEYS, PARAMS), TypeError, "of shape (2,)"),
    # Three words are no JAX PRNG's key data (2: threefry, 4: rbg); its first and last were used.
    (
        "three-word key",
        lambda: jax.eval_shape(ENV.reset, jnp.zeros(3, jnp.uint32), PARAMS),
        TypeError,
        "uint32 of shape (3,)",
    ),
    ("int step key", lambda: ENV.step(5, STATE, 0, PARAMS), TypeError, "key must be one JAX PRNG key"),
    ("params a string", lambda: ENV.reset(KEY, "x"), TypeError, "params must be EnvParams"),
    (
        "step_batch scalar action",
        lambda: jax.eval_shape(ENV.step_batch, KEYS, STATES, jnp.int32(0), PARAMS),
        ValueError,
        "action must have shape (2,)",
    ),
    (
        "step_batch short action",
        lambda: jax.eval_shape(ENV.step_batch, KEYS, STATES, jnp.zeros(3, jnp.int32), PARAMS),
        ValueError,
        "got (3,)",
    ),
    (
        "fractional reset_slots",
        lambda: ENV.step_batch(KEYS, STATES, jnp.zeros(2, jnp.int32), PARAMS, 1.5),
        ValueError,
        "reset_slots must be >= 1",
    ),
    ("None state", lambda: ENV.step(KEY, None, 0, PARAMS), TypeError, "state must be the EnvState"),
    ("dict state", lambda: _step_state({"epoch": 0}), TypeError, "got dict"),
    ("batched state", lambda: _step_state(STATES), ValueError, "state holds a batch of envs"),
    ("get_obs of None", lambda: ENV.get_obs(None, PARAMS), TypeError, "state must be the EnvState"),
    ("place None", lambda: ENV.place(None, 1, 4, PARAMS), TypeError, "state must be the EnvState"),
    (
        "step_batch one state",
        lambda: jax.eval_shape(ENV.step_batch, KEYS, STATE, jnp.zeros(2, jnp.int32), PARAMS),
        ValueError,
        "one env per key (2 on its leading axis)",
    ),
    (  # it said "one env per key (0 on its leading axis)"
        "step_batch one key",
        lambda: jax.eval_shape(ENV.step_batch, KEY, STATES, jnp.zeros(2, jnp.int32), PARAMS),
        ValueError,
        "one key per env (jax.random.split(key, num_envs)), got keys of shape ()",
    ),
    (  # a broadcasting error between shapes (80,) and (2,)
        "step_batch params per env",
        lambda: jax.eval_shape(
            ENV.step_batch,
            KEYS,
            STATES,
            jnp.zeros(2, jnp.int32),
            jax.tree.map(lambda x: jnp.stack([x, x]), PARAMS),
        ),
        ValueError,
        "for params per env use jax.vmap(env.step)",
    ),
    ("with_values unknown field", lambda: with_values(PARAMS, nosuch=1), TypeError, "no field 'nosuch'"),
    (  # 'WorkloadParams' object has no attribute 'dtype'
        "with_values of a group",
        lambda: with_values(PARAMS, workloads=PARAMS.workloads),
        ValueError,
        "workloads is a group of fields",
    ),
    ("catalog a string", lambda: JobAllocationEnv(catalog="x"), TypeError, "catalog must be a Catalog"),
    ("default_params(3)", lambda: default_params(3), TypeError, "catalog must be a Catalog"),
]


@pytest.mark.parametrize(
    ("call", "error", "phrase"), [c[1:] for c in BAD_ENV_CALLS], ids=[c[0] for c in BAD_ENV_CALLS]
)
def test_bad_env_arguments_are_refused_when_traced(
    call: Callable[[], Any], error: type[Exception], phrase: str
) -> None:
    """A float, bool or string action used to be truncated to an index (2.7 acting as 2), a batch of
    actions or keys failed deep in a stack, and an int key, string params, a missing state or an
    unknown params field with an AttributeError."""
    with pytest.raises(error) as info:
        call()
    assert phrase in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("action", [0, np.int64(5), jnp.uint8(3), jnp.int16(-1)])
def test_integer_actions_of_any_width_step(action: Any) -> None:
    obs = _step(action)[0]
    assert obs.shape == (ENV.observation_space(PARAMS).shape[0],)


def test_the_readmes_sweep_of_a_field_runs_as_written() -> None:
    """The README said ``vmap`` can sweep any field and showed no way (``with_values`` refused a
    batched value unless told ``same_shape=False``); its example steps one job under three pauses."""
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    block = readme[readme.index("`vmap` can sweep them:") :]
    code = block[block.index("```python\n") + len("```python\n") : block.index("```\n\n")]
    namespace: dict = {"print": lambda *args: None}
    exec(compile(code, "README.md", "exec"), namespace)
    took = np.asarray(namespace["states"].elapsed_s - namespace["state"].elapsed_s)
    np.testing.assert_allclose(took - took[0], np.asarray(namespace["pauses"]) - 10.0, rtol=1e-4)


def test_prices_of_another_catalogue_are_refused_in_one_line() -> None:
    """Params of a five-GPU-type catalogue failed deep in JAX ("Incompatible types for broadcasting")
    when billed with the shipped catalogue's four prices."""
    from slamorl_jax.env.prices import with_prices

    five = with_values(PARAMS, same_shape=False, gpu_price_per_hour=np.ones(5, np.float32))
    with pytest.raises(ValueError, match="params price 5 GPU types, the catalogue 4: pass the catalogue"):
        with_prices(five, "aws")


@pytest.mark.parametrize(
    ("change", "phrase"),
    [
        (lambda raw: raw["workloads"][2].pop("gamma"), "workload 'squad-bert' lacks gamma"),
        (lambda raw: raw["gpu_types"].append("A100"), "'cifar10-resnet18' has no compute_speed for A100"),
        (
            lambda raw: raw["workloads"][1]["requested_gpu_probs"].pop(),
            "'imagenet-resnet50' gives 5 requested_gpu_probs for 6 requested_gpu_bins",
        ),
        (lambda raw: raw["prices"]["reference_code"].pop("vcpu_hour"), "lacks 'vcpu_hour'"),
        (lambda raw: raw["prices"].pop("gib_hour"), "prices lack gib_hour"),
        (lambda raw: raw.update(prices=3), "must hold one JSON object, its prices an object"),
    ],
)
def test_a_calibration_file_that_lacks_something_names_the_file_and_workload(
    change: Callable[[dict], Any], phrase: str, tmp_path: Path
) -> None:
    """A researcher's catalogue missing a field or a GPU type's speed raised a bare KeyError('gamma')
    or NumPy's "inhomogeneous shape", naming neither the file nor the workload."""
    import json

    from slamorl_jax.env.catalog import CATALOG_PATH, load_catalog

    raw = json.loads(CATALOG_PATH.read_text())
    change(raw)
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(ValueError) as error:
        load_catalog(str(path))
    assert str(error.value).startswith(f"calibration file {path}: ") and phrase in str(error.value)


def test_a_table_of_distributions_names_its_row_that_does_not_sum_to_1() -> None:
    """``requested_gpu_probs`` off in one workload printed the 13 workloads' sums, not which one."""
    probs = np.asarray(PARAMS.workloads.requested_gpu_probs).copy()
    probs[3, 0] += 0.5
    bad = PARAMS.replace(workloads=with_values(PARAMS.workloads, requested_gpu_probs=probs))
    with pytest.raises(ValueError) as error:
        validate_params(bad)
    assert str(error.value) == (
        "EnvParams.workloads.requested_gpu_probs must sum to 1 in each row: row 3 sums to 1.5"
    )


def test_a_target_a_small_cluster_clips_says_where_it_lands() -> None:
    """On a 2-GPU cluster the env clips the 16-GPU target to 2, and its name still said 16."""
    from slamorl_jax.env import action_names, with_derived_tables

    small = with_derived_tables(with_values(PARAMS, gpus_per_node=2, max_nodes=1))
    names = action_names("targets", small)
    assert names[-1] == "target 16 GPUs (2 here) x 12 CPUs/GPU" and "target 2 GPUs x fewest CPUs" in names
    assert action_names("targets", PARAMS)[-1] == "target 16 GPUs x 12 CPUs/GPU"  # the default: as before

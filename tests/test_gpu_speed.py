"""Tests of the per-GPU-type speeds the calibration builds (calibration/gpu_speed.py), on the vendored
data: which workloads take their own model's measured ratios and which the median."""

from __future__ import annotations

import pytest

from slamorl_jax.calibration import gpu_speed


@pytest.fixture(scope="module")
def t4() -> gpu_speed.T4V100Ratio:
    return gpu_speed.t4_over_v100({"ResNet-18": 256, "ResNet-50": 128})


@pytest.mark.parametrize(
    ("app", "job", "local_batch"), [("cifar10", "ResNet-18", 129), ("imagenet", "ResNet-50", 200)]
)
def test_shared_models_take_their_own_ratio_at_the_nearest_common_batch(t4, app, job, local_batch):
    batch = gpu_speed.same_model_batch(app, local_batch)
    assert batch == 128  # measured on K80, P100 and V100; nearest 129 and 200 in log
    speeds = gpu_speed.pollux_workload_speeds(app, local_batch, t4.ratio)
    assert speeds["T4"] == 1.0
    for gpu in ("K80", "P100", "V100"):
        assert speeds[gpu] == pytest.approx(gpu_speed.speed_over_t4(app, job, batch, gpu.lower()), rel=1e-12)
    # Not the median every other Pollux workload takes.
    assert speeds["K80"] != pytest.approx(gpu_speed.median_pollux_speeds(t4.ratio)["K80"], rel=0.1)


def test_other_pollux_workloads_take_the_median(t4):
    assert gpu_speed.shared_model("bert") is None
    assert gpu_speed.pollux_workload_speeds("bert", 12, t4.ratio) == gpu_speed.median_pollux_speeds(t4.ratio)
    with pytest.raises(ValueError, match="measured no model"):
        gpu_speed.same_model_batch("bert", 12)


def test_gavel_twins_ratio_is_keyed_by_gavel_job_type(t4):
    # build.py reads a Gavel workload's T4/V100 as t4.per_model[spec.key]: keyed by Gavel's job type.
    assert set(t4.per_model) == {job for _, job in gpu_speed.SHARED_MODELS}
    low, high = sorted(t4.per_model.values())
    assert low < t4.ratio < high  # the geometric mean lies between the two models'


def test_nearest_batch_refuses_a_type_with_no_common_batch():
    with pytest.raises(ValueError, match="no batch measured"):
        gpu_speed.nearest_batch("ResNet-18", 128, ("k80", "no-such-gpu"))

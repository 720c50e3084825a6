"""Tests of the calibration: the shipped JSON against the vendored measurements.

Every error is recomputed from the shipped parameters through ``slamorl_jax.env.throughput`` (not
read from the JSON's ``fit`` field). The fast tests need NumPy and JAX only; the slow test reruns
the whole calibration (SciPy) and checks it reproduces the shipped file.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from calibration_fixtures import assert_json_close

from slamorl_jax.calibration import checks, cpu_profiles, prices, requested
from slamorl_jax.calibration.loaders import (
    DEFAULT_DATA_DIR,
    DEFAULT_OUTPUT,
    load_pollux_step_times,
    load_synergy_cpu_profiles,
)
from slamorl_jax.calibration.model import StepModel, predict_samples_per_s
from slamorl_jax.calibration.workloads import WORKLOADS, WORKLOADS_BY_NAME

REPO_ROOT = Path(__file__).resolve().parent.parent

TOP_LEVEL_KEYS = {
    "format_version",
    "generated_by",
    "gpu_types",
    "requested_gpu_bins",
    "requested_cpus_per_gpu",
    "prices",
    "cpu_profiles",
    "workloads",
}
WORKLOAD_KEYS = {
    "name",
    "source",
    "model",
    "dataset",
    "samples_per_epoch",
    "local_batch",
    "epochs_min",
    "epochs_max",
    "data_parallel",
    "calibration_gpu",
    "calibration_intra_node_gbps",
    "calibration_inter_node_gbps",
    "calibration_cpus_per_gpu",
    "compute_alpha_s",
    "compute_beta_s",
    "sync_local_alpha_s",
    "sync_local_beta_s",
    "sync_node_alpha_s",
    "sync_node_beta_s",
    "sync_two_node_factor",
    "gamma",
    "compute_speed",
    "cpu_profile",
    "cpu_c_sat",
    "cpu_p",
    "requested_gpu_probs",
    "fit",
}
FIT_KEYS = {"median_rel_error", "max_rel_error", "num_points", "data"}
POLLUX_NAMES = [s.name for s in WORKLOADS if s.source == "pollux"]
GAVEL_NAMES = [s.name for s in WORKLOADS if s.source == "gavel"]


@pytest.fixture(scope="module")
def shipped() -> dict:
    return checks.load_shipped(DEFAULT_OUTPUT)


def _entry(shipped: dict, name: str) -> dict:
    return next(w for w in shipped["workloads"] if w["name"] == name)


# --- schema ------------------------------------------------------------------------------------


def test_json_keys_match_schema(shipped):
    assert set(shipped) == TOP_LEVEL_KEYS
    assert shipped["format_version"] == 1
    assert shipped["generated_by"] == "python -m slamorl_jax.calibration"
    assert shipped["gpu_types"] == ["T4", "K80", "P100", "V100"]
    assert shipped["requested_gpu_bins"] == [1, 2, 4, 8, 16, 32]
    assert set(shipped["requested_cpus_per_gpu"]) == {"values", "probs"}
    assert set(shipped["prices"]) == {
        "vcpu_hour",
        "gib_hour",
        "gpu_hour",
        "reference_code",
        "notes",
    }
    assert set(shipped["prices"]["gpu_hour"]) == {"T4", "K80", "P100", "V100", "A100"}
    for prof in shipped["cpu_profiles"].values():
        assert set(prof) == {"c_sat", "p", "max_abs_error"}
    for w in shipped["workloads"]:
        assert set(w) == WORKLOAD_KEYS, w["name"]
        assert set(w["fit"]) == FIT_KEYS, w["name"]
        assert set(w["compute_speed"]) == set(shipped["gpu_types"])
        assert w["source"] in ("pollux", "gavel")
        assert w["calibration_gpu"] == ("T4" if w["source"] == "pollux" else "V100")
        assert isinstance(w["samples_per_epoch"], int) and w["samples_per_epoch"] > 0
        assert isinstance(w["local_batch"], int) and w["local_batch"] > 0
        assert isinstance(w["data_parallel"], bool)


def test_thirteen_unique_kebab_case_names_in_spec_order(shipped):
    names = [w["name"] for w in shipped["workloads"]]
    assert len(names) == 13 == len(set(names))
    assert names == [s.name for s in WORKLOADS]
    for n in names:
        assert n == n.lower() and " " not in n and "_" not in n


def test_shipped_json_is_loadable_by_the_environment_catalog(shipped):
    catalog = pytest.importorskip("slamorl_jax.env.catalog")
    cat = catalog.parse_catalog(shipped)
    assert cat.num_workloads == 13


def test_probability_vectors_sum_to_one(shipped):
    cpu = shipped["requested_cpus_per_gpu"]
    assert len(cpu["values"]) == len(cpu["probs"])
    assert math.isclose(sum(cpu["probs"]), 1.0, abs_tol=1e-9)
    assert all(v > 0 for v in cpu["values"]) and cpu["values"] == sorted(cpu["values"])
    for w in shipped["workloads"]:
        p = w["requested_gpu_probs"]
        assert len(p) == 6 and min(p) >= 0.0
        assert math.isclose(sum(p), 1.0, abs_tol=1e-9), w["name"]
        if not w["data_parallel"]:
            assert p[0] == 1.0


def test_epochs_and_speeds_are_sane(shipped):
    for w in shipped["workloads"]:
        assert 2 <= w["epochs_min"] <= w["epochs_max"] <= 120, w["name"]
        assert w["compute_speed"][w["calibration_gpu"]] == 1.0
        assert all(s > 0 for s in w["compute_speed"].values())
        assert 1.0 <= w["gamma"] <= 10.0
        spec = WORKLOADS_BY_NAME[w["name"]]
        assert w["cpu_profile"] == spec.cpu_profile
        prof = shipped["cpu_profiles"][w["cpu_profile"]]
        assert (w["cpu_c_sat"], w["cpu_p"]) == (prof["c_sat"], prof["p"])
        if not w["data_parallel"]:
            sync = [w[k] for k in WORKLOAD_KEYS if k.startswith("sync_") and k != "sync_two_node_factor"]
            assert sync == [0.0] * 4 and w["gamma"] == 1.0
        assert w["sync_two_node_factor"] >= 1.0


# --- step-time fits ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", POLLUX_NAMES)
def test_pollux_median_throughput_error_at_most_10_percent(shipped, name):
    err = checks.pollux_rel_errors(_entry(shipped, name))
    assert np.median(err["all"]) <= 0.10
    # Both trace files are covered, and the stored fit summary agrees with the recomputation.
    assert len(err["placements"]) > 0 and len(err["scalability"]) > 0
    fit = _entry(shipped, name)["fit"]
    assert fit["num_points"] == len(err["all"])
    assert math.isclose(fit["median_rel_error"], float(np.median(err["all"])), rel_tol=1e-6)


@pytest.mark.parametrize("name", GAVEL_NAMES)
def test_gavel_median_throughput_error_at_most_15_percent(shipped, name):
    w = _entry(shipped, name)
    err = checks.gavel_rel_errors(w)
    assert len(err) == (7 if w["data_parallel"] else 1)
    assert np.median(err) <= 0.15
    assert math.isclose(w["fit"]["median_rel_error"], float(np.median(err)), abs_tol=1e-9)


def test_gavel_non_data_parallel_types_have_only_single_gpu_data(shipped):
    for name in GAVEL_NAMES:
        w = _entry(shipped, name)
        spec = WORKLOADS_BY_NAME[name]
        pts = checks.gavel_fit.gavel_points(
            spec.key, checks.gavel_job_batch(w), w["local_batch"], "v100", DEFAULT_DATA_DIR
        )
        assert (pts.num_gpus.max() > 1) == w["data_parallel"], name


def _bert_model_and_batch(shipped: dict) -> tuple[StepModel, int]:
    w = _entry(shipped, "squad-bert")
    return StepModel.from_mapping(w), int(w["local_batch"])


def test_bert_node_boundary_cliff_in_measured_data(shipped):
    # Placement "4": 4 GPUs on one node; "44": 8 GPUs over two nodes (Pollux T4 cluster).
    _, m = _bert_model_and_batch(shipped)
    d = load_pollux_step_times("bert", DEFAULT_DATA_DIR)
    at_m = d.select((d.local_batch == m) & np.isin(d.placement, ["4", "44"]))
    measured = dict(zip(at_m.placement.tolist(), at_m.samples_per_s.tolist(), strict=True))
    assert measured["44"] < measured["4"]


def test_bert_model_loses_throughput_when_crossing_the_node_boundary(shipped):
    model, m = _bert_model_and_batch(shipped)
    # 4 GPUs on one node vs 5, 6 GPUs packed onto two nodes.
    tput = predict_samples_per_s(model, np.array([4.0, 5.0, 6.0]), np.array([1.0, 2.0, 2.0]), m)
    assert tput[1] < tput[0] and tput[2] < tput[0]


def test_bert_model_8_gpus_over_2_nodes_below_4_gpus_on_one_node(shipped):
    """The node-boundary cliff as measured: 8 GPUs packed on 2 nodes are slower than 4 on one."""
    model, m = _bert_model_and_batch(shipped)
    one_node, two_nodes = predict_samples_per_s(model, np.array([4.0, 8.0]), np.array([1.0, 2.0]), m)
    assert two_nodes < one_node


def test_pollux_local_batch_is_measured_on_most_placements(shipped):
    for name in POLLUX_NAMES:
        w = _entry(shipped, name)
        d = load_pollux_step_times(WORKLOADS_BY_NAME[name].key, DEFAULT_DATA_DIR)
        pl = d.select(d.source == "placements")
        assert (
            np.mean(np.isin(np.unique(pl.placement), pl.placement[pl.local_batch == w["local_batch"]]))
            >= 0.95
        )


# --- CPU factor ----------------------------------------------------------------------------------


def test_synergy_fits_max_abs_error_at_most_0_15(shipped):
    profiles = load_synergy_cpu_profiles(DEFAULT_DATA_DIR, cpu_profiles.MEM_GB_PER_GPU)
    assert set(profiles) == set(shipped["cpu_profiles"])
    for name, (cpus, measured) in profiles.items():
        fit = shipped["cpu_profiles"][name]
        err = cpu_profiles.max_abs_error(cpus, measured, fit["c_sat"], fit["p"])
        assert err <= 0.15, name
        if np.allclose(measured, 1.0):
            assert (fit["c_sat"], fit["p"]) == (0.0, 1.0)


def test_cpu_profiles_match_published_saturation_points(shipped):
    # Steering team's fit of the same form (shared/data/README.md): ResNet-18 7.34, ResNet-50 3.08.
    assert shipped["cpu_profiles"]["res18"]["c_sat"] == pytest.approx(7.34, abs=0.05)
    assert shipped["cpu_profiles"]["res50"]["c_sat"] == pytest.approx(3.08, abs=0.05)


# --- prices and request distributions (NumPy-only fits, recomputed here) ------------------------


def test_prices_near_expected_values(shipped):
    p = shipped["prices"]
    assert p["vcpu_hour"] == pytest.approx(0.0357, rel=0.01)
    assert p["gib_hour"] == pytest.approx(0.00342, rel=0.01)
    gpu = p["gpu_hour"]
    assert 0.33 <= gpu["T4"] <= 0.42
    assert gpu["K80"] == pytest.approx(0.55, rel=0.02)
    assert gpu["V100"] == pytest.approx(2.57, rel=0.01)
    assert gpu["A100"] == pytest.approx(3.18, rel=0.01)
    assert gpu["P100"] == pytest.approx(gpu["V100"] * 1.68 / 2.85, rel=1e-6)
    assert p["reference_code"] == {"gpu_hour": 10.0, "vcpu_hour": 3.0, "gib_hour": 2.0}
    fresh = prices.fit_prices(DEFAULT_DATA_DIR)
    assert fresh.vcpu_hour == pytest.approx(p["vcpu_hour"], rel=1e-6)
    assert fresh.gpu_hour == pytest.approx(gpu, rel=1e-6)


def test_request_distributions_recomputed(shipped):
    req = requested.fit_requests(DEFAULT_DATA_DIR)
    assert req.cpus_per_gpu_values == pytest.approx(shipped["requested_cpus_per_gpu"]["values"])
    for w in shipped["workloads"]:
        spec = WORKLOADS_BY_NAME[w["name"]]
        if spec.source == "pollux":
            expected = req.pollux_gpu_probs[spec.key]
        elif spec.data_parallel:
            expected = req.philly_gpu_probs
        else:
            expected = requested.single_gpu_probabilities()
        assert w["requested_gpu_probs"] == pytest.approx(expected, abs=1e-9)


def test_snap_to_bins_is_nearest_in_log2():
    counts = np.array([1, 2, 3, 5, 6, 12, 24, 48, 128])
    bins = np.asarray(requested.GPU_BINS)[requested.snap_to_bins(counts)]
    assert bins.tolist() == [1, 2, 4, 4, 8, 16, 32, 32, 32]
    with pytest.raises(ValueError):
        requested.snap_to_bins(np.array([0]))


# --- packaging -----------------------------------------------------------------------------------


def test_vendored_data_has_readmes():
    for folder in (
        "pollux-osdi21",
        "gavel-osdi20",
        "synergy-osdi22",
        "aws-ec2-prices",
        "alibaba-gpu-v2023",
    ):
        assert (DEFAULT_DATA_DIR / folder / "README.md").is_file(), folder
    assert (DEFAULT_DATA_DIR / "README.md").is_file()


def test_importing_the_checks_does_not_need_scipy():
    # SciPy is the calibrate extra's. It may still be imported when installed: gymnax (a core
    # dependency) imports seaborn, which uses SciPy if it is there, so the check blocks it instead.
    code = (
        "import sys\n"
        "sys.modules['scipy'] = None  # any 'import scipy' now fails\n"
        "import slamorl_jax.calibration.checks, slamorl_jax.calibration.build\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO_ROOT)


# --- full rerun ----------------------------------------------------------------------------------


# slow: a real process (8 s). The default suite runs the same fit in-process, failing CI on an edit
# of the data or code that changes it (test_calibration_cli.py::
# test_valid_run_writes_what_calibrate_returns).
@pytest.mark.slow
def test_rerunning_the_calibration_reproduces_the_shipped_json(shipped, tmp_path):
    """``python -m slamorl_jax.calibration`` writes the package's JSON: what the committed data and
    code fit."""
    pytest.importorskip("scipy")
    out = tmp_path / "calibrated_workloads.json"
    subprocess.run(
        [sys.executable, "-m", "slamorl_jax.calibration", "--output", str(out)],
        check=True,
        cwd=REPO_ROOT,
        capture_output=True,
    )
    assert_json_close(json.loads(out.read_text()), shipped)

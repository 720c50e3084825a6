"""Tests of the sensitivity table of the unsourced calibration assumptions (calibration/assumptions.py).

Each figure is checked against arithmetic done here on the raw vendored files (JSON and CSV read with
the standard library) and the shipped calibrated JSON, not through the calibration's loaders."""

from __future__ import annotations

import csv
import itertools
import json
import math

import numpy as np
import pytest

from slamorl_jax.calibration import assumptions
from slamorl_jax.calibration.loaders import DEFAULT_DATA_DIR, DEFAULT_OUTPUT
from slamorl_jax.env import default_params

GAVEL_JSON = DEFAULT_DATA_DIR / "gavel-osdi20" / "simulation_throughputs.json"
POLLUX_TRACES = DEFAULT_DATA_DIR / "pollux-osdi21" / "traces"
PRICE_CSV = DEFAULT_DATA_DIR / "aws-ec2-prices" / "aws_gpu_instances_us_east_1.csv"


@pytest.fixture(scope="module")
def rows() -> list[assumptions.Sensitivity]:
    return assumptions.sensitivities()


@pytest.fixture(scope="module")
def shipped() -> dict[str, dict]:
    return {w["name"]: w for w in json.loads(DEFAULT_OUTPUT.read_text())["workloads"]}


def row_of(rows: list[assumptions.Sensitivity], item: int, subject: str) -> assumptions.Sensitivity:
    (row,) = [r for r in rows if r.item == item and r.subject.startswith(subject)]
    return row


def gavel_samples_per_s(gpu: str, job: str, batch: int) -> float:
    """Gavel's 1-GPU iterations/s x batch, read straight from the JSON."""
    raw = json.loads(GAVEL_JSON.read_text())
    return raw[gpu][f"('{job} (batch size {batch})', 1)"]["null"] * batch


def pollux_t4_samples_per_s(app: str, batch: int) -> float:
    """Pollux's 1-GPU samples/s at ``batch``, log-log interpolated between the two measured batches
    around it (or the measured one)."""
    with (POLLUX_TRACES / app / "placements.csv").open(newline="") as f:
        one = sorted(
            (float(r["local_bsz"]), float(r["local_bsz"]) / float(r["step_time"]))
            for r in csv.DictReader(f)
            if r["placement"] == "1"
        )
    (b0, t0), (b1, t1) = next((lo, hi) for lo, hi in itertools.pairwise(one) if lo[0] <= batch <= hi[0])
    w = (math.log(batch) - math.log(b0)) / (math.log(b1) - math.log(b0))
    return math.exp((1 - w) * math.log(t0) + w * math.log(t1))


@pytest.mark.parametrize(
    ("subject", "app", "job", "gpu", "documented"),
    [
        ("cifar10-resnet18 on K80", "cifar10", "ResNet-18", "k80", 0.186),
        ("cifar10-resnet18 on P100", "cifar10", "ResNet-18", "p100", 1.204),
        ("imagenet-resnet50 on K80", "imagenet", "ResNet-50", "k80", 0.214),
        ("imagenet-resnet50 on P100", "imagenet", "ResNet-50", "p100", 0.976),
        ("cifar10-resnet18 on V100", "cifar10", "ResNet-18", "v100", 1.856),
        ("imagenet-resnet50 on V100", "imagenet", "ResNet-50", "v100", 1.538),
    ],
)
def test_item1_shipped_speeds_are_the_same_models_gavel_over_pollux_at_batch_128(
    rows, shipped, subject, app, job, gpu, documented
):
    row = row_of(rows, 1, subject)
    direct = gavel_samples_per_s(gpu, job, 128) / pollux_t4_samples_per_s(app, 128)
    assert row.shipped == pytest.approx(direct, rel=1e-6)
    assert row.shipped == pytest.approx(documented, abs=1e-3)
    assert row.shipped == pytest.approx(shipped[subject.split()[0]]["compute_speed"][gpu.upper()], rel=1e-6)
    # On one GPU the step is compute alone: the throughput moves with the speed.
    (label, ratio), _ = row.effects
    assert label == "1 GPU" and ratio == pytest.approx(row.shipped / row.alternative, rel=1e-5)


def test_gavel_twins_t4_speed_is_their_own_model_ratio(shipped):
    # The Gavel ResNets (V100 = 1) take T4 from their own model at their batch, not the mean of both.
    for job, batch, name in (
        ("ResNet-18", 256, "cifar10-resnet18-gavel"),
        ("ResNet-50", 128, "imagenet-resnet50-gavel"),
    ):
        app = "cifar10" if job == "ResNet-18" else "imagenet"
        assert shipped[name]["local_batch"] == batch
        own = pollux_t4_samples_per_s(app, batch) / gavel_samples_per_s("v100", job, batch)
        assert shipped[name]["compute_speed"]["T4"] == pytest.approx(own, rel=1e-6)


def test_item1_alternative_is_the_median_the_other_pollux_workloads_have(rows, shipped):
    raw = json.loads(GAVEL_JSON.read_text())
    jobs = [key for key in raw["v100"] if key.endswith(", 1)")]
    k80 = np.median(
        [raw["k80"][j]["null"] / raw["v100"][j]["null"] for j in jobs if raw["k80"][j]["null"] > 0]
    )
    t4_over_v100 = math.sqrt(
        pollux_t4_samples_per_s("cifar10", 256)
        / gavel_samples_per_s("v100", "ResNet-18", 256)
        * pollux_t4_samples_per_s("imagenet", 128)
        / gavel_samples_per_s("v100", "ResNet-50", 128)
    )
    alternative = row_of(rows, 1, "cifar10-resnet18 on K80").alternative
    assert alternative == pytest.approx(k80 / t4_over_v100, rel=1e-6)
    # The Pollux workloads with no model in Gavel's data ship exactly that speed.
    v100 = row_of(rows, 1, "cifar10-resnet18 on V100").alternative
    assert v100 == pytest.approx(1.0 / t4_over_v100, rel=1e-6)
    for name in ("squad-bert", "voc-yolov3", "movielens-ncf", "arctic-deepspeech2"):
        assert shipped[name]["compute_speed"]["K80"] == pytest.approx(alternative, rel=1e-6)
        assert shipped[name]["compute_speed"]["V100"] == pytest.approx(v100, rel=1e-6)


def aws_rows() -> list[dict[str, str]]:
    with PRICE_CSV.open(newline="") as f:
        return list(csv.DictReader(f))


def unit_prices() -> tuple[float, float, dict[str, float]]:
    """($/vCPU-h, $/GiB-h) solved from c5/r5.24xlarge, and the median implied $/GPU-h of g4dn, p2, p3."""
    by_name = {r["InstanceType"]: r for r in aws_rows()}
    ref = [by_name[n] for n in ("c5.24xlarge", "r5.24xlarge")]
    vcpu, gib = np.linalg.solve(
        [[float(r["vCPUs"]), float(r["MemoryGiB"])] for r in ref], [float(r["Price"]) for r in ref]
    )

    def implied(r: dict[str, str]) -> float:
        rest = float(r["vCPUs"]) * vcpu + float(r["MemoryGiB"]) * gib
        return (float(r["Price"]) - rest) / float(r["AcceleratorCount"])

    gpu = {
        t: float(np.median([implied(r) for r in by_name.values() if r["InstanceType"].split(".")[0] == fam]))
        for t, fam in (("T4", "g4dn"), ("K80", "p2"), ("V100", "p3"))
    }
    return float(vcpu), float(gib), gpu


@pytest.mark.parametrize(("gpu", "documented"), [("T4", 1.071), ("K80", 1.050), ("V100", 1.011)])
def test_item4_billed_host_memory_raises_the_gpu_price(rows, gpu, documented):
    _, gib, implied = unit_prices()
    host = float(default_params().host_memory_gib_per_gpu)
    row = row_of(rows, 4, gpu)
    assert row.alternative == pytest.approx(implied[gpu], rel=1e-5)
    assert row.shipped == pytest.approx(implied[gpu] + host * gib, rel=1e-5)
    assert row.effects[0][1] == pytest.approx(1 + host * gib / implied[gpu], rel=1e-5)
    assert row.effects[0][1] == pytest.approx(documented, abs=5e-4)


def test_item4_a_whole_g4dn_12xlarge_costs_more_than_aws(rows):
    vcpu, gib, implied = unit_prices()
    params = default_params()
    host, per_vcpu = float(params.host_memory_gib_per_gpu), float(params.memory_gib_per_vcpu)
    row = row_of(rows, 4, "g4dn.12xlarge")
    aws = next(float(r["Price"]) for r in aws_rows() if r["InstanceType"] == "g4dn.12xlarge")
    base = 4 * implied["T4"] + 48 * vcpu + 48 * per_vcpu * gib
    assert row.alternative == pytest.approx(base, rel=1e-5)
    assert row.alternative == pytest.approx(aws, abs=1e-3)  # g4dn.12xlarge is the family's median
    assert row.shipped == pytest.approx(base + 4 * host * gib, rel=1e-5)
    assert (round(row.shipped, 3), aws) == (4.021, 3.912)


def step_time(t_comp: float, t_sync: float, gamma: float) -> float:
    return (t_comp**gamma + t_sync**gamma) ** (1 / gamma)


@pytest.mark.parametrize("name", ["imagenet-resnet50-gavel", "cifar10-resnet18-gavel", "wikitext2-lstm"])
def test_item2_network_ratio_is_the_step_time_ratio(rows, shipped, name):
    w = shipped[name]
    params = default_params()
    assert (w["calibration_inter_node_gbps"], float(params.inter_node_gbps)) == (25.0, 50.0)
    t_comp = w["compute_alpha_s"] / w["compute_speed"]["T4"]  # beta_c = 0 for Gavel
    sync = w["sync_node_alpha_s"] + w["sync_node_beta_s"] * (8 - 2)  # 8 GPUs on 2 nodes, factor 1
    expected = step_time(t_comp, sync, w["gamma"]) / step_time(t_comp, 0.5 * sync, w["gamma"])
    row = row_of(rows, 2, name)
    assert (row.shipped, row.alternative) == (25.0, 50.0)
    assert row.effects[0] == ("T4 x 8 GPUs on 2 nodes", pytest.approx(expected, rel=1e-4))
    assert 1.0 < row.effects[0][1] < row.effects[1][1]


def test_item3_cpu_ratio_is_phi_at_12_over_phi_at_8(rows, shipped):
    w = shipped["cifar10-resnet18-gavel"]

    def phi(x: float) -> float:
        return (1 + (w["cpu_c_sat"] / x) ** w["cpu_p"]) ** (-1 / w["cpu_p"])

    row = row_of(rows, 3, "cifar10-resnet18-gavel")
    assert (row.shipped, row.alternative) == (8.0, 12.0)
    assert row.effects[0][1] == pytest.approx(phi(12.0) / phi(8.0), rel=1e-5)
    assert not [r for r in rows if r.item == 3 and "lstm" in r.subject]  # flat profiles are left out


def test_spot_ratios_are_the_price_files():
    spot = assumptions.spot_ratios(assumptions.load_catalog())
    direct = {
        r["InstanceType"]: float(r["SpotPrice"]) / float(r["Price"])
        for r in aws_rows()
        if r["AcceleratorName"] in ("T4", "K80", "P100", "V100") and r["SpotPrice"]
    }
    assert spot.ratios == pytest.approx(direct)
    assert (round(min(direct.values()), 2), round(max(direct.values()), 2)) == (0.30, 0.70)
    assert (spot.rise_low, spot.rise_high) == (1.5, 3.0)


def test_cli_prints_the_markdown_table_and_refuses_a_bad_flag(capsys, rows):
    assert assumptions.main(["--markdown"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("| # | assumption |")
    assert assumptions.format_markdown(rows) in out and "SpotPrice / Price" in out
    with pytest.raises(SystemExit) as exit_info:
        assumptions.main(["--markdwn"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unrecognized arguments: --markdwn" in err


def test_the_page_holds_the_table_as_printed(rows):
    page = (DEFAULT_DATA_DIR.parents[2] / "docs" / "calibration.md").read_text()
    section = page[page.index("## Assumptions without a source") : page.index("## Known limits")]
    assert assumptions.format_markdown(rows) in section
    assert assumptions.format_spot(assumptions.spot_ratios(assumptions.load_catalog())) in section

"""Cloud prices from the vendored AWS on-demand rows (us-east-1).

* $/vCPU-h and $/GiB-h: least squares ``price = vcpus * a + mem_gib * b`` over the CPU-only
  reference rows c5.24xlarge (compute-optimised, 2 GiB per vCPU) and r5.24xlarge (memory-optimised,
  8 GiB per vCPU), which differ only in memory per vCPU.
* implied $/GPU-h of an instance: ``(price - vcpus * a - mem_gib * b) / gpus``; per GPU type the
  median over that family's sizes (T4: g4dn, K80: p2, V100: p3 without p3dn, A100: p4d).
* P100 has no AWS row: AWS V100 price times Gavel's GCP on-demand ratio p100 / v100 = 1.68 / 2.85
  (constants in ``stanford-futuredata/gavel``
  ``scheduler/notebooks/figures/motivation/normalized_throughput_per_cost.ipynb``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from slamorl_jax.calibration.loaders import AWS_PRICE_FILE, DEFAULT_DATA_DIR, InstancePrice, load_aws_prices

CPU_REFERENCE_INSTANCES: tuple[str, ...] = ("c5.24xlarge", "r5.24xlarge")
#: Instance families (prefix of the instance type before the dot) used for each GPU type.
GPU_FAMILIES: dict[str, str] = {"T4": "g4dn", "K80": "p2", "V100": "p3", "A100": "p4d"}
#: Gavel's GCP on-demand $/GPU-h (P100 and V100), used only for the P100 / V100 price ratio.
GCP_ON_DEMAND_P100 = 1.68
GCP_ON_DEMAND_V100 = 2.85
#: The reference code's flat prices, kept as a selectable preset.
REFERENCE_CODE_PRICES: dict[str, float] = {"gpu_hour": 10.0, "vcpu_hour": 3.0, "gib_hour": 2.0}


def price_notes() -> str:
    """How the prices were fitted, for the calibrated JSON (built from this module's constants)."""
    cpu_rows = " and ".join(CPU_REFERENCE_INSTANCES)
    families = ", ".join(f"{family} ({gpu})" for gpu, family in GPU_FAMILIES.items())
    return (
        f"AWS us-east-1 on-demand (SkyPilot catalogue rows in {AWS_PRICE_FILE.parent}/). $/vCPU-h and"
        f" $/GiB-h: least squares on {cpu_rows}. $/GPU-h: instance price minus its vCPUs and memory"
        f" at those rates, per GPU; median over the instance families {families} (a family is the"
        f" type's name before its dot, so p3dn is not p3). P100 has no AWS row: V100 price x"
        f" {GCP_ON_DEMAND_P100:g}/{GCP_ON_DEMAND_V100:g} (Gavel's GCP on-demand P100/V100 prices)."
        " reference_code: the reference implementation's flat prices."
    )


@dataclass(frozen=True)
class Prices:
    """Fitted unit prices (USD per hour)."""

    vcpu_hour: float
    gib_hour: float
    gpu_hour: dict[str, float]
    implied_per_instance: dict[str, float] = field(default_factory=dict)


def fit_cpu_memory_prices(rows: list[InstancePrice]) -> tuple[float, float]:
    """Least-squares $/vCPU-h and $/GiB-h from the CPU-only reference rows."""
    ref = [r for r in rows if r.instance_type in CPU_REFERENCE_INSTANCES]
    if len(ref) != len(CPU_REFERENCE_INSTANCES):
        raise ValueError(f"missing CPU reference rows {CPU_REFERENCE_INSTANCES}")
    a = np.array([[r.vcpus, r.memory_gib] for r in ref])
    y = np.array([r.price_per_hour for r in ref])
    (vcpu, gib), *_ = np.linalg.lstsq(a, y, rcond=None)
    return float(vcpu), float(gib)


def fit_prices(data_dir: Path = DEFAULT_DATA_DIR) -> Prices:
    """Unit prices and implied $/GPU-h per GPU type (T4, K80, P100, V100, A100)."""
    rows = load_aws_prices(data_dir)
    vcpu, gib = fit_cpu_memory_prices(rows)
    implied = {
        r.instance_type: (r.price_per_hour - r.vcpus * vcpu - r.memory_gib * gib) / r.accelerator_count
        for r in rows
        if r.accelerator_count > 0
    }
    gpu: dict[str, float] = {}
    for gpu_type, family in GPU_FAMILIES.items():
        vals = [v for name, v in implied.items() if name.split(".", 1)[0] == family]
        if not vals:
            raise ValueError(
                f"{Path(data_dir) / AWS_PRICE_FILE}: no {family} row with GPUs (the {gpu_type} price)"
            )
        gpu[gpu_type] = float(np.median(vals))
    gpu["P100"] = gpu["V100"] * GCP_ON_DEMAND_P100 / GCP_ON_DEMAND_V100
    fitted = {"$/vCPU-h": vcpu, "$/GiB-h": gib, **{f"{name} $/GPU-h": v for name, v in gpu.items()}}
    if not all(v > 0 for v in fitted.values()):  # prices that would make allocations pay the user
        name, value = next((n, v) for n, v in fitted.items() if not v > 0)
        raise ValueError(f"{Path(data_dir) / AWS_PRICE_FILE}: the fit gives {name} {value:.4g}, not above 0")
    order = ("T4", "K80", "P100", "V100", "A100")
    return Prices(
        vcpu_hour=vcpu,
        gib_hour=gib,
        gpu_hour={k: gpu[k] for k in order},
        implied_per_instance=dict(sorted(implied.items())),
    )

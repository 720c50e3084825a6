"""Sensitivity of the simulator to calibration assumptions that no vendored source states.

Each row names an assumption, its shipped value, the alternative the data suggests (or, where the
data are silent, the obvious other value) and the effect on a simulated quantity as the ratio
shipped / alternative. The simulated quantities come from the environment's own code
(``env/job_model.py`` on ``default_params()``, one field changed), the alternatives from the vendored
data through the calibration's loaders (docs/calibration.md, "Assumptions without a source"):

1. the K80 and P100 speed of the Pollux workloads (T4-calibrated) whose model Gavel measured too:
   that model's own ratio (Gavel's samples/s on that GPU over Pollux's T4 samples/s at the Gavel
   batch nearest the workload's per-GPU batch), against the median Gavel ratio over all job types
   that the other four Pollux workloads, with no model in Gavel's data, have to use;
2. Gavel's calibration network (25 Gb/s, an assumed p3.16xlarge): against the cluster's own, i.e.
   Gavel's inter-node sync terms used as measured;
3. Gavel's calibration vCPUs per GPU (8, an assumed p3): against the cluster's own (no CPU correction);
4. host memory per GPU billed on top of an implied $/GPU-h that already netted out the instance's
   whole memory: against billing the GPU at its implied price alone.

A last line gives the spot / on-demand ratios of the AWS file's ``SpotPrice`` column beside the size
of the ``price_rise`` event (item 5 of the page). ``python -m slamorl_jax.calibration.assumptions
[--markdown]`` prints the table (bad input: one line, exit status 2). NumPy + JAX, a few seconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from slamorl_jax.cli_start import program_name, require_backend  # before JAX, NumPy: quiet Ctrl-C
from slamorl_jax.markdown import markdown_table

require_backend()  # run as a program: a platform the machine lacks is one line, before the env's imports
# ruff: noqa: E402  (the imports below start JAX's backend)
import jax.numpy as jnp
import numpy as np

from slamorl_jax.calibration import gpu_speed
from slamorl_jax.calibration.loaders import (
    AWS_PRICE_FILE,
    DEFAULT_DATA_DIR,
    InstancePrice,
    load_aws_prices,
)
from slamorl_jax.calibration.workloads import WORKLOADS, WORKLOADS_BY_NAME
from slamorl_jax.cli_args import OneLineArgumentParser, run_command, summary
from slamorl_jax.env.catalog import Catalog, gpu_type_index, load_catalog, workload_index
from slamorl_jax.env.defaults import default_params
from slamorl_jax.env.job_model import allocation_price_per_hour, epoch_metrics, job_constants_table
from slamorl_jax.env.params import EnvParams, max_gpus, with_values
from slamorl_jax.env.shifts import DEFAULT_SHIFT_SIZE_HIGH, DEFAULT_SHIFT_SIZE_LOW, PRICE_RISE

PROG = program_name("slamorl_jax.calibration.assumptions")  # as started: -m or its script


@dataclass(frozen=True)
class Sensitivity:
    """One row: an assumption about ``subject``, its shipped and alternative values, their effects."""

    item: int  # number of the assumption in docs/calibration.md
    subject: str  # the workload, GPU type or instance the row is about
    assumption: str
    shipped: float
    alternative: float
    value_format: str  # how both values print, e.g. "{:.3f}" or "{:g} Gb/s"
    source: str  # where the alternative comes from
    effects: tuple[tuple[str, float], ...]  # (simulated quantity, shipped / alternative)


@dataclass(frozen=True)
class SpotRatios:
    """``SpotPrice / Price`` of the AWS rows of the simulator's GPU types, and the ``price_rise`` size."""

    ratios: dict[str, float]  # instance type -> spot / on-demand
    rise_low: float
    rise_high: float


def cluster_cpus_per_gpu(params: EnvParams) -> float:
    """vCPUs per GPU of one of the cluster's nodes (12 on the default g4dn.12xlarge)."""
    return float(params.cpus_per_node) / float(params.gpus_per_node)


def throughput_table(params: EnvParams, gpus: int) -> np.ndarray:
    """Noise-free samples/s of every (workload, GPU type), shape (W, T), on ``gpus`` GPUs with the node's
    vCPUs per GPU, from the environment's own model (:func:`~slamorl_jax.env.job_model.epoch_metrics`)."""
    cpus = gpus * cluster_cpus_per_gpu(params)
    metrics = epoch_metrics(job_constants_table(params), jnp.float32(gpus), jnp.float32(cpus), params)
    return np.asarray(metrics.throughput, dtype=np.float64)


def throughput_ratios(
    shipped: EnvParams, alternative: EnvParams, gpus: int, cells: Sequence[tuple[int, int]]
) -> list[float]:
    """Shipped / alternative samples/s on ``gpus`` GPUs of each (workload, GPU type) index in ``cells``."""
    a, b = throughput_table(shipped, gpus), throughput_table(alternative, gpus)
    return [float(a[cell] / b[cell]) for cell in cells]


def median_speeds_over_t4(catalog: Catalog, data_dir: Path = DEFAULT_DATA_DIR) -> dict[str, float]:
    """The speeds over T4 that a Pollux workload with no model in Gavel's data gets
    (:func:`~slamorl_jax.calibration.gpu_speed.median_pollux_speeds`), with the T4/V100 geometric mean
    of the shared models at the Gavel workloads' batches, as the calibration takes it."""
    batches = {
        WORKLOADS_BY_NAME[name].key: int(catalog.local_batch[i])
        for i, name in enumerate(catalog.workload_names)
        if WORKLOADS_BY_NAME[name].source == "gavel"
    }
    return gpu_speed.median_pollux_speeds(gpu_speed.t4_over_v100(batches, data_dir).ratio, data_dir)


def gpu_speed_rows(
    params: EnvParams, catalog: Catalog, data_dir: Path = DEFAULT_DATA_DIR
) -> list[Sensitivity]:
    """Item 1: K80, P100 and V100 speed of the Pollux workloads Gavel also measured: the same model's
    ratio (shipped) against what the other Pollux workloads get (the median over Gavel's job types
    over the T4/V100 mean, and V100 = 1 / that mean)."""
    num_types = int(gpu_speed.median_gavel_ratios(data_dir)["num_job_types"])
    median = median_speeds_over_t4(catalog, data_dir)
    speed = np.array(catalog.compute_speed, dtype=np.float64)
    cases = []
    for app, job in gpu_speed.SHARED_MODELS:
        name = next(s.name for s in WORKLOADS if s.source == "pollux" and s.key == app)
        w = workload_index(name, catalog)
        batch = gpu_speed.same_model_batch(app, float(catalog.local_batch[w]), data_dir)
        for gpu in ("K80", "P100", "V100"):
            t = gpu_type_index(gpu, catalog)
            speed[w, t] = median[gpu]
            cases.append((name, job, batch, gpu, (w, t)))
    alternative = params.replace(workloads=with_values(params.workloads, compute_speed=speed))
    node = int(params.gpus_per_node)
    per_gpus = {g: throughput_ratios(params, alternative, g, [c[-1] for c in cases]) for g in (1, node)}
    return [
        Sensitivity(
            item=1,
            subject=f"{name} on {gpu}",
            assumption=f"speed vs T4 = Gavel {job} bs {batch} on {gpu} / Pollux T4 at bs {batch}",
            shipped=float(catalog.compute_speed[cell]),
            alternative=float(speed[cell]),
            value_format="{:.3f}",
            source=(
                f"median Gavel {gpu}/V100 over {num_types} job types / T4/V100, as the other Pollux apps"
                if gpu != "V100"
                else "1 / T4/V100 (the two ResNets' mean), as the other Pollux apps"
            ),
            effects=tuple((_gpus_label(params, g), per_gpus[g][i]) for g in per_gpus),
        )
        for i, (name, job, batch, gpu, cell) in enumerate(cases)
    ]


def _gpus_label(params: EnvParams, gpus: int) -> str:
    """``"8 GPUs on 2 nodes"``: an allocation of ``gpus`` GPUs packed on the cluster's nodes."""
    if gpus == 1:
        return "1 GPU"
    nodes = -(-gpus // int(params.gpus_per_node))
    return f"{gpus} GPUs on {nodes} node{'s' if nodes > 1 else ''}"


def gavel_indices(catalog: Catalog, data_parallel: bool | None = None) -> list[int]:
    """Indices of the Gavel (V100-calibrated) workloads, only the data-parallel ones if asked."""
    return [
        i
        for i, name in enumerate(catalog.workload_names)
        if WORKLOADS_BY_NAME[name].source == "gavel"
        and data_parallel in (None, bool(catalog.data_parallel[i]))
    ]


def with_gavel_value(params: EnvParams, catalog: Catalog, field: str, value: float) -> EnvParams:
    """``params`` with the workload field ``field`` set to ``value`` for the Gavel workloads."""
    column = np.array(getattr(params.workloads, field), dtype=np.float32)
    column[gavel_indices(catalog)] = value
    return params.replace(workloads=with_values(params.workloads, **{field: column}))


def network_rows(params: EnvParams, catalog: Catalog, gpu: str = "T4") -> list[Sensitivity]:
    """Item 2: Gavel's calibration network, 25 Gb/s against the cluster's (sync used as measured)."""
    cluster = float(params.inter_node_gbps)
    alternative = with_gavel_value(params, catalog, "calibration_inter_node_gbps", cluster)
    t = gpu_type_index(gpu, catalog)
    workloads = gavel_indices(catalog, data_parallel=True)
    sizes = (2 * int(params.gpus_per_node), int(max_gpus(params)))
    ratios = {g: throughput_ratios(params, alternative, g, [(w, t) for w in workloads]) for g in sizes}
    return [
        Sensitivity(
            item=2,
            subject=catalog.workload_names[w],
            assumption="Gavel's inter-node network (an assumed p3.16xlarge)",
            shipped=float(catalog.calibration_inter_node_gbps[w]),
            alternative=cluster,
            value_format="{:g} Gb/s",
            source="the cluster's, i.e. Gavel's sync terms unscaled (as fast across servers as in one)",
            effects=tuple((f"{gpu} x {_gpus_label(params, g)}", ratios[g][i]) for g in sizes),
        )
        for i, w in enumerate(workloads)
    ]


def cpu_rows(params: EnvParams, catalog: Catalog) -> list[Sensitivity]:
    """Item 3: Gavel's calibration vCPUs per GPU, 8 against the cluster's (no CPU correction there).

    Only workloads with a CPU-sensitive profile change; the ratio is the same at every allocation."""
    cluster = cluster_cpus_per_gpu(params)
    alternative = with_gavel_value(params, catalog, "calibration_cpus_per_gpu", cluster)
    workloads = [w for w in gavel_indices(catalog) if catalog.cpu_c_sat[w] > 0.0]
    # The CPU factor scales samples/s alone: any GPU type and count gives the same ratio (first type, 1 GPU).
    ratios = throughput_ratios(params, alternative, 1, [(w, 0) for w in workloads])
    names = [catalog.workload_names[w] for w in workloads]
    return [
        Sensitivity(
            item=3,
            subject=f"{name} ({WORKLOADS_BY_NAME[name].cpu_profile} profile)",
            assumption="Gavel's vCPUs per GPU (an assumed p3)",
            shipped=float(catalog.calibration_cpus_per_gpu[w]),
            alternative=cluster,
            value_format="{:g}",
            source="the cluster's (no source names Gavel's servers)",
            effects=(("samples/s at any allocation", ratio),),
        )
        for w, name, ratio in zip(workloads, names, ratios, strict=True)
    ]


def cluster_node_instance(
    params: EnvParams, catalog: Catalog, rows: Sequence[InstancePrice]
) -> InstancePrice:
    """The AWS row with the shape of one of the cluster's nodes (GPUs, vCPUs) and one of the catalogue's
    GPU types: g4dn.12xlarge on the default cluster."""
    shape = (int(params.gpus_per_node), float(params.cpus_per_node))
    found = [
        r for r in rows if (r.accelerator_count, r.vcpus) == shape and r.accelerator in catalog.gpu_types
    ]
    if len(found) != 1:
        raise ValueError(f"{len(found)} AWS rows with {shape[0]} GPUs and {shape[1]:g} vCPUs, not one")
    return found[0]


def memory_rows(params: EnvParams, catalog: Catalog, data_dir: Path = DEFAULT_DATA_DIR) -> list[Sensitivity]:
    """Item 4: host memory per GPU billed on top of the implied $/GPU-h, against billing none.

    One row per GPU type (the price of one GPU alone) and one for a whole node of the cluster's shape,
    beside the AWS price of that instance."""
    alternative = with_values(params, host_memory_gib_per_gpu=0.0)
    gib = float(params.host_memory_gib_per_gpu)
    rows = []
    for t, gpu in enumerate(catalog.gpu_types):
        price = params.gpu_price_per_hour[t]
        billed = [float(allocation_price_per_hour(price, 1.0, 0.0, p)) for p in (params, alternative)]
        rows.append(
            Sensitivity(
                item=4,
                subject=gpu,
                assumption=f"{gib:g} GiB host memory per GPU billed on top of the implied $/GPU-h",
                shipped=billed[0],
                alternative=billed[1],
                value_format="${:.3f}/GPU-h",
                source="the implied $/GPU-h alone (it netted out all the instance's memory)",
                effects=(("$/h of 1 GPU", billed[0] / billed[1]),),
            )
        )
    node = cluster_node_instance(params, catalog, load_aws_prices(data_dir))
    price = params.gpu_price_per_hour[gpu_type_index(node.accelerator, catalog)]
    gpus, cpus = float(node.accelerator_count), node.vcpus
    billed = [float(allocation_price_per_hour(price, gpus, cpus, p)) for p in (params, alternative)]
    rows.append(
        Sensitivity(
            item=4,
            subject=f"{node.instance_type} ({gpus:g} {node.accelerator}, {cpus:g} vCPU)",
            assumption="the same, a whole node",
            shipped=billed[0],
            alternative=billed[1],
            value_format="${:.3f}/h",
            source=f"billing no host memory per GPU; AWS on-demand ${node.price_per_hour:.3f}/h",
            effects=(("$/h of the node", billed[0] / billed[1]),),
        )
    )
    return rows


def spot_ratios(catalog: Catalog, data_dir: Path = DEFAULT_DATA_DIR) -> SpotRatios:
    """``SpotPrice / Price`` of every AWS row of one of the catalogue's GPU types that has a spot price,
    with the ``price_rise`` event's default size range (``env/shifts.py``)."""
    ratios = {
        r.instance_type: r.spot_price_per_hour / r.price_per_hour
        for r in load_aws_prices(data_dir)
        if r.accelerator in catalog.gpu_types and r.spot_price_per_hour is not None
    }
    return SpotRatios(ratios, DEFAULT_SHIFT_SIZE_LOW[PRICE_RISE], DEFAULT_SHIFT_SIZE_HIGH[PRICE_RISE])


def sensitivities(data_dir: Path = DEFAULT_DATA_DIR) -> list[Sensitivity]:
    """Every row of the table (items 1-4) on the default params and the shipped catalogue."""
    catalog, params = load_catalog(), default_params()
    return [
        *gpu_speed_rows(params, catalog, data_dir),
        *network_rows(params, catalog),
        *cpu_rows(params, catalog),
        *memory_rows(params, catalog, data_dir),
    ]


def table_cells(row: Sensitivity) -> list[str]:
    """The printed cells of one row: item, assumption, shipped, alternative, effect."""
    alternative = f"{row.value_format.format(row.alternative)}: {row.source}"
    effects = "; ".join(f"{what} x{ratio:.3f}" for what, ratio in row.effects)
    return [
        str(row.item),
        f"{row.subject}: {row.assumption}",
        row.value_format.format(row.shipped),
        alternative,
        effects,
    ]


HEADER = ["#", "assumption", "shipped", "alternative (from the data)", "effect: shipped / alternative"]


def format_markdown(rows: Sequence[Sensitivity]) -> str:
    """The table as Markdown (as pasted into docs/calibration.md)."""
    return markdown_table(HEADER, [table_cells(r) for r in rows], align=("---:", "---", "---:", "---", "---"))


def format_text(rows: Sequence[Sensitivity]) -> str:
    """The table as plain text, one block per row."""
    blocks = []
    for row in rows:
        item, assumption, shipped, alternative, effects = table_cells(row)
        blocks.append(f"{item}. {assumption}\n   shipped {shipped}; alternative {alternative}\n   {effects}")
    return "\n".join(blocks)


def format_spot(spot: SpotRatios) -> str:
    """One line: the file's spot / on-demand range and the rise that would take a spot price to on-demand."""
    r = np.array(list(spot.ratios.values()))
    return (
        f"{AWS_PRICE_FILE.as_posix()} SpotPrice / Price over its {r.size} rows of the simulator's GPU types: "
        f"{r.min():.2f}-{r.max():.2f} (median {np.median(r):.2f}), so a spot price reaches the on-demand "
        f"price after a rise of x{1 / r.max():.2f}-{1 / r.min():.2f}; the price_rise event multiplies "
        f"the billed on-demand $/GPU-h by {spot.rise_low:g}-{spot.rise_high:g}."
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line, print the table and the spot line; bad input is one line, exit 2."""
    parser = OneLineArgumentParser(prog=PROG, description=summary(__doc__))
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    args = parser.parse_args(argv)
    rows = sensitivities()
    print(format_markdown(rows) if args.markdown else format_text(rows))
    print()
    print(format_spot(spot_ratios(load_catalog())))
    return 0


if __name__ == "__main__":
    run_command(main, PROG)

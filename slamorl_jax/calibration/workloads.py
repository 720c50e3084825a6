"""The 13 workloads: names, datasets, epoch counts, CPU-profile mapping and calibration hardware.

Everything here is a documented choice or a fact with its source (``docs/calibration.md`` has the
full justification); the fitted numbers come from the other modules. List order = workload index.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: Hard cap on epochs of any workload.
MAX_EPOCHS = 120


@dataclass(frozen=True)
class Hardware:
    """Cluster the measurements were taken on (bandwidths in Gb/s)."""

    gpu: str
    intra_node_gbps: float
    inter_node_gbps: float
    cpus_per_gpu: float
    gpus_per_node: int


#: Pollux: AWS g4dn.12xlarge = 4 T4 on PCIe 3.0 x16 (16 GB/s = 128 Gb/s), 50 Gb/s network,
#: 48 vCPU / 4 GPU = 12 vCPU per GPU (pollux-osdi21/README.md, AWS instance specs). The simulated
#: cluster's nodes are these (``env.defaults.default_params`` reads them from here).
POLLUX_HARDWARE = Hardware(
    gpu="T4", intra_node_gbps=128.0, inter_node_gbps=50.0, cpus_per_gpu=12.0, gpus_per_node=4
)
#: Gavel: servers not stated in the repository text we could read; assumed AWS p3.16xlarge = 8 V100
#: SXM2 (NVLink 2), 25 Gb/s network, 64 vCPU / 8 GPU = 8 vCPU per GPU. The intra-node figure is an
#: *effective* PCIe-class 128 Gb/s, not NVLink's nominal 1200 Gb/s: Gavel's fitted sync overheads are
#: the same whether the GPUs share a server or not (ResNet-50: 0.306 s vs 0.305 s), so they are not
#: NVLink-bandwidth bound, and scaling them by 1200/128 on a PCIe cluster would make 4 GPUs slower
#: than 1 (docs/calibration.md, "Gavel hardware").
GAVEL_HARDWARE = Hardware(
    gpu="V100", intra_node_gbps=128.0, inter_node_gbps=25.0, cpus_per_gpu=8.0, gpus_per_node=8
)


@dataclass(frozen=True)
class WorkloadSpec:
    """Static description of one workload."""

    name: str
    source: str  # "pollux" or "gavel"
    key: str  # Pollux app name or Gavel job type (without batch)
    model: str
    dataset: str
    samples_per_epoch: int
    #: Epochs of the reference run: Pollux = rows of its validation traces (filled in from data,
    #: ``None`` here); Gavel = documented typical value.
    reference_epochs: int | None
    cpu_profile: str  # Synergy model name ("bert" is flat); docs/calibration.md says why each
    data_parallel: bool = True
    #: Gavel: fixed batch for job types without multi-GPU data (None = chosen from the data);
    #: A3C and CycleGAN have no batch in their Gavel name.
    gavel_batch: int | None = None
    #: Samples per Gavel iteration when the job name has no batch (A3C: rollout steps, CycleGAN: 1).
    unbatched_local_batch: int | None = None


WORKLOADS: tuple[WorkloadSpec, ...] = (
    WorkloadSpec("cifar10-resnet18", "pollux", "cifar10", "ResNet-18", "CIFAR-10", 50_000, None, "res18"),
    WorkloadSpec(
        "imagenet-resnet50",
        "pollux",
        "imagenet",
        "ResNet-50",
        "ImageNet-1k (ILSVRC2012)",
        1_281_167,
        None,
        "res50",
    ),
    WorkloadSpec("squad-bert", "pollux", "bert", "BERT-base fine-tuning", "SQuAD v1.1", 87_599, None, "bert"),
    WorkloadSpec(
        "arctic-deepspeech2",
        "pollux",
        "deepspeech2",
        "DeepSpeech2",
        "CMU-ARCTIC",
        7_140,
        None,
        "deepspeech",
    ),
    WorkloadSpec(
        "voc-yolov3",
        "pollux",
        "yolov3",
        "YOLOv3",
        "PASCAL VOC 2007+2012 trainval",
        16_551,
        None,
        "res50",
    ),
    WorkloadSpec("movielens-ncf", "pollux", "ncf", "NeuMF (NCF)", "MovieLens-1M", 4_970_845, None, "bert"),
    WorkloadSpec(
        "imagenet-resnet50-gavel",
        "gavel",
        "ResNet-50",
        "ResNet-50",
        "ImageNet-1k (ILSVRC2012)",
        1_281_167,
        90,
        "res50",
    ),
    WorkloadSpec(
        "cifar10-resnet18-gavel",
        "gavel",
        "ResNet-18",
        "ResNet-18",
        "CIFAR-10",
        50_000,
        100,
        "res18",
    ),
    WorkloadSpec(
        "multi30k-transformer",
        "gavel",
        "Transformer",
        "Transformer",
        "Multi30k (en-de)",
        29_000,
        20,
        "transformer",
    ),
    WorkloadSpec("wikitext2-lstm", "gavel", "LM", "LSTM language model", "WikiText-2", 59_675, 40, "lstm"),
    WorkloadSpec(
        "monet2photo-cyclegan",
        "gavel",
        "CycleGAN",
        "CycleGAN",
        "monet2photo",
        6_287,
        200,
        "res50",
        data_parallel=False,
        unbatched_local_batch=1,
    ),
    WorkloadSpec(
        "pong-a3c",
        "gavel",
        "A3C",
        "A3C (LSTM policy)",
        "Atari Pong (PongDeterministic-v4)",
        1_000_000,
        10,
        "bert",
        data_parallel=False,
        unbatched_local_batch=20,
    ),
    WorkloadSpec(
        "ml20m-autoencoder",
        "gavel",
        "Recommendation",
        "Autoencoder recommender (VAE-CF)",
        "MovieLens-20M",
        116_677,
        200,
        "bert",
        data_parallel=False,
        gavel_batch=512,
    ),
)


#: Each workload's spec by its name.
WORKLOADS_BY_NAME: dict[str, WorkloadSpec] = {s.name: s for s in WORKLOADS}


def epoch_range(reference_epochs: int) -> tuple[int, int]:
    """``[round(0.5 n), round(1.2 n)]`` (half up), each in ``[2, MAX_EPOCHS]``."""
    lo = max(2, math.floor(0.5 * reference_epochs + 0.5))
    hi = max(2, math.floor(1.2 * reference_epochs + 0.5))
    return min(lo, MAX_EPOCHS), min(hi, MAX_EPOCHS)

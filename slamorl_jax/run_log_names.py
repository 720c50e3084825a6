"""The names of the files a training run writes in its log folder, and which of them a folder holds.

Light on purpose (no tensorboardX, no JAX): the command line reads them before the heavy imports,
to refuse a folder or to keep one whose metrics show why a run stopped.
"""

from __future__ import annotations

from pathlib import Path

METRICS_FILE = "metrics.jsonl"  # one JSON line per logged update, in the run's log_dir
CONFIG_FILE = "config.json"  # the run's TrainConfig
SUMMARY_FILE = "summary.json"  # the finished run's figures and evaluation
EVENTS_PREFIX = "events.out.tfevents"  # TensorBoard event files (tensorboardX's names)


def run_log_files(log_dir: str | Path) -> list[str]:
    """The names of a training run's log files already in ``log_dir`` (config, metrics, summary,
    TensorBoard events), sorted; empty where the folder is new, empty or unreadable."""
    try:
        names = [entry.name for entry in Path(log_dir).iterdir()]
    except OSError:
        return []
    ours = {CONFIG_FILE, METRICS_FILE, SUMMARY_FILE}
    return sorted(name for name in names if name in ours or name.startswith(EVENTS_PREFIX))


def metrics_size(log_dir: str | Path) -> int:
    """The bytes of ``metrics.jsonl`` in ``log_dir`` (0 where there is none): a run compares them
    before and after to know whether it logged an update there (the logger creates the file empty)."""
    try:
        return (Path(log_dir) / METRICS_FILE).stat().st_size
    except OSError:
        return 0


def has_metrics(log_dir: str | Path) -> bool:
    """Whether ``log_dir`` holds a non-empty ``metrics.jsonl`` (a run logged an update there)."""
    return metrics_size(log_dir) > 0

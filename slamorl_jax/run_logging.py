"""Run logging: a tqdm progress bar, metrics as JSON lines, and TensorBoard event files.

tqdm and tensorboardX are well-kept libraries that do this better than code of our own;
tensorboardX writes TensorBoard events without TensorFlow or PyTorch.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

from tensorboardX import SummaryWriter
from tqdm import tqdm

from slamorl_jax.agent.config import TrainConfig
from slamorl_jax.agent.schedule import learning_rate_after
from slamorl_jax.atomic_files import write_text_atomically
from slamorl_jax.run_log_names import CONFIG_FILE, METRICS_FILE


def drop_records_after(path: Path, update: int) -> None:
    """Rewrite the JSON lines file ``path`` without its records past ``update`` (and a line cut short
    by a killed run, or one that is not UTF-8 JSON: damaged bytes); untouched when there are none.
    The new file replaces the old in one rename."""
    if not path.exists():
        return
    with path.open("rb") as file:
        lines = file.readlines()  # split at b"\n" only

    def kept(line: bytes) -> bool:
        try:  # a UnicodeDecodeError is a ValueError
            return line.endswith(b"\n") and int(json.loads(line.decode("utf-8"))["update"]) <= update
        except (ValueError, KeyError, TypeError):
            return False

    keep = [line for line in lines if kept(line)]
    if len(keep) < len(lines):
        partial = path.with_name(path.name + ".tmp")
        partial.write_bytes(b"".join(keep))
        os.replace(partial, path)


class MetricsLogger:
    """Writes ``metrics.jsonl`` and TensorBoard events in ``log_dir`` and drives the progress bar."""

    def __init__(
        self,
        log_dir: str | Path,
        config: TrainConfig,
        total_steps: int,
        initial_steps: int = 0,
        progress: bool = True,
    ) -> None:
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.config = config
        write_text_atomically(self.log_dir / CONFIG_FILE, config.to_json())  # whole or not at all
        # A run resumed from a step older than its last logged update (its newest step was damaged, or
        # it was killed after logging and before saving) logs those updates again: the earlier lines
        # and TensorBoard points past the step go first, so each update is logged once.
        drop_records_after(self.log_dir / METRICS_FILE, initial_steps // config.batch_size)
        self._jsonl = (self.log_dir / METRICS_FILE).open("a")
        purge = initial_steps + 1 if initial_steps else None  # TensorBoard drops points from this step on
        self._writer = SummaryWriter(str(self.log_dir), purge_step=purge)
        self._bar = tqdm(
            total=total_steps,
            initial=initial_steps,
            unit="step",
            unit_scale=True,
            dynamic_ncols=True,
            disable=not progress,
        )
        self._steps = initial_steps

    def log(self, update: int, metrics: dict[str, float], steps_per_s: float) -> None:
        """Record one chunk's metrics at ``update`` (``steps_per_s``: training speed, compile excluded)."""
        env_steps = update * self.config.batch_size
        rate = steps_per_s
        # Figures with no finished episode in the chunk are NaN: null in JSON, absent in TensorBoard.
        finite = {k: (v if math.isfinite(v) else None) for k, v in metrics.items()}
        record = {
            "update": update,
            "env_steps": env_steps,
            "steps_per_s": rate,
            "time": time.time(),
            "learning_rate": learning_rate_after(self.config, update),
            **finite,
        }
        self._jsonl.write(json.dumps(record) + "\n")
        self._jsonl.flush()
        for name, value in finite.items():
            if value is not None:
                self._writer.add_scalar(name, value, env_steps)
        self._writer.add_scalar("steps_per_s", rate, env_steps)
        self._writer.add_scalar("learning_rate", record["learning_rate"], env_steps)
        # On disk with the metrics line: a run killed after its next checkpoint resumes past these
        # updates, so points still in tensorboardX's queue (flushed every 2 minutes) would be lost.
        self._writer.flush()
        self._bar.update(env_steps - self._steps)
        self._steps = env_steps
        self._bar.set_postfix(
            {
                "sps": f"{rate:,.0f}",
                "return": f"{metrics['return']:.3f}",
                "SLAs met": f"{metrics['all_slas_met']:.1%}",
                "time/req": f"{metrics['time_vs_request']:.2f}",
                "cost/req": f"{metrics['cost_vs_request']:.2f}",
            },
            refresh=False,
        )

    def message(self, text: str) -> None:
        """Print a status line on stderr, as every other one, without breaking the progress bar."""
        self._bar.write(text, file=sys.stderr)

    def close(self) -> None:
        """Flush and close files and the bar."""
        self._bar.close()
        self._jsonl.close()
        self._writer.close()

    def __enter__(self) -> MetricsLogger:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

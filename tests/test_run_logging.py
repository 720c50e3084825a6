"""Run logs: a resumed run logs each update once."""

from __future__ import annotations

import json
from pathlib import Path

from learner_fixtures import TINY

from slamorl_jax.run_logging import METRICS_FILE, MetricsLogger, drop_records_after


def _write(path: Path, updates: list[int], tail: str = "") -> None:
    path.write_text("".join(json.dumps({"update": u, "loss": 0.5}) + "\n" for u in updates) + tail)


def _updates(path: Path) -> list[int]:
    return [json.loads(line)["update"] for line in path.read_text().splitlines()]


def test_records_past_the_restored_update_are_dropped(tmp_path: Path) -> None:
    """A run resumed from update 4 after logging 6 and 8 (and half a line when it was killed)
    logged 6 and 8 a second time; now the earlier records past 4 go before it logs again."""
    metrics = tmp_path / METRICS_FILE
    _write(metrics, [2, 4, 6, 8], tail='{"update": 10, "lo')
    drop_records_after(metrics, 4)
    assert _updates(metrics) == [2, 4]
    before = metrics.read_text()
    drop_records_after(metrics, 4)  # nothing past it: untouched
    assert metrics.read_text() == before
    drop_records_after(tmp_path / "missing.jsonl", 4)  # no log yet: nothing to do


def test_damaged_bytes_in_the_metrics_are_dropped_not_a_crash(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 (a disk's damage) ended ``--resume`` with an unexpected
    UnicodeDecodeError after it said where it resumed from."""
    metrics = tmp_path / METRICS_FILE
    _write(metrics, [2, 4])
    with metrics.open("ab") as file:
        file.write(b'{"update": 3, "x": "\xff\xfe"}\n\xff\xfe\n')
    drop_records_after(metrics, 4)
    assert _updates(metrics) == [2, 4]


def test_a_resumed_logger_continues_after_the_restored_update(tmp_path: Path) -> None:
    _write(tmp_path / METRICS_FILE, [2, 4, 6])
    batch = TINY.batch_size
    with MetricsLogger(
        tmp_path, TINY, total_steps=10 * batch, initial_steps=4 * batch, progress=False
    ) as logger:
        logger.log(
            6, {"return": 0.0, "all_slas_met": 0.0, "time_vs_request": 1.0, "cost_vs_request": 1.0}, 1.0
        )
    assert _updates(tmp_path / METRICS_FILE) == [2, 4, 6]
    last = json.loads((tmp_path / METRICS_FILE).read_text().splitlines()[-1])
    assert last["return"] == 0.0 and "learning_rate" in last  # the new record, not the stale one


def test_each_logged_update_reaches_the_tensorboard_file_at_once(tmp_path: Path) -> None:
    """A run killed (SIGKILL) after a checkpoint lost the TensorBoard points of its last updates for
    good: tensorboardX flushes its queue every 2 minutes, and the resumed run starts past them."""
    metrics = {"return": 0.0, "all_slas_met": 0.0, "time_vs_request": 1.0, "cost_vs_request": 1.0}
    with MetricsLogger(tmp_path, TINY, total_steps=10 * TINY.batch_size, progress=False) as logger:
        (events,) = tmp_path.glob("events.out.tfevents.*")
        before = events.stat().st_size
        logger.log(2, {**metrics, "loss": 0.25}, 1.0)
        assert events.stat().st_size > before  # before the logger closes

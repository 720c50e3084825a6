"""Benchmarks that load a trained policy refuse a checkpoint that cannot be loaded the way the
package's commands do: one line, exit 2, nothing written (``benchmarks.common.parse_and_report``)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from cli_harness import assert_refused, call

POLICY_BENCHMARKS = (
    "suggested_slas",
    "batched_evaluation",
    "reallocation_patterns",
    "exploration_overhead",
    "shifting_anchors",
    "contention_rule",
)


@pytest.mark.parametrize("name", POLICY_BENCHMARKS)
def test_a_missing_checkpoint_is_refused_in_one_line(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    main = importlib.import_module(f"benchmarks.{name}").main
    monkeypatch.chdir(tmp_path)
    outcome = call(lambda: main(["--checkpoint=missing", "--out=report.json"]), capsys, tmp_path)
    assert_refused(outcome, f"benchmarks.{name}", "missing", "does not exist")

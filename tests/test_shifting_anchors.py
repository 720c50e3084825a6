"""``benchmarks/shifting_anchors.py`` with several policies: their figures' mean and spread, and a
bad list refused in one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks.shifting_anchors import main

SHIPPED = str(Path(__file__).resolve().parent.parent / "checkpoints" / "default")


@pytest.mark.slow
def test_two_copies_of_one_policy_give_its_figures_with_no_spread(tmp_path: Path) -> None:
    """The shipped policy and a copy of it run on the same jobs: every event's mean is each copy's
    figure, the spread is 0, and the report shows both (one folder named twice is refused)."""
    out = tmp_path / "anchors.json"
    copy = tmp_path / "copy"
    shutil.copytree(SHIPPED, copy)
    main(["--checkpoint", f"{SHIPPED},{copy}", "--episodes", "8", "--out", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert set(rows) >= {"contention", "slow_node", "shifting"}
    for row in rows.values():
        first, second = row["policy_each"]
        assert first == second == row["policy"]
        assert all(spread == 0.0 for spread in row["policy_std"].values())
        assert set(row) == {
            "policy",
            "policy_std",
            "policy_each",
            "static_request",
            "best_static_oracle",
            "replanning_oracle",
        }
        assert set(row["policy"]) == {"objective", "all_slas_met", "reallocations", "left_nodes"}
        assert 0.0 <= row["replanning_oracle"]["left_nodes"] <= 1.0
    markdown = out.with_suffix(".md").read_text()
    assert "± 0.0%" in markdown and "left the slowed nodes" in markdown


@pytest.mark.parametrize(
    "checkpoints, message",
    [(",", "--checkpoint names no policy"), (f"{SHIPPED},{{tmp}}/missing", "missing' does not exist")],
)
def test_a_bad_checkpoint_list_is_one_line_and_exit_2(
    checkpoints: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No policy named, or one that does not exist: one line naming it, exit code 2, nothing written.
    (A missing path under the test's own folder: a fixed one such as /nonexistent may exist.)"""
    checkpoints = checkpoints.replace("{tmp}", str(tmp_path))
    out = tmp_path / "anchors.json"
    with pytest.raises(SystemExit) as exit_info:
        main(["--checkpoint", checkpoints, "--episodes", "4", "--out", str(out)])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip()
    assert message in error and "\n" not in error
    assert not out.exists()

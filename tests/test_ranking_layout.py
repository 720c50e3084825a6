"""``forecast.suggestion`` ranks over its leading axis: one job, or a batch laid out candidate-major
(``benchmarks/ranking_layout.py``) gives the flags ``vmap`` gives job by job."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.ranking_layout import main


@pytest.mark.slow  # a benchmark's logic (5 s): in the slow run (pytest -m slow)
def test_candidate_major_ranking_flags_match_vmap_and_the_report_says_so(tmp_path: Path) -> None:
    """On 24 jobs stepped under random actions both layouts flag the same candidates, and the
    benchmark's report names both layouts with a positive time each."""
    out = tmp_path / "ranking.json"
    main(["--num-envs", "24", "--repeats", "1", "--out", str(out)])
    payload = json.loads(out.read_text())
    assert payload["same_flags"] is True
    assert payload["num_targets"] > 1
    assert len(payload["layouts"]) == 2
    for timing in payload["layouts"].values():
        assert all(t > 0 for t in timing["run_s"])
    assert "same flags in both layouts: True" in out.with_suffix(".md").read_text()

"""``benchmarks/held_out_workloads.py``: the catalogue without some workloads, and its refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_harness import assert_refused, call
from learner_fixtures import train_tiny

from benchmarks import held_out_workloads
from slamorl_jax.env.catalog import load_catalog, parse_catalog

HELD_OUT = ("voc-yolov3", "pong-a3c")


def test_the_written_catalogue_lacks_exactly_the_held_out_workloads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "catalog.json"
    held_out_workloads.main([f"--without={','.join(HELD_OUT)}", f"--write-catalog={path}"])
    written = parse_catalog(json.loads(path.read_text()))
    shipped = load_catalog()
    assert written.workload_names == tuple(n for n in shipped.workload_names if n not in HELD_OUT)
    keep = [shipped.workload_names.index(n) for n in written.workload_names]
    assert (written.compute_alpha_s == shipped.compute_alpha_s[keep]).all()  # each row as it was
    assert written.gpu_types == shipped.gpu_types
    # Written once; a second write needs --overwrite.
    again = call(
        lambda: held_out_workloads.main([f"--without={HELD_OUT[0]}", f"--write-catalog={path}"]),
        capsys,
        tmp_path,
    )
    assert_refused(again, "exists; pass --overwrite")


@pytest.mark.parametrize(
    ("argv", "phrase"),
    [
        (["--without=gpt-5", "--write-catalog=c.json"], "unknown workload 'gpt-5'"),
        (
            [f"--without={','.join(load_catalog().workload_names)}", "--write-catalog=c.json"],
            "leaves no workload",
        ),
        (["--without=voc-yolov3"], "give --write-catalog"),
        (["--without=voc-yolov3", "--runs=nowhere"], "no checkpoints under nowhere"),
        (["--without=voc-yolov3", "--write-catalog=c.json", "--runs=r"], "in a second call"),
        (["--without=voc-yolov3", "--runs=r", "--scenarios=mixed"], "--scenarios: unknown mixed"),
        (["--without=,", "--runs=r"], "--without names no workload"),
        (["--without=gpt-5", "--runs=r"], "unknown workload 'gpt-5'"),
    ],
)
def test_bad_command_lines_are_refused_in_one_line(
    argv: list[str],
    phrase: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "r" / "checkpoints").mkdir(parents=True)
    before = {p.name for p in tmp_path.iterdir()}
    outcome = call(
        lambda: held_out_workloads.main([*argv, f"--out={tmp_path / 'o.json'}"]), capsys, tmp_path / "r"
    )
    assert outcome.code == 2 and phrase in outcome.stderr, outcome.report()
    assert {p.name for p in tmp_path.iterdir()} == before  # nothing written


@pytest.mark.slow
def test_runs_trained_without_the_workloads_are_judged_on_both_groups_of_jobs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog = tmp_path / "catalog.json"
    held_out_workloads.main([f"--without={','.join(HELD_OUT)}", f"--write-catalog={catalog}"])
    train_tiny([f"--catalog={catalog}", f"--run_dir={tmp_path / 'without'}"])
    train_tiny([f"--run_dir={tmp_path / 'with'}"])
    out = tmp_path / "report.json"
    argv = [
        f"--without={','.join(HELD_OUT)}",
        "--episodes=64",
        "--scenarios=deadline-critical",
        f"--out={out}",
    ]
    held_out_workloads.main(
        [*argv, f"--runs={tmp_path / 'without'}", f"--with={tmp_path / 'with' / 'checkpoints'}"]
    )
    payload = json.loads(out.read_text())
    assert sum(payload["jobs"]["deadline-critical"].values()) == 64  # every job in one group
    for values in payload["per_seed"]["deadline-critical"].values():
        assert len(values["gap"]) == 1  # one run each
        assert values["gap"][0] == values["held_out_over_oracle"][0] - values["seen_over_oracle"][0]
        assert values["sla_gap"][0] == values["held_out_all_slas_met"][0] - values["seen_all_slas_met"][0]
    gaps = payload["per_seed"]["deadline-critical"]
    expected = gaps["held_out_runs"]["gap"][0] - gaps["with_every_workload"]["gap"][0]
    assert payload["gap_difference"]["deadline-critical"]["gap"]["difference"] == pytest.approx(expected)
    # A run that trained on them, or a --with policy of another command, is refused.
    leaked = call(
        lambda: held_out_workloads.main([*argv, f"--runs={tmp_path / 'with'}", "--overwrite"]),
        capsys,
        tmp_path,
    )
    assert leaked.code == 2 and "without exactly --without" in leaked.stderr, leaked.report()
    other = call(
        lambda: held_out_workloads.main([*argv, f"--runs={tmp_path / 'without'}", "--overwrite"]),
        capsys,
        tmp_path,
    )
    assert other.code == 2 and "another command than --runs" in other.stderr, other.report()

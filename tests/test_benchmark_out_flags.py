"""Every benchmark that writes a report takes ``--out`` and ``--overwrite`` alike
(``benchmarks.common.add_out_flags``): a report already there, committed results included, is refused in
one line before anything is measured; the default report and ``--checkpoint`` are this checkout's
whatever the working directory; ``--help`` shows the default and says what the benchmark does in a
whole sentence. All in process, with the measuring replaced by a stub: seconds."""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path
from typing import Any

import pytest
from cli_harness import assert_refused, call

RESULTS = Path(__file__).resolve().parent.parent / "benchmarks" / "results"
#: Every benchmark that writes a report, with its default report's name (None: --out is required).
REPORTS = {
    "batched_evaluation": "batched_evaluation.json",
    "compile_flags": "compile_flags.json",
    "contention_rule": "contention_rule.json",
    "env_throughput": "env_throughput.json",
    "epoch_times": "epoch_times.json",
    "exploration_overhead": "exploration_overhead.json",
    "held_out_workloads": "held_out_workloads.json",
    "network_choice": "network_choice.json",
    "oracle_bounds": "oracle_bounds.json",
    "ranking_layout": "ranking_layout.json",
    "reallocation_patterns": "reallocation_patterns.json",
    "recommend_throughput": "recommend_throughput.json",
    "scaling": "scaling_cpu.json",
    "sharded_step": "sharded_step.json",
    "sharded_training_profile": "sharded_training_profile.json",
    "shifting_anchors": "shifting_anchors.json",
    "step_breakdown": "step_breakdown.json",
    "step_profile": "step_profile.json",
    "suggested_slas": "suggested_slas.json",
    "target_grid": "target_grid.json",
    "train_throughput": "train_throughput.json",
    "training_seeds": None,
    "weights_ablation": "weights_ablation.json",
    "workload_gap": "workload_gap.json",
}
#: Flags a benchmark needs before it gets to its --out.
REQUIRED = {
    "weights_ablation": ["--runs=static=nowhere"],
    "held_out_workloads": ["--without=voc-yolov3", "--runs=nowhere"],
}
#: The benchmarks that load a --checkpoint (default: the shipped policy).
POLICY_BENCHMARKS = {
    "batched_evaluation",
    "contention_rule",
    "exploration_overhead",
    "reallocation_patterns",
    "recommend_throughput",
    "shifting_anchors",
    "suggested_slas",
    "workload_gap",
}


class MeasuringReachedError(Exception):
    """Raised by the stub that stands for a benchmark's measuring: it was reached, with the parsed
    flags (``parsed``)."""

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__("the benchmark started measuring")
        self.parsed = args


def stub_measuring(name: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The benchmark's module with its ``run`` (and training_seeds' ``train``) replaced by a stub
    that raises :class:`MeasuringReachedError`: a test that reaches it stops there, in milliseconds."""
    module = importlib.import_module(f"benchmarks.{name}")

    def measuring(args: Any, *_: Any) -> None:
        raise MeasuringReachedError(args)

    for attribute in ("run", "train"):
        if hasattr(module, attribute):
            monkeypatch.setattr(module, attribute, measuring)
    return module


@pytest.mark.parametrize("name", sorted(REPORTS))
def test_a_report_already_at_out_is_refused_before_measuring(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--num-envs 8`` rewrote the committed ranking_layout report with an 8-job table, and an
    ``--out`` naming a user's report replaced it: one line, exit 2, both files as they were."""
    module = stub_measuring(name, monkeypatch)
    out = tmp_path / "mine.json"
    out.write_text('{"mine": 1}\n')
    out.with_suffix(".md").write_text("my table\n")
    outcome = call(lambda: module.main([*REQUIRED.get(name, []), f"--out={out}"]), capsys, tmp_path)
    assert_refused(outcome, f"--out {str(out)!r}", "a report is there already", "--overwrite")
    assert out.read_text() == '{"mine": 1}\n' and out.with_suffix(".md").read_text() == "my table\n"


@pytest.mark.parametrize("name", sorted(REPORTS))
def test_help_shows_the_default_report_and_overwrite(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    module = importlib.import_module(f"benchmarks.{name}")
    with pytest.raises(SystemExit) as exit_info:
        module.main(["--help"])
    assert exit_info.value.code == 0
    text = "".join(capsys.readouterr().out.split())  # argparse wraps lines, at a path's hyphens too
    assert "--overwrite" in text
    if REPORTS[name] is not None:
        assert f"(default:{RESULTS / REPORTS[name]}" in text


# weights_ablation checks its --runs before it measures (its default report is checked by --help)
@pytest.mark.parametrize(
    "name", sorted(name for name, report in REPORTS.items() if report and name not in REQUIRED)
)
def test_the_default_report_and_checkpoint_are_the_checkouts_from_any_folder(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A relative ``benchmarks/results/...`` default (and ``checkpoints/default``) named a folder of
    the working directory: run from another, the report went there and the policy was not found."""
    from slamorl_jax.shipped_policy import CHECKOUT_POLICY

    module = stub_measuring(name, monkeypatch)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(MeasuringReachedError) as reached:
        module.main(["--overwrite"])  # the committed report is there: replacing it is asked for
    args = reached.value.parsed
    assert Path(args.out) == RESULTS / REPORTS[name]
    if name in POLICY_BENCHMARKS:
        assert args.checkpoint == str(CHECKOUT_POLICY)
    assert not any(tmp_path.iterdir())


def test_a_missing_policy_in_a_list_is_refused_before_measuring(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    module = stub_measuring("shifting_anchors", monkeypatch)
    argv = ["--checkpoint=checkpoints/default,missing", f"--out={tmp_path / 'r.json'}"]
    assert_refused(call(lambda: module.main(argv), capsys, tmp_path), "'missing' does not exist")
    assert_refused(
        call(lambda: module.main(["--checkpoint=,", f"--out={tmp_path / 'r.json'}"]), capsys, tmp_path),
        "--checkpoint names no policy",
    )


@pytest.mark.parametrize("name", sorted(REPORTS))
def test_the_description_in_help_is_a_whole_sentence(name: str) -> None:
    """``--help`` shows the docstring's first line: ranking_layout's and step_profile's ended mid-sentence."""
    from slamorl_jax.cli_args import summary

    description = summary(importlib.import_module(f"benchmarks.{name}").__doc__)
    assert description and description.endswith("."), description


def test_the_machine_records_a_persistent_compilation_cache_and_the_report_says_so() -> None:
    """``JAX_COMPILATION_CACHE_DIR`` made compile times those of the cache (23.8 s against 2.5 s cold),
    and no report said so."""
    import json

    import jax

    from benchmarks.common import compilation_cache_note, machine_info
    from benchmarks.env_throughput import to_markdown

    jax.config.update("jax_compilation_cache_dir", None)  # the suite's own is put back after the test
    assert machine_info()["compilation_cache"] is None
    jax.config.update("jax_compilation_cache_dir", "/some/cache")
    assert machine_info()["compilation_cache"] == "/some/cache"
    assert compilation_cache_note({}) == ""  # a report from before it was recorded
    payload = json.loads((RESULTS / "env_throughput_gpu.json").read_text())
    assert "compilation cache" not in to_markdown(payload)
    payload["machine"]["compilation_cache"] = "/some/cache"
    assert "persistent compilation cache on (/some/cache)" in to_markdown(payload)


def benchmarks_calling(*names: str) -> set[str]:
    """The benchmark modules whose source calls any of ``names`` (the shared ``common`` and
    ``children`` apart)."""
    folder = Path(__file__).resolve().parent.parent / "benchmarks"
    return {
        path.stem
        for path in folder.glob("*.py")
        if path.stem not in ("common", "children") and any(f"{name}(" in path.read_text() for name in names)
    }


def test_the_lists_name_every_benchmark_that_writes_a_report_or_loads_a_policy() -> None:
    """The tests above run over these lists: a benchmark left out of them (workload_gap was) went
    untested for all of it."""
    writers = benchmarks_calling(
        "add_out_flags", "parse_and_report", "policy_benchmark_main", "child_or_report"
    )
    assert writers == set(REPORTS)
    assert benchmarks_calling("add_checkpoint_flag", "policy_benchmark_main") == POLICY_BENCHMARKS

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


def _check(out: Path, capsys: pytest.CaptureFixture[str], root: Path):
    from benchmarks.common import check_out_path

    return call(lambda: check_out_path(out, "python -m benchmarks.x"), capsys, root)


@pytest.mark.parametrize(
    ("layout", "out", "phrase"),
    [
        ({"r.md/": None}, "r.json", "is a directory"),
        ({"r.json/": None}, "r.json", "is a directory"),
        ({"file": "x"}, "file/r.json", "is a file"),
        ({}, "r.txt", "must end in .json"),
        ({}, "x" * 300 + "/r.json", "not a usable path"),
    ],
)
def test_an_unwritable_report_path_is_refused_before_the_run(
    layout: dict[str, str | None], out: str, phrase: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, text in layout.items():
        (tmp_path / name).mkdir() if text is None else (tmp_path / name).write_text(text)
    assert_refused(_check(tmp_path / out, capsys, tmp_path), "python -m benchmarks.x", phrase)


def test_a_report_in_a_new_folder_is_accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outcome = _check(tmp_path / "new" / "deeper" / "r.json", capsys, tmp_path)
    assert outcome.code is None and not outcome.stderr and not outcome.new_paths, outcome.report()


def test_a_failed_report_write_leaves_the_previous_report_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks.common import write_report

    out = tmp_path / "r.json"
    write_report(out, {"run": 1}, "old table")
    real_write = Path.write_text

    def full_disk_on_markdown(path: Path, text: str, *args: object, **kwargs: object) -> int:
        if path.name.endswith(".md.tmp"):
            raise OSError(28, "No space left on device")
        return real_write(path, text, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full_disk_on_markdown)
    with pytest.raises(OSError, match="No space"):
        write_report(out, {"run": 2}, "new table")
    monkeypatch.undo()
    assert out.read_text() == '{\n  "run": 1\n}\n'
    assert out.with_suffix(".md").read_text() == "old table\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "r.md"]
    assert write_report(out, {"run": 3}, "third") == (out, out.with_suffix(".md"))
    assert out.with_suffix(".md").read_text() == "third\n"


@pytest.mark.parametrize(
    ("flags", "phrase"),
    [
        (["--seeds=0,x"], "--seeds: expected comma-separated integers"),
        (["--seeds=1,1"], "expected distinct seeds"),
        (["--train-flags='--seed"], "--train-flags: No closing quotation"),
        (["--seeds=0", "--runs=missing"], "--runs: checkpoint path"),
        (
            ["--seeds=0", "--train-flags=--bogus", "--run-root=rr"],
            "training seed 0 into rr/seed0 failed (exit 2)",
        ),
    ],
)
def test_training_seeds_refuses_bad_input_in_one_line(
    flags: list[str],
    phrase: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Bad seeds, flags or runs end the benchmark before any evaluation, in one line of its own (a
    failed training child prints its own error line first)."""
    from benchmarks.training_seeds import main

    monkeypatch.chdir(tmp_path)
    outcome = call(lambda: main([*flags, "--out=report.json"]), capsys, tmp_path)
    ours = [line for line in outcome.stderr.splitlines() if line.startswith("python -m benchmarks.")]
    assert outcome.code == 2 and len(ours) == 1 and phrase in ours[0], outcome.report()
    assert not outcome.new_paths and "Traceback" not in outcome.stderr, outcome.report()

"""Benchmark reports say what was not measured instead of scoring it as missed or failed (found on
the first GPU run, ``benchmarks/gpu_session.sh``: its env_throughput skips the Python loop and its
scaling sweep runs out of ``--budget-s``). The stored GPU results are the payloads."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from cli_harness import assert_refused, call

RESULTS = Path(__file__).resolve().parent.parent / "benchmarks" / "results"


def test_env_throughput_without_the_python_loop_says_it_was_not_timed() -> None:
    from benchmarks.env_throughput import to_markdown

    payload = json.loads((RESULTS / "env_throughput_gpu.json").read_text())
    payload["python_loop"] = None
    payload["target"]["vs_python"] = None
    payload["target"]["harness_alone_vs_python"] = None
    report = to_markdown(payload)
    assert "the Python loop was not timed" in report
    assert "x Python (missed)" not in report and "0x Python" not in report


def test_env_throughput_with_the_python_loop_scores_it() -> None:
    from benchmarks.env_throughput import to_markdown

    payload = json.loads((RESULTS / "env_throughput_gpu.json").read_text())
    payload["python_loop"] = {"steps_per_s_median": 4000.0}
    payload["target"].update(vs_python=3000.0, vs_python_met=True, harness_alone_vs_python=90000.0)
    report = to_markdown(payload)
    assert ">= 100x Python (met)" in report and "reaches 90000x Python" in report


def test_env_throughput_reports_the_other_reset_beside_the_default() -> None:
    """The GPU run timed the scatter reset beside the GPU's default (select): a column each, named."""
    from benchmarks.env_throughput import to_markdown

    payload = json.loads((RESULTS / "env_throughput_gpu.json").read_text())
    assert payload["config"]["reset_by"] == "select" and payload["config"]["also_reset_by"] == ["scatter"]
    header, _, first_row = to_markdown(payload).splitlines()[2:5]
    assert (
        "ours (step_batch, select reset)" in header
        and "| ours, scatter reset | scatter / CartPole |" in header
    )
    assert header.count("|") == first_row.count("|")


@pytest.mark.parametrize("value", ["gather", "select,nope"])
def test_env_throughput_refuses_an_unknown_reset_in_one_line(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmarks.env_throughput import main

    argv = [f"--also-reset-by={value}", f"--out={tmp_path / 'r.json'}"]
    assert_refused(call(lambda: main(argv), capsys, tmp_path), "--also-reset-by", "scatter, select")


def test_scaling_rows_left_by_the_budget_are_not_called_failed() -> None:
    from benchmarks.scaling import to_markdown

    payload = json.loads((RESULTS / "scaling_gpu.json").read_text())
    row = {"kind": "train", "requested_devices": "native", "num_envs": 123_456, "one_core": False}
    payload["rows"] = [r for r in payload["rows"] if "error" not in r] + [
        {**row, "error": "skipped: --budget-s=120 spent"},
        {**row, "num_envs": 654_321, "error": "exit 1: skipped a beat | then ran out of memory"},
    ]
    lines = to_markdown(payload).splitlines()
    assert [line for line in lines if "123,456" in line and "| not run (--budget-s spent) |" in line]
    # a failed row says why, its reason kept inside its cell
    failed = "| failed: exit 1: skipped a beat / then ran out of memory |"
    assert [line for line in lines if "654,321" in line and failed in line]


def test_a_gpu_trace_charges_kernels_launched_from_command_buffers_to_their_fusions() -> None:
    """On XLA:GPU a kernel run from a command buffer (a CUDA graph) names the buffer as its
    ``hlo_op``; the kernel's own name is the fusion's, spelled with ``_`` before its number."""
    from benchmarks.hlo_sources import instruction_sources, parse_module
    from benchmarks.step_profile import charge, instruction_named, kept_trace, timed_instruction

    assert timed_instruction("command_buffer_61", "input_scatter_fusion_75") == "input_scatter_fusion_75"
    assert timed_instruction("fusion.3", "fusion.3") == "fusion.3"  # XLA:CPU: the thunk is the instruction
    recorded, text, times, events = kept_trace(RESULTS / "step_profile_gpu")
    sources = instruction_sources(parse_module(text))
    assert instruction_named("loop_concatenate_fusion_2", sources) == "loop_concatenate_fusion.2"
    assert instruction_named("memcpy32_post", sources) == "memcpy32_post"  # a copy, no instruction
    assert events / recorded["units"] > 50  # kernels per env step
    charged = charge(times, sources)
    total = sum(charged["file"].values())
    # Outside the module: the loop-carry copies (memcpy32_post), 17 % of this trace.
    assert charged["file"]["(not in the module)"] < 0.2 * total
    assert charged["file"]["slamorl_jax/env/forecast.py"] > 0.05 * total


UNITS_ZERO = json.dumps(
    {"program": "env", "num_envs": 4, "steps": 1, "step": "batch", "units": 0, "machine": {"backend": "cpu"}}
)


@pytest.mark.parametrize("kept", [None, '{"program": "env"}', "not json", UNITS_ZERO])
def test_a_kept_trace_that_is_missing_or_not_one_is_refused_in_one_line(
    kept: str | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmarks.step_profile import main

    if kept is not None:
        (tmp_path / "run.json").write_text(kept)
    argv = ["--from-trace", str(tmp_path / "run"), "--out", str(tmp_path / "again.json")]
    assert_refused(call(lambda: main(argv), capsys, tmp_path), "--from-trace", str(tmp_path / "run"))


def test_a_trace_kept_where_no_folder_is_refused_before_compiling(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmarks.step_profile import main

    argv = ["--keep-trace", str(tmp_path / "no" / "run")]
    assert_refused(call(lambda: main(argv), capsys, tmp_path), "--keep-trace", "no folder to keep it in")


def test_a_charged_again_trace_is_reported_beside_it_not_over_the_cpu_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--from-trace benchmarks/results/step_profile_gpu`` (docs/speed.md's command) replaced the
    committed CPU ``step_profile.{json,md}`` with the GPU's tables: the report is ``PREFIX.json``, and
    being the kept run's own, it is replaced only with ``--overwrite``."""
    import shutil

    from benchmarks.step_profile import DEFAULT_OUT, main

    for suffix in (".json", ".hlo.txt.gz", ".trace.json.gz"):
        shutil.copyfile(RESULTS / f"step_profile_gpu{suffix}", tmp_path / f"gpu{suffix}")
    cpu_report = DEFAULT_OUT.read_bytes(), DEFAULT_OUT.with_suffix(".md").read_bytes()
    prefix = str(tmp_path / "gpu")
    outcome = call(lambda: main(["--from-trace", prefix]), capsys, tmp_path)
    assert_refused(outcome, f"--out '{prefix}.json'", "a report is there already", "--overwrite")
    outcome = call(lambda: main(["--from-trace", prefix, "--top", "3", "--overwrite"]), capsys, tmp_path)
    assert outcome.code is None, outcome.report()
    assert outcome.new_paths == ("gpu.md",), outcome.report()  # the JSON replaced, its table beside it
    again = json.loads((tmp_path / "gpu.json").read_text())
    assert again["machine"]["backend"] == "gpu" and again["top"] == 3
    assert (DEFAULT_OUT.read_bytes(), DEFAULT_OUT.with_suffix(".md").read_bytes()) == cpu_report


@pytest.mark.parametrize("flag", ["--num-envs=8", "--steps=2", "--program=train", "--step=vmap"])
def test_a_flag_that_from_trace_would_ignore_is_refused(
    flag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The kept run says what was profiled; a flag saying otherwise was dropped without a word."""
    from benchmarks.step_profile import main

    argv = ["--from-trace", str(RESULTS / "step_profile_gpu"), flag, "--out", str(tmp_path / "r.json")]
    outcome = call(lambda: main(argv), capsys, tmp_path)
    assert_refused(outcome, "--from-trace", flag.split("=")[0], "cannot be given with it")


def test_a_kept_trace_writes_its_report_where_from_trace_reads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--keep-trace PREFIX`` with another ``--out`` kept a trace that ``--from-trace PREFIX`` could
    not read back; kept files already there were replaced without ``--overwrite``."""
    from benchmarks.step_profile import main

    prefix = str(tmp_path / "run")
    tiny = ["--num-envs=2", "--steps=1", "--keep-trace", prefix]
    outcome = call(lambda: main([*tiny, "--out", str(tmp_path / "other.json")]), capsys, tmp_path)
    assert_refused(outcome, f"writes its report to {prefix}.json", f"--out {prefix}.json")
    (tmp_path / "run.trace.json.gz").write_bytes(b"an earlier run's")
    outcome = call(lambda: main(tiny), capsys, tmp_path)
    assert_refused(outcome, f"{prefix}.trace.json.gz is there already", "--overwrite")


def test_gpu_session_refuses_a_machine_without_a_gpu_before_writing_anything(tmp_path: Path) -> None:
    """Run where JAX has no GPU it wrote CPU numbers under the committed ``*_gpu`` names and emptied
    their log: one line, exit 2, nothing written (``DRY=1`` is the check of the script anywhere)."""
    import sys

    script = RESULTS.parent / "gpu_session.sh"
    results = tmp_path / "results"
    env = {**os.environ, "RESULTS": str(results), "PYTHON": sys.executable, "JAX_PLATFORMS": "cpu"}
    env.pop("DRY", None)
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "gpu_session.sh: JAX's default backend is 'cpu', not a GPU; DRY=1 checks the script on any machine"
    ]
    assert not results.exists() and list(tmp_path.iterdir()) == []


def test_gpu_session_refuses_an_unknown_part_before_writing_anything(tmp_path: Path) -> None:
    """A misspelt ``PARTS`` name would run nothing and spend a GPU call: one line, exit 2, no folder."""
    script = RESULTS.parent / "gpu_session.sh"
    results = tmp_path / "results"
    env = {**os.environ, "PARTS": "machine env", "RESULTS": str(results), "OUT": str(tmp_path)}
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "gpu_session.sh: unknown part 'env' in PARTS (parts: machine env_throughput train_throughput "
        "step_profile step_profile_train scaling)"
    ]
    assert not results.exists() and list(tmp_path.iterdir()) == []

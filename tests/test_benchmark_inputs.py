"""Benchmarks that load a trained policy refuse a checkpoint that cannot be loaded the way the
package's commands do: one line, exit 2, nothing written (``benchmarks.common.parse_and_report``)."""

from __future__ import annotations

import importlib
import os
import re
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
    "workload_gap",
    "recommend_throughput",
)


@pytest.mark.parametrize("name", POLICY_BENCHMARKS)
def test_a_missing_checkpoint_is_refused_in_one_line(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    main = importlib.import_module(f"benchmarks.{name}").main
    monkeypatch.chdir(tmp_path)
    outcome = call(lambda: main(["--checkpoint=missing", "--out=report.json"]), capsys, tmp_path)
    assert_refused(outcome, f"benchmarks.{name}", "missing", "does not exist")


def test_a_report_path_ending_in_a_slash_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--out=r.json/`` (or ``r.json/.``) names a folder; ``Path`` would drop the slash and write
    ``r.json``."""
    main = importlib.import_module("benchmarks.env_throughput").main
    monkeypatch.chdir(tmp_path)
    for out in ("r.json/", "r.json/.", "x/.."):
        outcome = call(lambda out=out: main([f"--out={out}"]), capsys, tmp_path)
        assert_refused(outcome, "--out", "names a folder")


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
        ({}, "r" * 251 + ".json", "longer than 255 bytes"),
        ({"notes.md": "mine"}, "notes.json", "would replace"),  # a Markdown file with no report beside it
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
    import benchmarks.common as common

    out = tmp_path / "r.json"
    common.write_report(out, {"run": 1}, "old table")
    real_stage = common.stage_text

    def full_disk_on_markdown(path: Path, text: str) -> Path:
        if text == "new table\n":  # the Markdown's temporary file, written after the JSON's
            raise OSError(28, "No space left on device")
        return real_stage(path, text)

    monkeypatch.setattr(common, "stage_text", full_disk_on_markdown)
    with pytest.raises(OSError, match="No space"):
        common.write_report(out, {"run": 2}, "new table", overwrite=True)
    monkeypatch.undo()
    assert out.read_text() == '{\n  "run": 1\n}\n'
    assert out.with_suffix(".md").read_text() == "old table\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "r.md"]
    assert common.write_report(out, {"run": 3}, "third", overwrite=True) == (out, out.with_suffix(".md"))
    assert out.with_suffix(".md").read_text() == "third\n"
    for path in (out, out.with_suffix(".md")):  # readable by all, as any file the user makes
        assert path.stat().st_mode & 0o777 == 0o644


def test_a_report_written_meanwhile_is_not_replaced_without_overwrite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--out`` is checked when a benchmark starts; a report another run wrote there before this one
    ends stays whole (both files), and the command ends in one line with the table printed."""
    import argparse

    from benchmarks.common import publish_report, write_report

    out = tmp_path / "r.json"
    write_report(out, {"run": 1}, "other run's table")
    with pytest.raises(FileExistsError):
        write_report(out, {"run": 2}, "table")
    out.unlink()  # only its Markdown twin there: the JSON published first is taken back
    with pytest.raises(FileExistsError):
        write_report(out, {"run": 2}, "table")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.md"]
    assert out.with_suffix(".md").read_text() == "other run's table\n"
    args = argparse.Namespace(out=out, overwrite=False)
    outcome = call(
        lambda: publish_report(args, {"run": 2}, "table", "python -m benchmarks.x"), capsys, tmp_path
    )
    assert outcome.code == 2 and "table" in outcome.stdout, outcome.report()
    assert f"{out.with_suffix('.md')} appeared while this ran" in outcome.stderr  # not a temporary's name
    assert outcome.stderr.count("\n") == 1 and "appeared while this ran; pass --overwrite" in outcome.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.md"]


def test_the_longest_accepted_report_name_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The temporary files' names are short, so a name ``--out`` accepts is one the write can make."""
    from benchmarks.common import write_report

    out = tmp_path / ("r" * 250 + ".json")
    assert _check(out, capsys, tmp_path).code is None
    write_report(out, {"run": 1}, "table")
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name, out.with_suffix(".md").name]


def test_training_seeds_trains_in_the_callers_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The training child runs where the command was started (a relative ``--run-root`` lands there,
    not in the repository) and imports this repository's package."""
    import benchmarks.training_seeds as seeds

    seen: dict[str, object] = {}

    def fake_run(command: list[str], **kwargs: object) -> object:
        seen.update(command=command, **kwargs)
        return type("Done", (), {"returncode": 0})()

    monkeypatch.setattr(seeds, "run_child", fake_run)
    seeds.train(3, Path("rr/seed3"), ["--num_envs=8"])
    assert "--run_dir=rr/seed3" in seen["command"] and "--num_envs=8" in seen["command"]
    assert seen.get("cwd") is None
    assert str(seeds.REPO_ROOT) in str(seen["env"]["PYTHONPATH"]).split(os.pathsep)


@pytest.mark.parametrize(
    ("flags", "phrase"),
    [
        (["--seeds=0,x"], "--seeds: expected comma-separated integers"),
        (["--seeds=1,1"], "expected distinct seeds"),
        (["--train-flags='--seed"], "--train-flags: No closing quotation"),
        (["--seeds=0", "--runs=missing"], "--runs: checkpoint path"),
        (["--hold-below=1.5"], "--hold-below: must be in [0, 1]"),
        # refused by the training CLI (--only_check_args) before seed 0 trains, in one line of ours
        (["--seeds=0", "--train-flags=--bogus", "--run-root=rr"], "--train-flags: Unknown command line flag"),
        (["--seeds=0", "--train-flags=--num_envs=-8", "--run-root=rr"], "--train-flags: --num_envs must be"),
        # the later flag won: a run trained with seed 5 (or elsewhere) reported as seed 0
        (["--seeds=0", "--train-flags=--num_envs=8 --seed=5"], "--train-flags: --seed is set by this"),
        (["--seeds=0", "--train-flags=--run_dir x --checkpoint_dir=y"], "--checkpoint_dir, --run_dir is set"),
        (["--seeds=0", "--train-flags=--log_dir=shared"], "--log_dir is set by this command"),
        (["--runs=a", "--seeds=0", "--train-flags=--num_envs=8"], "leave out --train-flags and --run-root"),
        (["--runs=a", "--seeds=0", "--run-root=rr"], "leave out --train-flags and --run-root"),
        (["--seeds=0,1", "--run-root=taken"], "--run-root: taken/seed1 must be a new or empty folder"),
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
    import benchmarks.training_seeds as seeds

    main = seeds.main
    monkeypatch.chdir(tmp_path)
    (tmp_path / "taken" / "seed1" / "logs").mkdir(parents=True)  # a run there already
    if "taken" in flags[-1]:  # refused before seed 0 trains: a child would be a waste of minutes
        monkeypatch.setattr(seeds, "run_child", lambda *a, **k: pytest.fail("a seed trained"))
    outcome = call(lambda: main([*flags, "--out=report.json"]), capsys, tmp_path)
    ours = [line for line in outcome.stderr.splitlines() if line.startswith("python -m benchmarks.")]
    assert outcome.code == 2 and len(ours) == 1 and phrase in ours[0], outcome.report()
    assert len(outcome.stderr.strip().splitlines()) == 1 and "training seed" not in outcome.stdout, (
        outcome.report()
    )
    assert not outcome.new_paths and "Traceback" not in outcome.stderr, outcome.report()


def test_an_interrupted_report_write_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C under ``run_command`` ends the process from its handler after the registered
    clean-ups: the one ``write_report`` registers removes its temporary files."""
    from benchmarks.common import write_report
    from slamorl_jax import cli_args

    out = tmp_path / "r.json"
    write_report(out, {"run": 1}, "old table")

    left: list[str] = []

    def interrupted(source: object, target: object) -> None:
        for cleanup in list(cli_args._cleanups):  # what the signal handler runs before os._exit
            cleanup()
        left.extend(sorted(p.name for p in tmp_path.iterdir()))  # all the process leaves behind
        raise SystemExit(130)

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(SystemExit):
        write_report(out, {"run": 2}, "new table", overwrite=True)
    monkeypatch.undo()
    assert left == ["r.json", "r.md"]
    assert out.with_suffix(".md").read_text() == "old table\n"


@pytest.mark.parametrize(
    ("name", "sizes", "flag"),
    [
        ("sharded_step", ["--num-envs=4"], "--num-envs"),
        ("sharded_training_profile", ["--num-envs=4"], "--num-envs"),
        ("scaling", ["--env-num-envs=6", "--train-num-envs=4"], "--train-num-envs"),
    ],
)
def test_a_device_count_that_does_not_split_the_batch_is_refused_before_any_child(
    name: str,
    sizes: list[str],
    flag: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--devices=3 --num-envs=4`` ran a child that failed and wrote a report of the failure with
    exit 0 (over the committed result, by default): one line and exit 2 now, no child, nothing written."""
    module = importlib.import_module(f"benchmarks.{name}")
    no_child = lambda *a, **k: pytest.fail("a child ran")  # noqa: E731
    monkeypatch.setattr("benchmarks.children.run_child", no_child)  # run_in_child's, sharded_step's way
    if hasattr(module, "run_child"):  # imported by name (scaling)
        monkeypatch.setattr(module, "run_child", no_child)
    monkeypatch.chdir(tmp_path)
    argv = ["--devices=1,3", *sizes, "--out=report.json"]
    if name == "sharded_training_profile":  # reads sys.argv itself
        monkeypatch.setattr("sys.argv", [name, *argv])
        outcome = call(module.main, capsys, tmp_path)
    else:
        outcome = call(lambda: module.main(argv), capsys, tmp_path)
    assert_refused(outcome, "--devices 3", f"{flag}=4 must be a multiple of the 3 devices")


def test_a_weights_ablation_run_stopped_before_its_first_save_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run folder whose ``checkpoints/`` holds no step gave a 28-line traceback after the imports."""
    from benchmarks.weights_ablation import main

    (tmp_path / "stopped" / "checkpoints").mkdir(parents=True)
    argv = [f"--runs=static={tmp_path / 'stopped'}", "--episodes=1", f"--out={tmp_path / 'wa.json'}"]
    assert_refused(call(lambda: main(argv), capsys, tmp_path), "--runs static", "no complete checkpoint")


def test_a_python_loop_window_shorter_than_a_chunk_still_times_one() -> None:
    """``--python-seconds=1e-12`` (accepted) divided by zero: every window now runs a chunk."""
    from benchmarks.timing import time_python_loop

    timing = time_python_loop(lambda n: None, 1e-12, repeats=3, chunk=10)
    assert len(timing.run_s) == 3 and all(s > 0 for s in timing.run_s)


def test_a_benchmarks_child_ends_with_it() -> None:
    """``run_child`` registers the child's kill with the stop signals' clean-ups: a SIGTERM that ends
    a benchmark ended ``subprocess.run``'s child no more, and it ran on alone."""
    import sys
    import threading
    import time

    from benchmarks.children import run_child
    from slamorl_jax import cli_args

    def stop_once_registered() -> None:
        deadline = time.monotonic() + 60
        while not cli_args._cleanups and time.monotonic() < deadline:  # the child is started
            time.sleep(0.01)
        for cleanup in list(cli_args._cleanups):  # what the signal handler runs before os._exit
            cleanup()

    threading.Thread(target=stop_once_registered, daemon=True).start()
    done = run_child([sys.executable, "-c", "import time; time.sleep(600)"], timeout=120)
    assert done.returncode < 0  # killed (a child left alone would sleep past the timeout)


def test_a_count_list_beyond_int32_or_with_an_empty_item_is_refused() -> None:
    """A count beyond int32 and an item left empty (``8,,16``) are refused, not dropped."""
    import argparse

    from slamorl_jax.cli_args import positive_int_list

    assert positive_int_list("1,64,2147483647") == [1, 64, 2**31 - 1]
    with pytest.raises(argparse.ArgumentTypeError, match="at most 2,147,483,647"):
        positive_int_list("64,99999999999")
    for text in ("8,,16", "8,16,", ",8"):
        with pytest.raises(argparse.ArgumentTypeError, match="an empty item"):
            positive_int_list(text)


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (
            ["--num-envs=64,2", "--num-minibatches=64", "--minibatch-shuffle=global"],
            "--num-envs 2: --num-minibatches=64 must divide the rollout batch",
        ),
        (
            ["--num-envs=64", "--num-minibatches=32"],
            "--num-envs 64: --minibatch-shuffle=per_env needs --num-minibatches=32 to divide "
            "--rollout-length=16 (or --minibatch-shuffle=global)",
        ),
        (["--num-envs=64", "--hidden-sizes=9000"], "--num-envs 64: --hidden-sizes must be 1 to 8192"),
    ],
)
def test_train_throughput_checks_every_size_before_measuring_in_its_own_flags(
    flags: list[str],
    line: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A bad second size was found after the first was measured (its row lost), and the refusal
    named train's flags (``--num_minibatches``, ``--minibatch_shuffle``), not the benchmark's."""
    import benchmarks.train_throughput as benchmark

    def measured(*args: object, **kwargs: object) -> None:
        raise AssertionError("measured before every size was checked")

    monkeypatch.setattr(benchmark, "measure", measured)
    outcome = call(lambda: benchmark.main([*flags, f"--out={tmp_path / 'r.json'}"]), capsys, tmp_path)
    assert_refused(outcome, line)
    assert not re.search(r"--[a-z]+_", outcome.stderr), outcome.report()  # no flag of train's


def test_network_choice_checks_every_size_before_the_first_trains(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad later size ended the run after the first size's whole budget, its result lost."""
    from benchmarks.network_choice import main

    outcome = call(
        lambda: main(["--hidden-sizes", "64,64", "9000", f"--out={tmp_path}/n.json"]), capsys, tmp_path
    )
    assert_refused(outcome, "--hidden-sizes 9000: --hidden-sizes must be 1 to 8192")


def test_every_benchmark_runs_as_a_script_too() -> None:
    """``python benchmarks/X.py`` as well as ``python -m benchmarks.X``: a benchmark run as a script
    puts the repository on its import path before it imports a ``benchmarks`` module (two did not, and
    ended in a ModuleNotFoundError traceback). Read from the source: a subprocess each costs seconds."""
    import ast

    for path in sorted((Path(__file__).resolve().parent.parent / "benchmarks").glob("*.py")):
        tree = ast.parse(path.read_text())
        if not any(isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) for node in tree.body):
            continue
        first_import = next(
            i
            for i, node in enumerate(tree.body)
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("benchmarks.")
        )
        shims = [
            node
            for node in tree.body[:first_import]
            if isinstance(node, ast.If) and "__package__" in ast.unparse(node.test)
        ]
        assert shims, f"{path.name} imports the benchmarks package before making the repository importable"


def test_a_report_of_uncommitted_code_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A report measured on changed code was labelled with the clean commit it started from."""
    import subprocess

    import benchmarks.common as common

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    code = tmp_path / "slamorl_jax" / "code.py"
    code.parent.mkdir()
    code.write_text("x = 1\n")
    (tmp_path / "README.md").write_text("notes\n")
    result = tmp_path / "benchmarks" / "results" / "r.md"
    result.parent.mkdir(parents=True)
    result.write_text("old figures\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "code")
    monkeypatch.setattr(common, "REPO_ROOT", tmp_path)
    clean = common._git_commit()
    assert clean is not None and not clean.endswith("-dirty")
    (tmp_path / "README.md").write_text("more notes\n")  # not code: the result is the commit's
    result.write_text("re-made figures\n")  # nor a benchmark's report
    assert common._git_commit() == clean
    code.write_text("x = 2\n")
    assert common._git_commit() == f"{clean}-dirty"


def test_a_policy_named_twice_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``shifting_anchors`` reported a spread over policies of one policy named two ways (std 0)."""
    from benchmarks.common import resolve_checkpoints

    outcome = call(
        lambda: resolve_checkpoints("checkpoints/default,./checkpoints/default/", "prog", several=True),
        capsys,
        tmp_path,
    )
    assert_refused(outcome, "names one policy twice")


def test_an_exploration_overhead_run_that_measures_nothing_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """It wrote a report with neither figure (exit 0)."""
    from benchmarks.exploration_overhead import main

    monkeypatch.chdir(tmp_path)
    outcome = call(lambda: main(["--training_only", "--train_updates=0", "--out=r.json"]), capsys, tmp_path)
    assert_refused(outcome, "--training_only with --train_updates 0 measures nothing")
    # --recorded means nothing to the oracle's store: it ran with it unread.
    outcome = call(lambda: main(["--recorded=final", "--out=r.json"]), capsys, tmp_path)
    assert_refused(outcome, "--recorded picks a policy store's allocation: add --history_source policy")
    outcome = call(lambda: main(["--history_rounds=2", "--out=r.json"]), capsys, tmp_path)
    assert_refused(outcome, "--history_rounds builds a policy store in rounds: add --history_source policy")


@pytest.mark.parametrize("fails", [False, True])
def test_files_a_run_keeps_beside_its_report_are_published_with_it_or_not_at_all(
    fails: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``step_profile --keep-trace`` replaced its kept trace while it profiled, before the run was
    charged and its report written: a run that failed after it left a new trace beside the old report.
    A run stages such files in ``args.staged``; ``report`` publishes them with the report, or drops them."""
    import argparse

    from benchmarks.common import report
    from slamorl_jax.atomic_files import temporary_beside

    kept = tmp_path / "p.trace.json.gz"
    kept.write_text("old trace")
    out = tmp_path / "p.json"

    def run(args: argparse.Namespace) -> dict:
        staged = temporary_beside(kept)
        staged.write_text("new trace")
        args.staged.append((staged, kept))
        if fails:
            raise RuntimeError("the trace timed no instruction")
        return {"run": 2}

    args = argparse.Namespace(out=out, overwrite=True)
    if fails:
        with pytest.raises(RuntimeError, match="timed no instruction"):
            report(args, run, lambda payload: "table", "prog")
    else:
        assert call(lambda: report(args, run, lambda payload: "table", "prog"), capsys, tmp_path).code is None
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == (["p.trace.json.gz"] if fails else ["p.json", "p.md", "p.trace.json.gz"]), names
    assert kept.read_text() == ("old trace" if fails else "new trace")

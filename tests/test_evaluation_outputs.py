"""How ``evaluate`` writes its results: whole or not at all, never over or away another evaluation's,
plots whose methods can be told apart (no evaluation runs here: the suite is replaced)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from slamorl_jax import evaluate
from slamorl_jax.array_checksum import signed_meta
from slamorl_jax.evaluation import report, suite

SHIPPED = Path(__file__).resolve().parent.parent / "checkpoints" / "default"


def test_a_failed_write_leaves_the_earlier_results_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file-size limit hit while writing the CSV used to leave a JSON cut short beside the
    earlier evaluation's Markdown and CSV; now nothing is replaced and no temporary file stays."""
    for name in ("evaluation.json", "evaluation.md", "evaluation.csv"):
        (tmp_path / name).write_text(f"earlier {name}\n")
    monkeypatch.setattr(report, "to_markdown", lambda payload: "new markdown\n")

    def full_disk(payload: dict) -> str:
        raise OSError(27, "File too large")

    monkeypatch.setattr(report, "to_csv", full_disk)
    with pytest.raises(OSError, match="File too large"):
        report.write_outputs(tmp_path, {"new": True}, plots=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "evaluation.csv",
        "evaluation.json",
        "evaluation.md",
    ]
    assert all(p.read_text() == f"earlier {p.name}\n" for p in tmp_path.iterdir())


def test_sixty_methods_each_get_their_own_colour_and_marker() -> None:
    """Every method was an ``o`` in a 10-colour cycle: a default run's 13-15 methods shared colours."""
    styles = {tuple(sorted(report.method_style(i).items())) for i in range(60)}
    assert len(styles) == 60


def test_results_another_evaluation_wrote_meanwhile_are_neither_replaced_nor_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two evaluations into one ``--out_dir``: the one that finishes second used to replace the
    other's results without ``--overwrite``, and one interrupted removed the folder with them."""
    out = tmp_path / "out"

    def other_evaluation_meanwhile(*args: object, **kwargs: object) -> tuple[dict, None]:
        (out / "evaluation.json").write_text("the other evaluation's\n")
        return {"config": {}}, None

    monkeypatch.setattr(suite, "run_suite", other_evaluation_meanwhile)
    argv = [f"--checkpoint={SHIPPED}", "--no-progress", "--compilation_cache_dir=", f"--out_dir={out}"]
    with pytest.raises(SystemExit) as ended:
        evaluate.main(argv)
    err = capsys.readouterr().err
    assert ended.value.code == 2 and len(err.strip().splitlines()) == 1 and "--overwrite" in err, err
    assert (out / "evaluation.json").read_text() == "the other evaluation's\n"

    out = tmp_path / "second"  # one interrupted after the other wrote there: the other's stays

    def interrupted(*args: object, **kwargs: object) -> None:
        (out / "evaluation.json").write_text("the other evaluation's\n")
        raise KeyboardInterrupt

    monkeypatch.setattr(suite, "run_suite", interrupted)
    with pytest.raises(KeyboardInterrupt):
        evaluate.main([*argv[:-1], f"--out_dir={out}"])
    assert (out / "evaluation.json").read_text() == "the other evaluation's\n"

    # One that wrote no plot while the other wrote one: the clean-up of an --overwrite'd folder's
    # old plots removed the other's too.
    out = tmp_path / "third"
    monkeypatch.setattr(suite, "run_suite", lambda *args, **kwargs: ({"config": {}}, None))
    monkeypatch.setattr(report, "to_markdown", lambda payload: "")

    def json_then_the_others_plot(out_dir: Path, payload: dict, plots: str) -> list[Path]:
        (out_dir / "evaluation.json").write_text("this evaluation's\n")
        (out_dir / "front.png").write_bytes(b"the other evaluation's")
        return [out_dir / "evaluation.json"]

    monkeypatch.setattr(report, "write_outputs", json_then_the_others_plot)
    assert evaluate.main([*argv[:-1], f"--out_dir={out}"]) == 0
    assert (out / "front.png").read_bytes() == b"the other evaluation's"


@pytest.mark.parametrize(
    ("argv", "phrase"),
    [
        (["--out_dir="], "--out_dir: must name a folder"),  # read as the current folder before
        (["--scenarios=deadline-critical,deadline-critical"], "given twice"),  # ran twice before
        ([f"--compare=a|b={SHIPPED}"], "a name may hold letters, digits"),  # split a Markdown row
    ],
)
def test_an_empty_out_dir_and_a_scenario_twice_are_refused(
    argv: list[str],
    phrase: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as ended:
        evaluate.main(argv)
    err = capsys.readouterr().err
    assert ended.value.code == 2 and len(err.strip().splitlines()) == 1 and phrase in err, err
    assert not any(tmp_path.iterdir())


def test_a_checkpoint_whose_config_builds_no_env_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its config loads but the env's params refuse a value: exit 1 ("unexpected ValueError") before."""
    copy = Path(shutil.copytree(SHIPPED, tmp_path / "ck"))
    meta_file = next(copy.glob("*/meta/metadata"))
    meta = json.loads(meta_file.read_text())
    meta["config"]["moves_leave_contention"] = "yes"
    meta_file.write_text(json.dumps(signed_meta(meta)))
    with pytest.raises(SystemExit) as ended:
        evaluate.main([f"--checkpoint={copy}", "--no-progress", f"--out_dir={tmp_path / 'out'}"])
    err = capsys.readouterr().err
    assert ended.value.code == 2 and len(err.strip().splitlines()) == 1 and "moves_leave_contention" in err, (
        err
    )
    assert not (tmp_path / "out").exists()


def test_undefined_figures_are_written_as_null() -> None:
    """A relative gain over a baseline that met no SLA is NaN; JSON's ``NaN`` is not JSON to strict
    parsers, so reports write ``null`` (``json_output.dumps_strict``)."""
    from slamorl_jax.json_output import dumps_strict

    text = dumps_strict({"gain": {"relative": float("nan"), "absolute": 0.5}, "rows": [float("inf"), 1.0]})
    assert json.loads(text) == {"gain": {"relative": None, "absolute": 0.5}, "rows": [None, 1.0]}


def test_an_interrupt_while_staging_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while the results are staged ends the process from its handler after the registered
    clean-ups: the one ``write_outputs`` registers removes the staged files (they stayed, as
    ``.evaluation.json.*.tmp``)."""
    from slamorl_jax import cli_args

    (tmp_path / "evaluation.json").write_text("earlier\n")
    left: list[str] = []

    def interrupted(payload: dict) -> str:
        for cleanup in list(cli_args._cleanups):  # what the signal handler runs before os._exit
            cleanup()
        left.extend(sorted(p.name for p in tmp_path.iterdir()))
        raise SystemExit(130)

    monkeypatch.setattr(report, "to_markdown", lambda payload: "new\n")
    monkeypatch.setattr(report, "to_csv", interrupted)
    with pytest.raises(SystemExit):
        report.write_outputs(tmp_path, {"new": True}, plots=False)
    assert left == ["evaluation.json"] and (tmp_path / "evaluation.json").read_text() == "earlier\n"


def test_a_stop_signal_during_the_renames_waits_for_them() -> None:
    """``stop_signals_deferred``: a SIGINT inside the block ends the process when the block ends
    (status 130, one line), so the renames of one evaluation's files happen all or none."""
    import subprocess
    import sys

    code = (
        "import os, signal\n"
        "from slamorl_jax.cli_args import exit_on_interrupt, stop_signals_deferred\n"
        "exit_on_interrupt('probe')\n"
        "with stop_signals_deferred():\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    for _ in range(1000):\n"
        "        pass\n"
        "    print('the block ran to its end', flush=True)\n"
        "print('after the block')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 130, done.stderr
    assert done.stdout == "the block ran to its end\n" and done.stderr == "probe: interrupted (SIGINT)\n"


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc, a folder no one can write")
def test_an_out_dir_only_the_permission_bits_call_writable_is_refused_before_the_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``/proc`` passes ``os.access`` for root but takes no file: the evaluation ran to its end and
    then failed (exit 1); a probe file refuses it up front."""
    with pytest.raises(SystemExit) as exit_:
        evaluate.parse_args(["--out_dir=/proc", "--episodes=1"])
    assert exit_.value.code == 2 and "--out_dir '/proc' is not writable" in capsys.readouterr().err


def test_an_out_dir_holding_a_folder_named_like_a_result_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With --overwrite the run went to its end and failed to replace ``evaluation.json`` (exit 1)."""
    (tmp_path / "evaluation.json").mkdir()
    with pytest.raises(SystemExit) as exit_:
        evaluate.parse_args([f"--out_dir={tmp_path}", "--overwrite"])
    assert exit_.value.code == 2 and "holds a folder named evaluation.json" in capsys.readouterr().err


def test_progress_takes_train_spelling_too() -> None:
    """``--noprogress`` (train's, absl's spelling) is ``--no-progress``."""
    assert evaluate.parse_args(["--noprogress"]).progress is False
    assert evaluate.parse_args(["--no-progress"]).progress is False
    assert evaluate.parse_args([]).progress is True

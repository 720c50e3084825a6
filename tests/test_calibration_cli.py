"""The calibration's commands refuse bad input in one line with exit status 2 and lose nothing saved.

``python -m slamorl_jax.calibration`` (``calibration/__main__.py``) and
``python -m slamorl_jax.calibration.job_spread``. Every refusal is checked in-process through
``main([...])``; a fixture makes the fits fail the test if they run, so each refusal is also shown to
come before them. One test runs the real fits (about 10 s) on a copy of the vendored data.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from calibration_fixtures import assert_json_close

import slamorl_jax.atomic_files as atomic_files
import slamorl_jax.calibration.__main__ as cli
from slamorl_jax.calibration import build, checks, job_spread
from slamorl_jax.calibration.loaders import DEFAULT_DATA_DIR, DEFAULT_OUTPUT

PROG = "python -m slamorl_jax.calibration"
SPREAD_PROG = "python -m slamorl_jax.calibration.job_spread"
REPO_ROOT = Path(__file__).resolve().parents[1]
#: What an existing --output holds before a refused or failed run: it must hold it after.
OLD = b'{"format_version": 1, "kept": true}\n'


def _copy_data(dst: Path) -> Path:
    shutil.copytree(DEFAULT_DATA_DIR, dst, ignore=shutil.ignore_patterns(".ruff_cache"))
    return dst


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the vendored data that no test changes."""
    return _copy_data(tmp_path_factory.mktemp("pristine") / "data")


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A copy of the vendored data this test may spoil."""
    return _copy_data(tmp_path / "data")


@pytest.fixture
def output(tmp_path: Path) -> Path:
    """An existing --output file, alone in its folder, holding :data:`OLD`."""
    path = tmp_path / "out" / "calibrated.json"
    path.parent.mkdir()
    path.write_bytes(OLD)
    return path


@pytest.fixture
def no_fits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fits fail the test if they run: a refusal must come before them."""

    def must_not_run(*args: object, **kwargs: object) -> None:
        raise AssertionError("the fits ran before the refusal")

    monkeypatch.setattr(build, "calibrate", must_not_run)


def refused(capsys: pytest.CaptureFixture[str], main: Callable[[list[str]], int], argv: list[str]) -> str:
    """Run ``main(argv)``; assert exit status 2 and one stderr line; return that line."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert "Traceback" not in captured.err and "usage:" not in captured.err
    return lines[0]


def refused_calibration(capsys: pytest.CaptureFixture[str], argv: list[str], output: Path) -> str:
    """:func:`refused` for the calibration; ``output`` (and its folder) must be as they were."""
    line = refused(capsys, cli.main, argv)
    assert line.startswith(f"{PROG}: error: ")
    assert output.read_bytes() == OLD
    assert sorted(output.parent.iterdir()) == [output]  # no temporary file left behind
    return line.removeprefix(f"{PROG}: error: ")


# --- the command line itself -----------------------------------------------------------------------


@pytest.mark.usefixtures("no_fits")
def test_unknown_flag_is_one_line(capsys, output):
    message = refused_calibration(capsys, ["--bogus", "--output", str(output), "--overwrite"], output)
    assert message == "unrecognized arguments: --bogus"


def test_the_module_runs_main_under_the_shared_wrapper():
    done = subprocess.run(
        [sys.executable, "-m", "slamorl_jax.calibration", "--bogus"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr == f"{PROG}: error: unrecognized arguments: --bogus\n"


def test_default_output_is_the_json_the_environment_loads():
    from slamorl_jax.env.catalog import CATALOG_PATH

    assert cli.DEFAULT_OUTPUT == CATALOG_PATH


# --- --data-dir ------------------------------------------------------------------------------------


@pytest.mark.usefixtures("no_fits")
@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda tmp: tmp / "nowhere", "does not exist"),
        (lambda tmp: Path(__file__), "is not a folder"),
        (lambda tmp: tmp, "lacks synergy-osdi22/cpu_mem_sensitivity.csv"),
    ],
    ids=["missing", "a-file", "empty-folder"],
)
def test_unusable_data_dir_is_refused(capsys, tmp_path, output, make, expected):
    data = make(tmp_path / "empty")
    (tmp_path / "empty").mkdir()
    message = refused_calibration(
        capsys, ["--data-dir", str(data), "--output", str(output), "--overwrite"], output
    )
    assert message == f"--data-dir {str(data)!r} {expected}"


@pytest.mark.usefixtures("no_fits")
def test_empty_data_dir_argument_is_refused(capsys, output):
    message = refused_calibration(capsys, ["--data-dir=", "--output", str(output), "--overwrite"], output)
    assert message == "--data-dir is empty"


@pytest.mark.usefixtures("no_fits")
@pytest.mark.parametrize(
    ("remove", "named"),
    [
        ("gavel-osdi20/simulation_throughputs.json", "gavel-osdi20/simulation_throughputs.json"),
        ("pollux-osdi21/traces/bert/placements.csv", "pollux-osdi21/traces/bert/placements.csv"),
        ("pollux-osdi21/traces/ncf/validation-*.csv", "pollux-osdi21/traces/ncf/validation-*.csv"),
        ("pollux-osdi21/workloads/*", "pollux-osdi21/workloads/workload-*.csv"),
        ("alibaba-gpu-v2023/*.csv", "alibaba-gpu-v2023/openb_pod_list_default.csv"),
    ],
)
def test_data_dir_lacking_a_file_names_it(capsys, data_dir, output, remove, named):
    for path in data_dir.glob(remove):
        path.unlink()
    message = refused_calibration(
        capsys, ["--data-dir", str(data_dir), "--output", str(output), "--overwrite"], output
    )
    assert message == f"--data-dir {str(data_dir)!r} lacks {named}"


def _replace_line(number: int, old: str, new: str) -> Callable[[str], str]:
    """A text edit: ``old`` -> ``new`` once in line ``number`` (1-based)."""

    def edit(text: str) -> str:
        lines = text.splitlines(keepends=True)
        assert old in lines[number - 1]
        lines[number - 1] = lines[number - 1].replace(old, new, 1)
        return "".join(lines)

    return edit


SCALABILITY = "pollux-osdi21/traces/bert/scalability.csv"
STEP_TIMES = "pollux-osdi21/traces/bert/placements.csv', 'pollux-osdi21/traces/bert/scalability.csv"
GAVEL = "gavel-osdi20/simulation_throughputs.json"
WORKLOADS = "pollux-osdi21/workloads/workload-*.csv"
AWS = "aws-ec2-prices/aws_gpu_instances_us_east_1.csv"
SYNERGY = "synergy-osdi22/cpu_mem_sensitivity.csv"
MALFORMED: list[tuple[str, Callable[[str], str], str, str]] = [
    (SCALABILITY, _replace_line(1, "num_nodes", "nodes"), STEP_TIMES, "missing 'num_nodes'"),
    (SCALABILITY, _replace_line(3, "6,6,6,", "6,6,six,"), STEP_TIMES, "'six'"),
    (SCALABILITY, lambda text: text + "1,2,3\n", STEP_TIMES, "not 'NoneType'"),
    (
        "pollux-osdi21/traces/bert/placements.csv",
        _replace_line(2, "1,4,", "1x,4,"),
        STEP_TIMES,
        "invalid literal for int()",
    ),
    (
        "pollux-osdi21/workloads/workload-1.csv",
        lambda text: text.replace("num_replicas", "replicas"),
        WORKLOADS,
        "missing 'num_replicas'",
    ),
    (GAVEL, lambda text: text[: len(text) // 2], GAVEL, "Expecting"),
    (GAVEL, lambda text: "[]", GAVEL, "has no attribute 'items'"),
    (GAVEL, lambda text: '{"v100": {"bad key": {"null": 1.0}}}', GAVEL, "invalid syntax"),
    (GAVEL, lambda text: '{"v100": {"(\\"a\\", 1)": {}}}', GAVEL, "missing 'null'"),
    # Values a loader reads but no measurement can be: they changed the fits silently (exit 0).
    (GAVEL, lambda text: text.replace("4.795294551566172", "NaN", 1), GAVEL, "every throughput must be"),
    (
        "pollux-osdi21/traces/philly.csv",
        lambda text: text.replace(",1,66.0", ",-4,66.0", 1),
        "pollux-osdi21/traces/philly.csv",
        "every num_gpus must be a finite number >= 1, found -4",
    ),
    (
        "pollux-osdi21/traces/bert/validation-12.csv",
        lambda text: "",
        "pollux-osdi21/traces/bert/validation-*.csv",
        "no rows of data",
    ),
    (
        SCALABILITY,
        lambda text: text.splitlines(keepends=True)[0],
        STEP_TIMES,
        "no rows of data",
    ),  # a header alone
    # Prices and CPU profiles no measurement can have: they fitted negative unit prices (exit 0).
    (AWS, lambda text: text.replace(",192.0,4.08,", ",192.0,-4.08,", 1), AWS, "every Price must be a finite"),
    (
        SYNERGY,
        lambda text: text.replace("alexnet,1,62.5,0.3", "alexnet,1,62.5,-0.3", 1),
        SYNERGY,
        "found -0.3",
    ),
    (SYNERGY, lambda text: text.replace(",62.5,", ",62.4,"), SYNERGY, "no rows at 62.5 GB of memory per GPU"),
]


@pytest.mark.usefixtures("no_fits")
@pytest.mark.parametrize(("name", "edit", "files", "expected"), MALFORMED)
def test_data_a_loader_rejects_names_its_files(capsys, data_dir, output, name, edit, files, expected):
    """What a loader cannot read is refused before the fits, naming the files that loader reads."""
    path = data_dir / name
    path.write_text(edit(path.read_text()))
    message = refused_calibration(
        capsys, ["--data-dir", str(data_dir), "--output", str(output), "--overwrite"], output
    )
    prefix = (
        "cannot use data file '" + str(data_dir) + "/" + files.replace("', '", f"', '{data_dir}/") + "': "
    )
    assert message.startswith(prefix), message
    assert expected in message


@pytest.mark.usefixtures("no_fits")
def test_data_file_that_is_not_utf8_is_refused(capsys, data_dir, output):
    path = data_dir / SCALABILITY
    path.write_bytes(b"\xff\xfe\x00garbage\n")
    message = refused_calibration(
        capsys, ["--data-dir", str(data_dir), "--output", str(output), "--overwrite"], output
    )
    assert "can't decode byte 0xff" in message and str(path.parent) in message


@pytest.mark.parametrize(
    "result",
    [ValueError("the least-squares fit did not converge"), ({"value": float("nan")}, build.Report())],
    ids=["fit-raises", "fit-gives-nan"],
)
def test_fits_that_fail_name_the_data_dir(capsys, monkeypatch, pristine, output, result):
    def fake_calibrate(data_dir: Path) -> object:
        if isinstance(result, Exception):
            raise result
        return result

    monkeypatch.setattr(build, "calibrate", fake_calibrate)
    message = refused_calibration(
        capsys, ["--data-dir", str(pristine), "--output", str(output), "--overwrite"], output
    )
    assert message.startswith(f"the fits failed on --data-dir {str(pristine)!r}: ")
    assert ("did not converge" if isinstance(result, Exception) else "JSON compliant") in message


# --- --output --------------------------------------------------------------------------------------


@pytest.mark.usefixtures("no_fits")
@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda out: str(out.parent), "is a folder; name the JSON file to write"),
        (lambda out: str(out.parent / "new") + "/", "is a folder; name the JSON file to write"),
        (lambda out: str(out.parent / "typo" / "deeper" / "x.json"), "its folder"),
        (lambda out: str(out.parent / ("x" * 300 + ".json")), "File name too long"),
    ],
    ids=["existing-folder", "trailing-slash", "missing-folder", "name-too-long"],
)
def test_unusable_output_is_refused_before_the_fits(capsys, pristine, output, make, expected):
    target = make(output)
    message = refused_calibration(capsys, ["--data-dir", str(pristine), "--output", target], output)
    assert str(target) in message
    assert expected in message
    assert not (output.parent / "typo").exists()  # no folder was made for a mistyped path


@pytest.mark.usefixtures("no_fits")
def test_an_existing_output_or_one_not_json_is_refused_before_the_fits(capsys, pristine, output):
    message = refused_calibration(capsys, ["--data-dir", str(pristine), "--output", str(output)], output)
    assert message == f"--output {str(output)!r} already exists; pass --overwrite to replace it"
    page = output.parent / "calibration.md"  # the page --markdown's tables are pasted into
    argv = ["--data-dir", str(pristine), "--markdown", "--output", str(page), "--overwrite"]
    assert (
        refused_calibration(capsys, argv, output)
        == f"--output {str(page)!r} must name a .json file (it is written as JSON)"
    )


def test_an_output_made_while_the_fits_ran_is_kept(capsys, monkeypatch, pristine, tmp_path):
    out = tmp_path / "new.json"

    def fits_meanwhile(data_dir: Path) -> tuple[dict, build.Report]:
        out.write_bytes(OLD)  # another program writes the file while the fits run
        return {"format_version": 1}, build.Report()

    monkeypatch.setattr(build, "calibrate", fits_meanwhile)
    message = refused(capsys, cli.main, ["--data-dir", str(pristine), "--output", str(out)])
    assert message.endswith("was created while the fits ran; pass --overwrite to replace it")
    assert out.read_bytes() == OLD and sorted(tmp_path.iterdir()) == [out]


@pytest.mark.usefixtures("no_fits")
def test_empty_output_is_refused(capsys, pristine, output):
    message = refused_calibration(capsys, ["--data-dir", str(pristine), "--output="], output)
    assert message == "--output is empty"


@pytest.mark.usefixtures("no_fits")
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes")
def test_output_that_is_not_a_regular_file_is_refused(capsys, pristine, output, tmp_path):
    """A named pipe stands for any special file (never the real null device: a bug here would
    replace it with a plain file for the whole machine)."""
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    message = refused_calibration(capsys, ["--data-dir", str(pristine), "--output", str(pipe)], output)
    assert message == f"--output {str(pipe)!r} is not a regular file"
    assert stat.S_ISFIFO(pipe.stat().st_mode)


@pytest.mark.usefixtures("no_fits")
def test_output_in_a_folder_that_refuses_new_files_is_refused(capsys, monkeypatch, pristine, output):
    def denied(*args: object, **kwargs: object) -> None:
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(atomic_files.tempfile, "mkstemp", denied)
    message = refused_calibration(
        capsys, ["--data-dir", str(pristine), "--output", str(output), "--overwrite"], output
    )
    assert message == f"cannot write --output {str(output)!r}: Permission denied"


@pytest.mark.usefixtures("no_fits")
@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root writes anywhere")
def test_output_in_a_read_only_folder_is_refused(capsys, pristine, output):
    output.parent.chmod(0o555)
    try:
        message = refused_calibration(
            capsys, ["--data-dir", str(pristine), "--output", str(output), "--overwrite"], output
        )
    finally:
        output.parent.chmod(0o755)
    assert message == f"cannot write --output {str(output)!r}: Permission denied"


def test_a_failed_write_keeps_the_old_file_and_removes_the_temporary_one(
    capsys, monkeypatch, pristine, output
):
    monkeypatch.setattr(build, "calibrate", lambda data_dir: ({"format_version": 1}, build.Report()))

    def disk_full(src: object, dst: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic_files.os, "replace", disk_full)
    message = refused_calibration(
        capsys, ["--data-dir", str(pristine), "--output", str(output), "--overwrite"], output
    )
    assert message == f"cannot write --output {str(output)!r}: No space left on device"


def test_write_json_makes_no_folder_and_no_file_for_unwritable_json(tmp_path):
    with pytest.raises(FileNotFoundError):
        build.write_json({"a": 1}, tmp_path / "missing" / "x.json")
    assert not (tmp_path / "missing").exists()
    with pytest.raises(ValueError, match="JSON compliant"):
        build.write_json({"a": float("inf")}, tmp_path / "x.json")
    assert list(tmp_path.iterdir()) == []


# --- a valid run -----------------------------------------------------------------------------------


def test_valid_run_writes_what_calibrate_returns(capsys, monkeypatch, pristine, tmp_path):
    returned: list[dict] = []
    real_calibrate = build.calibrate

    def spy(data_dir: Path) -> tuple[dict, build.Report]:
        assert Path(data_dir) == pristine
        obj, report = real_calibrate(data_dir)
        returned.append(obj)
        return obj, report

    monkeypatch.setattr(build, "calibrate", spy)
    out = tmp_path / "new.json"
    assert cli.main(["--data-dir", str(pristine), "--output", str(out)]) == 0
    assert len(returned) == 1
    assert json.loads(out.read_text()) == json.loads(build.dumps(returned[0]))
    # ... which is the package's JSON: the committed data and code fit it (an edit of either that
    # changes the fits fails here).
    assert_json_close(json.loads(out.read_text()), checks.load_shipped(DEFAULT_OUTPUT))
    assert returned[0]["generated_by"] == PROG and len(returned[0]["workloads"]) == 13
    assert sorted(tmp_path.iterdir()) == [out]
    captured = capsys.readouterr()
    assert captured.err == ""
    assert captured.out.endswith(f"\nwrote {out}\n")


@pytest.mark.slow  # timed by a sleep: a busy machine could deliver the signal before the handlers
def test_ctrl_c_exits_130_in_one_line_and_keeps_the_old_file(pristine, output):
    argv = ["--data-dir", str(pristine), "--output", str(output), "--overwrite"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "slamorl_jax.calibration", *argv],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(2.0)  # past the handlers' installation, well before the fits end
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGINT, err
    assert err == f"{PROG}: interrupted (SIGINT)\n"
    assert output.read_bytes() == OLD
    assert sorted(output.parent.iterdir()) == [output]


# --- job_spread ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["--data-dir", "/nonexistent/data"], "--data-dir '/nonexistent/data' is not a folder"),
        (["--calibrated", "/nonexistent/c.json"], "cannot read --calibrated '/nonexistent/c.json': No such"),
    ],
    ids=["unknown-flag", "missing-data-dir", "missing-calibrated"],
)
def test_job_spread_refuses_bad_arguments(capsys, argv, expected):
    line = refused(capsys, job_spread.main, argv)
    assert line.startswith(f"{SPREAD_PROG}: error: {expected}")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{", "is not valid JSON: "),
        ("[1]", "is not a calibrated-workloads JSON (no 'workloads')"),
        (
            '{"workloads": 5}',
            "has no workloads: 'workloads' must be a non-empty list",
        ),  # was "'int' object is not iterable"
    ],
)
def test_job_spread_refuses_a_calibrated_file_that_is_not_one(capsys, tmp_path, text, expected):
    path = tmp_path / "c.json"
    path.write_text(text)
    line = refused(capsys, job_spread.main, ["--calibrated", str(path)])
    assert line.startswith(f"{SPREAD_PROG}: error: --calibrated {str(path)!r} {expected}")


def test_job_spread_refuses_fits_and_measurements_that_make_no_spread(capsys, tmp_path):
    """A NaN fit, or negative step times in a copied data folder, printed 'nan' with status 0 (and
    NumPy's warnings): both are refused in one line."""
    shipped = json.loads(DEFAULT_OUTPUT.read_text())
    workloads = [dict(w) for w in shipped["workloads"]]
    workloads[2]["gamma"] = float("nan")  # squad-bert's
    nan_fit = {**shipped, "workloads": workloads}
    calibrated = tmp_path / "nan.json"
    calibrated.write_text(json.dumps(nan_fit))
    line = refused(capsys, job_spread.main, ["--calibrated", str(calibrated)])
    assert "come out non-finite" in line
    data = tmp_path / "data"
    shutil.copytree(DEFAULT_DATA_DIR, data)
    placements = data / "pollux-osdi21" / "traces" / "bert" / "placements.csv"
    rows = placements.read_text().splitlines()
    header = rows[0].split(",")
    step = header.index("step_time")
    cells = rows[1].split(",")
    cells[step] = "-0.5"
    placements.write_text("\n".join([rows[0], ",".join(cells), *rows[2:]]) + "\n")
    line = refused(capsys, job_spread.main, ["--data-dir", str(data)])
    assert "every step_time must be a finite number >= 1e-09, found -0.5" in line


def test_job_spread_names_the_inputs_when_the_data_dir_lacks_its_files(capsys, tmp_path):
    line = refused(capsys, job_spread.main, ["--data-dir", str(tmp_path)])
    assert line.startswith(f"{SPREAD_PROG}: error: cannot size the spreads from --data-dir {str(tmp_path)!r}")
    assert "simulation_throughputs.json" in line


def test_a_new_file_is_published_on_a_filesystem_without_hard_links(monkeypatch, tmp_path):
    """``write_new_text_atomically`` falls back to an exclusive create and a rename where ``os.link``
    is refused (FAT and some network filesystems): the file is written, and an existing one kept."""

    def no_links(src: object, dst: object) -> None:
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(atomic_files.os, "link", no_links)
    out = tmp_path / "new.json"
    atomic_files.write_new_text_atomically(out, "{}\n")
    assert out.read_text() == "{}\n" and sorted(tmp_path.iterdir()) == [out]
    with pytest.raises(FileExistsError):
        atomic_files.write_new_text_atomically(out, "[]\n")
    assert out.read_text() == "{}\n" and sorted(tmp_path.iterdir()) == [out]


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            lambda text: "".join(line for line in text.splitlines(True) if not line.startswith("p4d")),
            "no p4d row",
        ),
        # every T4 instance cheaper than its CPUs and memory: a T4 that pays the user to run on it
        (
            lambda text: re.sub(r"^(g4dn\.[^,]*,T4,[^,]*,[^,]*,[^,]*),[^,]*,", r"\1,0.01,", text, flags=re.M),
            "T4 $/GPU-h",
        ),
    ],
)
def test_prices_that_cannot_be_fitted_name_the_file(tmp_path, edit, expected):
    """A price table without a GPU family gave a NaN median (NumPy warnings, then a JSON error
    naming nothing); one whose rows fit a negative price was saved (exit 0)."""
    from slamorl_jax.calibration import loaders, prices

    source = loaders.DEFAULT_DATA_DIR / loaders.AWS_PRICE_FILE
    target = tmp_path / loaders.AWS_PRICE_FILE
    target.parent.mkdir(parents=True)
    target.write_text(edit(source.read_text()))
    with pytest.raises(ValueError, match=re.escape(expected)) as caught:
        prices.fit_prices(tmp_path)
    assert str(target) in str(caught.value)

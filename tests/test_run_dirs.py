"""Run folders: what a command that saved nothing removes again, and what it must leave."""

from __future__ import annotations

from pathlib import Path

import pytest

from slamorl_jax import run_dirs
from slamorl_jax.run_dirs import RunDirError, check_dir, create_run_dirs, new_folder_problem, remove_created


def test_a_command_removes_only_its_own_folders(tmp_path: Path) -> None:
    """Two runs of a sweep start into one new folder; the first stops before saving. Its own folders
    go, the shared new parent and the other run's finished work stay (the parent was deleted whole)."""
    sweep = tmp_path / "sweeps" / "new"
    first = create_run_dirs(
        [("--checkpoint_dir", sweep / "a" / "checkpoints"), ("--log_dir", sweep / "a" / "logs")]
    )
    second = create_run_dirs([("--checkpoint_dir", sweep / "b" / "checkpoints")])
    (sweep / "a" / "logs" / "metrics.jsonl").write_text("{}\n")
    (sweep / "b" / "checkpoints" / "10").mkdir()
    remove_created(first)
    assert not (sweep / "a").exists()
    assert (sweep / "b" / "checkpoints" / "10").is_dir()
    remove_created(second)
    assert list(sweep.iterdir()) == []  # the parent the first run created was not the second's


def test_folders_that_existed_are_left(tmp_path: Path) -> None:
    """Only what the command created is removed: an existing folder stays, with its files."""
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "notes.txt").write_text("mine")
    created = create_run_dirs([("--out_dir", tmp_path / "runs" / "eval")])
    (tmp_path / "runs" / "eval" / "evaluation.json").write_text("{}")
    remove_created(created)
    assert not (tmp_path / "runs" / "eval").exists()
    assert (tmp_path / "runs" / "notes.txt").read_text() == "mine"


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc, a folder no one can write")
def test_a_new_folder_where_nothing_can_be_written_is_a_problem_found_first() -> None:
    """``imitate --out`` and ``export_policy`` destinations: a folder that takes no new entry is
    refused before the work (imitate found it after training), as a missing one is."""
    assert new_folder_problem("/proc/imitated") is not None
    assert new_folder_problem("/proc/self") is not None  # not empty


def test_a_new_folder_inside_a_runs_checkpoint_folder_is_a_problem(tmp_path: Path) -> None:
    """``export_policy <run>/checkpoints <run>/checkpoints/99`` was accepted; the run's next
    ``--resume`` deleted the export (its saves take numbered folders there for their own steps)."""
    checkpoints = tmp_path / "run" / "checkpoints"
    (checkpoints / "12" / "meta").mkdir(parents=True)
    assert "inside a run's checkpoint folder" in new_folder_problem(checkpoints / "99")
    assert "inside a run's checkpoint folder" in new_folder_problem(checkpoints / "policy")
    assert new_folder_problem(tmp_path / "run" / "exported") is None


def test_a_folder_that_cannot_be_written_is_named_as_such(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An existing folder the command may not write is "not writable" (a resumed run's read-only
    folder), a missing one under it "cannot be created". (``os.access`` stands in for a read-only
    mount: root writes anywhere else.)"""
    run = tmp_path / "run"
    run.mkdir()
    monkeypatch.setattr(run_dirs.os, "access", lambda path, mode: Path(path) != run)
    with pytest.raises(RunDirError, match=r"^--run_dir '.*run' is not writable$"):
        check_dir("--run_dir", run, must_exist=True)
    with pytest.raises(RunDirError, match=r"cannot be created: '.*run' is not writable$"):
        check_dir("--run_dir", run / "checkpoints")


def test_an_abandoned_stage_is_removed_even_when_a_writer_adds_to_it_late(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop signal during ``export_policy``'s save left ``.out.<id>.partial`` behind (2 tries in
    40): orbax's threads wrote into the staged folder after it was removed. Here the late write
    happens right after the first removal, every time."""
    from slamorl_jax.run_dirs import staged_new_folder

    real_rmtree = run_dirs.shutil.rmtree
    removals: list[Path] = []

    def rmtree_then_a_late_write(path: Path, ignore_errors: bool = False) -> None:
        real_rmtree(path, ignore_errors=ignore_errors)
        removals.append(Path(path))
        if len(removals) == 1:  # a writer thread's file lands after the first pass
            (Path(path) / "policy.orbax-checkpoint-tmp").mkdir(parents=True)
            (Path(path) / "policy.orbax-checkpoint-tmp" / "chunk").write_bytes(b"late")

    monkeypatch.setattr(run_dirs.shutil, "rmtree", rmtree_then_a_late_write)
    with pytest.raises(RuntimeError, match="save failed"), staged_new_folder(tmp_path / "out"):
        raise RuntimeError("save failed")
    assert len(removals) == 2 and list(tmp_path.iterdir()) == []


def test_one_folder_named_twice_is_locked_once(tmp_path: Path) -> None:
    """Two paths to one folder (here a symlink) took its lock twice, and the run's second ``flock``
    failed against its own first: a false "in use by another training run"."""
    (tmp_path / "run").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "run")
    held, busy = run_dirs.lock_run_dirs(
        [("--checkpoint_dir", tmp_path / "run"), ("--log_dir", tmp_path / "alias")]
    )
    try:
        assert busy is None and len(held) == 1
    finally:
        for fd in held:
            run_dirs.unlock_run_dir(fd)


def test_a_new_folder_behind_a_link_is_judged_where_the_link_points(tmp_path: Path) -> None:
    """The policy is saved where a link points; a link to nowhere passed the checks and the save
    failed after the work it was to hold."""
    (tmp_path / "nowhere").symlink_to(tmp_path / "missing-root" / "deep")
    (tmp_path / "missing-root").write_text("a file, so nothing can be made under it\n")
    assert new_folder_problem(tmp_path / "nowhere" / "x") is not None
    (tmp_path / "somewhere").mkdir()
    (tmp_path / "there").symlink_to(tmp_path / "somewhere")
    assert new_folder_problem(tmp_path / "there" / "x") is None

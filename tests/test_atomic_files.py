"""``atomic_files.publish_staged``: several files published as one set, or none of them changed."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

import slamorl_jax.atomic_files as atomic_files
from slamorl_jax.atomic_files import publish_staged, stage_text, staging


def publish(targets: dict[Path, str]) -> None:
    with staging() as staged:
        staged.extend((stage_text(path, text), path) for path, text in targets.items())
        publish_staged(staged)


@pytest.mark.parametrize("hard_links", [True, False])
def test_a_failed_rename_puts_back_what_the_ones_before_it_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hard_links: bool
) -> None:
    if not hard_links:  # FAT and some network filesystems: the old file is copied instead

        def no_links(src: object, dst: object, **kwargs: object) -> None:
            raise PermissionError(errno.EPERM, "Operation not permitted")

        monkeypatch.setattr(atomic_files.os, "link", no_links)
    report, table, turned_folder = tmp_path / "report.json", tmp_path / "table.md", tmp_path / "plot.png"
    report.write_text("old report")
    turned_folder.mkdir()  # made a folder by someone else since the names were checked
    with pytest.raises(OSError):
        publish({report: "new report", table: "new table", turned_folder: "new plot"})
    assert report.read_text() == "old report"  # put back
    assert not table.exists()  # had no file: removed again
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plot.png", "report.json"]  # no copies left


def test_a_whole_set_replaces_the_old_one_and_leaves_nothing_else(tmp_path: Path) -> None:
    report, table = tmp_path / "report.json", tmp_path / "table.md"
    report.write_text("old report")
    publish({report: "new report", table: "new table"})
    assert (report.read_text(), table.read_text()) == ("new report", "new table")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "table.md"]


def test_a_link_to_nothing_is_put_back_as_it_was(tmp_path: Path) -> None:
    report, turned_folder = tmp_path / "report.json", tmp_path / "plot.png"
    report.symlink_to(tmp_path / "elsewhere.json")  # dangling: a link to a file not made yet
    turned_folder.mkdir()
    with pytest.raises(OSError):
        publish({report: "new report", turned_folder: "new plot"})
    assert report.is_symlink() and report.readlink() == tmp_path / "elsewhere.json"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plot.png", "report.json"]


def test_a_copy_that_fails_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_links(src: object, dst: object, **kwargs: object) -> None:
        raise PermissionError(errno.EPERM, "Operation not permitted")

    def disk_full(src: object, dst: object, **kwargs: object) -> None:
        Path(str(dst)).write_text("half")  # a copy cut short
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic_files.os, "link", no_links)
    monkeypatch.setattr(atomic_files.shutil, "copy2", disk_full)
    report = tmp_path / "report.json"
    report.write_text("old report")
    with pytest.raises(OSError, match="No space left"):
        publish({report: "new report"})
    assert report.read_text() == "old report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]

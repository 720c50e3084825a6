"""Files written whole or not at all: a temporary file in the target's folder, then one rename.

A failed write (a full disk, a file-size limit) or a Ctrl-C under
:func:`slamorl_jax.cli_args.run_command` removes the temporary file and leaves an existing target as
it was, so a store or report that a command replaces is never left cut short.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from slamorl_jax.cli_args import cleanup_on_interrupt, stop_signals_deferred

#: The longest part of the target's name a temporary file's name repeats (bytes): with the dot, the
#: random part and ``.tmp`` it stays under the 255 bytes of common file systems for any target name.
NAME_IN_TEMPORARY = 200


def temporary_beside(path: str | Path) -> Path:
    """A new empty file in ``path``'s folder, named to be hidden and recognisable beside it, for
    writing what will replace ``path`` (the folder must exist)."""
    path = Path(path)
    name = os.fsencode(path.name)[:NAME_IN_TEMPORARY].decode(errors="ignore")
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    return Path(tmp)


def stage_text(path: str | Path, text: str) -> Path:
    """``text`` (UTF-8) written whole and flushed to disk in a :func:`temporary_beside` ``path``; the
    temporary file, for ``os.replace`` onto ``path`` (removed again if the write fails)."""
    tmp = temporary_beside(path)
    try:
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def write_text_atomically(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` whole or not at all (module docstring). The folder must
    exist: a mistyped path makes no new folders."""
    with staging() as staged:
        staged.append((stage_text(path, text), Path(path)))
        publish_staged(staged)


#: What ``os.link`` raises on a filesystem without hard links (FAT, exFAT, some network and FUSE ones).
NO_HARD_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK}


def write_new_text_atomically(path: str | Path, text: str) -> None:
    """:func:`write_text_atomically` for a file that must not exist yet: published by a hard link,
    which fails (``FileExistsError``) rather than replace a file another program made meanwhile. On a
    filesystem without hard links, the name is claimed by an exclusive create (the same
    ``FileExistsError``), then replaced by the whole file in one rename (:func:`publish_new`)."""
    with staging() as staged:
        staged.append((stage_text(path, text), Path(path)))
        publish_staged(staged, replace=False)


def publish_new(tmp: Path, path: str | Path) -> None:
    """Give the staged file ``tmp`` the name ``path``, which must not exist (``FileExistsError``):
    a hard link, or on a filesystem without them an exclusive create of the name, then a rename."""
    try:
        os.link(tmp, path)
    except OSError as err:
        if isinstance(err, FileExistsError) or err.errno not in NO_HARD_LINKS:
            raise
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        try:
            os.replace(tmp, path)
        except BaseException:
            Path(path).unlink(missing_ok=True)  # the empty placeholder claimed the name: not a file
            raise


@contextmanager
def staging() -> Iterator[list[tuple[Path, Path]]]:
    """A list for the block to put ``(temporary, target)`` pairs in (:func:`stage_text`,
    :func:`temporary_beside`) and hand to :func:`publish_staged`: whatever temporary file is left
    when the block ends, fails, or a stop signal ends the process inside it, is removed."""
    staged: list[tuple[Path, Path]] = []

    def remove_staged() -> None:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)

    with cleanup_on_interrupt(remove_staged):
        try:
            yield staged
        finally:
            remove_staged()


def publish_staged(staged: Sequence[tuple[Path, Path]], replace: bool = True) -> None:
    """Move each ``(temporary, target)`` pair's staged file onto its target, each whole, all or none:
    a stop signal waits for the renames to end, so they all happen. ``replace=False`` publishes each
    by :func:`publish_new`, which fails (``FileExistsError``) where a target exists, as another
    program may have made one since it was checked; the targets this call had already published are
    then removed again, so none is left beside another run's. With ``replace=True`` a rename that
    fails (a target turned into a folder meanwhile) puts back the files the ones before it replaced
    (kept under a temporary name until all are published), so the targets stay one set. The
    temporary files stay for the caller to remove (:func:`staging`)."""
    with stop_signals_deferred():
        if replace:
            _replace_all(staged)
            return
        published: list[Path] = []
        for tmp, path in staged:
            try:
                publish_new(tmp, path)
            except BaseException:
                for done in published:
                    done.unlink(missing_ok=True)
                raise
            published.append(path)


def _replace_all(staged: Sequence[tuple[Path, Path]]) -> None:
    """``os.replace`` each staged file onto its target; if one fails, every target replaced before it
    gets its old file back (or, where it had none, is removed) before the error is raised."""
    replaced: list[tuple[Path, Path | None]] = []  # each target and its old file's copy, if it had one
    copies: list[Path] = []  # every copy made, removed whatever happens (a stop signal included)

    def remove_copies() -> None:
        for old in copies:
            old.unlink(missing_ok=True)

    with cleanup_on_interrupt(remove_copies):
        try:
            for tmp, path in staged:
                old = _keep_old(path)
                if old is not None:
                    copies.append(old)
                os.replace(tmp, path)
                replaced.append((path, old))
        except BaseException:
            for path, old in reversed(replaced):
                try:
                    if old is None:
                        path.unlink(missing_ok=True)
                    else:
                        os.replace(old, path)
                except OSError:  # best effort; a copy that could not go back stays beside its target
                    if old is not None:
                        copies.remove(old)
            raise
        finally:
            remove_copies()


def _keep_old(path: Path) -> Path | None:
    """A copy of what ``path`` names (a file or a link, even one to nothing) under a temporary name
    beside it (a hard link, else a copy), or ``None`` where it names nothing (or a folder, which a
    rename onto it fails on anyway); nothing is left behind when the copy fails."""
    if not os.path.lexists(path) or path.is_dir():
        return None
    old = temporary_beside(path)
    old.unlink()
    try:
        try:
            os.link(path, old, follow_symlinks=False)
        except OSError as err:
            if err.errno not in NO_HARD_LINKS:
                raise
            shutil.copy2(path, old, follow_symlinks=False)
    except BaseException:
        old.unlink(missing_ok=True)
        raise
    return old


def probe_writable(path: str | Path) -> None:
    """Create and remove a file named like :func:`write_text_atomically`'s temporary one beside
    ``path``: ``OSError`` where that write would fail (a folder that cannot be written, a name too
    long), found before the work whose result it is to hold."""
    temporary_beside(path).unlink()

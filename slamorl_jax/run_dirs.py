"""A training run's output directories: checked and created up front, removed again if the run
leaves nothing worth keeping.

``create_run_dirs`` makes every missing directory (with its missing parents) before anything is
compiled, so a path that is a file, unwritable or impossible fails at once with one line naming the
flag; it remembers what it created, and ``remove_created`` deletes the directories the command asked
for with what it wrote inside, then their new parents only if they are empty (used when a run
ends before its first checkpoint: bad input found late, Ctrl-C while compiling). A new parent may
have been shared since (runs of a sweep started into one new folder), so it is never deleted whole.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from slamorl_jax.atomic_files import probe_writable


class RunDirError(ValueError):
    """An output directory cannot be used (the message names the flag and the path)."""


def _missing_ancestors(path: Path) -> list[Path]:
    """``path`` and its parents that do not exist yet, top-most first."""
    missing = []
    for candidate in (path, *path.parents):
        if candidate.exists():
            break
        missing.append(candidate)
    return missing[::-1]


def _nearest_existing(path: Path) -> Path | None:
    """``path`` if it exists, else its nearest existing parent; ``None`` when none exists (a
    relative path under a working directory that was deleted)."""
    missing = _missing_ancestors(path)
    if not missing:
        return path
    parent = missing[0].parent
    return parent if parent != missing[0] else None


def unusable_path(error: OSError | ValueError) -> str:
    """Why the filesystem refused to even look a path up (a name too long, a NUL byte, a folder it
    may not search), as ``not a usable path: <reason>``."""
    return f"not a usable path: {getattr(error, 'strerror', None) or error}"


def dir_problem(path: Path, must_exist: bool = False) -> str | None:
    """Why ``path`` cannot serve as a directory to write into (``None`` when it can), as the end of a
    sentence that starts with the path: a file, missing (with ``must_exist``), or not writable; a
    missing folder can serve when its nearest existing parent is a writable folder."""
    if "\0" in str(path):
        return "is not a usable path: it holds a NUL byte"
    try:
        existing = _nearest_existing(path)
    except (OSError, ValueError) as err:  # a NUL byte, a name too long, an unreadable parent
        return f"is {unusable_path(err)}"
    if existing == path and not path.is_dir():
        return "is a file, not a directory"
    if must_exist and existing != path:
        return "does not exist"
    if existing is None:
        return None
    if not existing.is_dir():
        return f"cannot be created: {str(existing)!r} is a file"
    # os.access answers for the permission bits only (root passes it on /proc, a read-only mount
    # passes it too): a file made and removed there is the answer, before any work is done.
    writable = os.access(existing, os.W_OK | os.X_OK)
    try:
        if writable:
            probe_writable(existing / "probe")
    except OSError:
        writable = False
    if writable:
        return None
    return "is not writable" if existing == path else f"cannot be created: {str(existing)!r} is not writable"


def check_dir(flag: str, path: Path, must_exist: bool = False) -> None:
    """Raise :class:`RunDirError` if ``path`` cannot serve as the directory of ``flag``
    (:func:`dir_problem`)."""
    if problem := dir_problem(path, must_exist):
        raise RunDirError(f"{flag} {str(path)!r} {problem}")


def check_dirs(dirs: Iterable[tuple[str, Path]]) -> None:
    """:func:`check_dir` of each ``(flag, path)``, in order: what :func:`create_run_dirs` checks
    before it makes anything."""
    for flag, path in dirs:
        check_dir(flag, path)


class CreatedDirs(NamedTuple):
    """What :func:`create_run_dirs` created: the directories the command asked for, and their new
    parents (top-most first)."""

    own: list[Path]
    parents: list[Path]


def create_run_dirs(dirs: Iterable[tuple[str, Path]]) -> CreatedDirs:
    """Create each ``(flag, path)`` directory; return what was created (:class:`CreatedDirs`)."""
    dirs = list(dirs)
    check_dirs(dirs)
    created = CreatedDirs([], [])
    for flag, path in dirs:
        new = _missing_ancestors(path)
        try:
            path.mkdir(parents=True, exist_ok=True)
        except (OSError, ValueError) as err:
            # mkdir may have made some of the missing parents before it failed: they go too if empty
            remove_created(CreatedDirs(created.own, [*created.parents, *(p for p in new if path_exists(p))]))
            raise RunDirError(
                f"{flag} {str(path)!r} cannot be created: {getattr(err, 'strerror', None) or err}"
            ) from None
        if new:
            created.own.append(new[-1])
            created.parents.extend(new[:-1])
    return created


def remove_created(created: CreatedDirs, only_empty: bool = False) -> None:
    """Undo :func:`create_run_dirs`: the directories the command asked for are deleted with what it
    wrote inside (only if empty with ``only_empty``: another run may be writing there); their new
    parents only when empty, deepest first (another command may have written into them since: runs
    of a sweep started into one new folder)."""
    if not only_empty:
        for path in created.own:
            shutil.rmtree(path, ignore_errors=True)
    for path in sorted({*created.own, *created.parents}, key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):  # not empty (or already gone): not this command's to remove
            path.rmdir()


def path_exists(path: str | Path) -> bool:
    """``Path(path).exists()``, ``False`` for a path the OS cannot even look up (a NUL byte)."""
    try:
        return Path(path).exists()
    except (OSError, ValueError):
        return False


def new_folder_problem(path: str | Path) -> str | None:
    """Why ``path`` cannot take a checkpoint of its own (an exported or pre-trained policy), or
    ``None`` when it can: it must be absent or an empty folder, not inside a run's checkpoint
    folder, at a path the filesystem can hold (not a name too long), whose nearest existing folder
    can be written (a file is made and removed to find out, before the work it is to hold). Missing
    parents are fine, as for ``train``'s folders: the checkpoint's save creates them, so a command
    that fails before it leaves none."""
    path = Path(path)
    if "\0" in str(path):
        return "not a path (it holds a NUL byte)"
    try:
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            return "must be a new or empty folder"
        real = Path(os.path.realpath(path))  # where the policy goes: a link's folder, not the link
        if real.exists() and (os.path.ismount(real) or real == Path.cwd().resolve()):
            # The new folder replaces it by a rename, which a mount point refuses, and which would
            # leave a shell in the current folder standing in a deleted one.
            where = "a mount point" if os.path.ismount(real) else "the current folder"
            return f"is {where}: name a new folder inside it"
        if checkpoint_marks(real.parent):
            # A run's checkpoint folder: its next save takes numbered folders for its own steps and
            # deletes them past --keep; --resume removed a policy exported into one.
            return "is inside a run's checkpoint folder (it holds numbered steps): choose a folder outside it"
        # The folders the save makes: those a link names when the path goes through one (the path
        # as typed otherwise, so a refusal names what the user wrote).
        made = real if real != Path(os.path.abspath(path)) else path
        missing = _missing_ancestors(made)
        existing = _nearest_existing(made)
        if existing is None:
            return "cannot be created: no folder on its path exists"
        if not existing.is_dir():
            return f"cannot be created: {str(existing)!r} is a file"
        probe_writable(missing[0] if missing else made / "probe")
    except (OSError, ValueError) as err:  # a name too long, a folder it may not list or write
        return unusable_path(err)
    return None


def new_folder_undo(path: str | Path) -> Callable[[], None]:
    """What removes a checkpoint that a command saved into ``path`` but was stopped before it
    announced (``imitate``, ``export_policy``): ``path``'s contents, ``path`` itself if it is new, and
    its new parents when left empty. Only a ``path`` absent or empty now (as
    :func:`new_folder_problem` requires) is undone: one that holds anything already is left as it is.
    The caller runs it only once its own save completed (a save stopped half-way removes its staged
    files itself: :func:`staged_new_folder`)."""
    path = Path(path)
    created = CreatedDirs([], [])
    ours = False  # a folder that already holds something is not the new checkpoint's: left alone
    with contextlib.suppress(OSError, ValueError):
        missing = _missing_ancestors(path)
        created = CreatedDirs(missing[-1:], missing[:-1])
        ours = bool(missing) or (path.is_dir() and not any(path.iterdir()))

    def undo() -> None:
        if not ours:
            return
        if created.own:
            remove_created(created)
            return
        with contextlib.suppress(OSError):
            for child in path.iterdir():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    child.unlink(missing_ok=True)

    return undo


#: How often, and how far apart, an abandoned staged folder is removed (``staged_new_folder``).
STAGE_REMOVAL_PASSES = 10
STAGE_SETTLE_S = 0.02


@contextlib.contextmanager
def staged_new_folder(destination: str | Path) -> Iterator[Path]:
    """A private folder beside ``destination`` to write a new folder's contents into, renamed to
    ``destination`` when the block ends (which must then be absent or an empty folder:
    ``FileExistsError`` otherwise). If the block fails, or a stop signal ends the process inside it
    (``cli_args.cleanup_on_interrupt``), the staged folder goes, with the parents it made when left
    empty. So a half-written folder never appears at ``destination``, and a run that loses the race
    for it to another removes only its own files."""
    from slamorl_jax.cli_args import cleanup_on_interrupt

    # A link to an empty folder: the new folder replaces the folder it names (a rename onto the
    # link itself would fail, as if the folder had been filled meanwhile).
    destination = Path(os.path.realpath(destination))
    missing = _missing_ancestors(destination.parent)
    destination.parent.mkdir(parents=True, exist_ok=True)
    # mkdir (not mkdtemp, whose folder is private to its owner) so the result has the umask's mode.
    stage = destination.parent / f".{destination.name}.{uuid.uuid4().hex[:12]}.partial"
    stage.mkdir()

    def remove() -> None:
        # A writer's threads (orbax's) may still be writing when a failure or a signal gets here,
        # and put files back into the removed folder: it is removed until it stays gone.
        for _ in range(STAGE_REMOVAL_PASSES):
            shutil.rmtree(stage, ignore_errors=True)
            time.sleep(STAGE_SETTLE_S)
            if not stage.exists():
                break
        remove_created(CreatedDirs([], missing), only_empty=True)

    placed = False
    try:
        with cleanup_on_interrupt(remove):
            yield stage
            try:
                os.rename(stage, destination)  # replaces an empty folder; refuses one that holds anything
            except OSError as err:
                if err.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):
                    raise FileExistsError(
                        errno.EEXIST, "filled by another program meanwhile", str(destination)
                    ) from None
                raise
            placed = True
    finally:
        if not placed:
            remove()


def checkpoint_marks(checkpoint_dir: Path) -> set[tuple[str, int]]:
    """(step, modification time) of every checkpoint step in ``checkpoint_dir``: it changes when a
    run saves one."""
    try:
        steps = [p for p in checkpoint_dir.iterdir() if p.name.isdigit() and (p / "meta").exists()]
        return {(p.name, (p / "meta").stat().st_mtime_ns) for p in steps}
    except OSError:
        return set()


def lock_run_dir(directory: Path) -> int | None:
    """Take the training lock of ``directory`` (an exclusive ``flock`` on the folder itself, so no
    file is added to it): the open descriptor that holds it (close it to release; the OS releases it
    when the process ends), ``-1`` where the platform or file system has no ``flock`` (the run goes
    on unlocked), or ``None`` when another process holds it (two runs saving into one folder would
    interleave their checkpoints and logs)."""
    try:
        import fcntl
    except ImportError:  # Windows
        return -1
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # a folder that cannot be opened for reading cannot be locked: run unlocked
        return -1
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:  # another process holds it
        os.close(fd)
        return None
    except OSError:  # a file system without flock (some network mounts): run unlocked
        os.close(fd)
        return -1
    return fd


def lock_run_dirs(folders: list[tuple[str, Path]]) -> tuple[list[int], tuple[str, Path] | None]:
    """Take :func:`lock_run_dir` on each of a run's ``(flag, folder)`` pairs (its checkpoints and its
    logs: two runs logging into one folder replaced each other's metrics), a folder named twice once:
    the descriptors held and ``None``, or none held and the first ``(flag, folder)`` another process
    holds."""
    held: list[int] = []
    seen: set[tuple[int, int]] = set()
    for flag, folder in folders:
        try:  # one folder by two paths (a symlink, a bind mount): its lock is taken once
            status = os.stat(folder)
            identity = (status.st_dev, status.st_ino)
        except OSError:  # not there to lock (lock_run_dir runs unlocked then)
            identity = (-1, len(seen))
        if identity in seen:
            continue
        seen.add(identity)
        fd = lock_run_dir(folder)
        if fd is None:
            for taken in held:
                unlock_run_dir(taken)
            return [], (flag, folder)
        held.append(fd)
    return held, None


def unlock_run_dir(fd: int | None) -> None:
    """Release a lock :func:`lock_run_dir` took (nothing for ``None`` or ``-1``)."""
    if fd is not None and fd >= 0:
        with contextlib.suppress(OSError):
            os.close(fd)


RUNS_ROOT = Path("runs")  # relative: the default outputs of train and evaluate go under the working folder


def stamped_folder(prefix: str = "") -> Path:
    """``runs/<prefix><YYYYmmdd-HHMMSS>``: the folder a command writes to when none is named."""
    return RUNS_ROOT / time.strftime(f"{prefix}%Y%m%d-%H%M%S")


def claim_stamped_folder(prefix: str = "") -> tuple[Path, CreatedDirs]:
    """:func:`claim_new_folder` of :func:`stamped_folder`: commands started in the same second get
    folders of their own."""
    return claim_new_folder(stamped_folder(prefix))


def unclaimable(what: str, err: OSError) -> str:
    """The one-line error for a default folder ``what`` that cannot be created under ``runs``."""
    return f"cannot create {what} in {str(RUNS_ROOT.absolute())!r}: {err.strerror or err}"


def claim_new_folder(base: Path) -> tuple[Path, CreatedDirs]:
    """Create a folder named ``base`` (``base-2``, ``base-3``, ... when taken) atomically, so that
    commands started in the same second never share a default folder; the folder and what was
    created (for :func:`remove_created`)."""
    parents = _missing_ancestors(base.parent)
    base.parent.mkdir(parents=True, exist_ok=True)
    suffix = 1
    while True:
        folder = base if suffix == 1 else base.with_name(f"{base.name}-{suffix}")
        try:
            folder.mkdir()
        except FileExistsError:
            suffix += 1
            continue
        return folder, CreatedDirs([folder], parents)

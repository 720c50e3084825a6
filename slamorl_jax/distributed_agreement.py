"""The processes of a multi-process run agree to start, or all stop with the reason one of them gave.

Each process checks its own flags and folders after joining the run (``distributed_start``). Without
an agreement, a process that refused (a ``--run_dir`` its host cannot create, a flag it was given
differently) exits with its one line, while the others go on into training and fail 30 s later at
their first collective with an error of the collectives' library that names no cause.

So every process posts "ready" or its refusal to the coordination service's key-value store (no
device and nothing compiled), waits until all have posted, reads every post, and waits again until
all have read (process 0 serves the store, so it must not leave before the others have read). Then
either all start, or all stop with a line naming the first process that refused and why. The
coordination service's client is JAX's own, as orbax reaches it (``jax._src.distributed``).
"""

from __future__ import annotations

import json
import sys
import uuid
from contextlib import suppress
from functools import partial
from pathlib import Path
from typing import Any

from slamorl_jax.cli_args import cleanup_on_interrupt, first_line

READY = "ready"
REFUSED = "refused: "
KEY_PREFIX = "slamorl_jax/start"


class StartRefusedError(ValueError):
    """A process of the run refused to start (the message names it and its reason)."""


_agreed: list[bool] = [False]  # one agreement per process: a later failure is each process's own


def _client() -> tuple[Any, int, int] | None:
    """``(client, process id, process count)`` of the multi-process run this process joined, else
    ``None``."""
    if "jax" not in sys.modules:  # nothing joined yet: do not start JAX for the question
        return None
    from jax._src import distributed

    state = distributed.global_state
    if state.client is None or state.num_processes is None or state.num_processes < 2:
        return None
    return state.client, int(state.process_id), int(state.num_processes)


def agreement_pending() -> bool:
    """Whether this process is in a multi-process run whose processes have not yet agreed to start."""
    return not _agreed[0] and _client() is not None


def settings_difference(mine: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    """The names of the settings two processes hold differently (sorted)."""
    return sorted(name for name in mine.keys() | theirs.keys() if mine.get(name) != theirs.get(name))


def agree_to_start(
    refusal: str | None,
    timeout_s: int,
    settings: dict[str, Any] | None = None,
    shared_folder: Path | None = None,
) -> None:
    """Post this process's ``refusal`` (``None``: ready, with its ``settings``: a run's processes must
    train the same config), wait for every other process's post (at most ``timeout_s`` seconds a
    wait), and raise :class:`StartRefusedError` when any process refused (the lowest-numbered one's
    reason; this process's own when it refused) or holds other settings than process 0 (naming
    them: processes given different flags failed later, in a collective, naming none). Then, with
    ``shared_folder``, every process must see a file process 0 writes there (:func:`check_shared`).
    Once per process; a single-process run only raises on its own refusal."""
    joined = _client()
    if joined is None or _agreed[0]:
        if refusal is not None:
            raise StartRefusedError(refusal)
        return
    _agreed[0] = True
    client, me, count = joined
    timeout_ms = int(timeout_s) * 1000
    posts: list[str] = []
    try:
        post = REFUSED + refusal if refusal is not None else READY + json.dumps(settings, sort_keys=True)
        client.key_value_set(f"{KEY_PREFIX}/{me}", post)
        client.wait_at_barrier(f"{KEY_PREFIX}/posted", timeout_ms)
        posts = [client.blocking_key_value_get(f"{KEY_PREFIX}/{i}", timeout_ms) for i in range(count)]
        client.wait_at_barrier(f"{KEY_PREFIX}/read", timeout_ms)
    except Exception as err:  # the client raises JAX's runtime errors, whose class moves between versions
        if refusal is not None:
            raise StartRefusedError(refusal) from None
        if not posts:
            raise StartRefusedError(
                f"not every process of the run reached its start within {timeout_s} s "
                f"(--distributed_init_timeout_s): {first_line(err)}"
            ) from None
    if refusal is not None:
        raise StartRefusedError(refusal)
    for i, post in enumerate(posts):
        if post.startswith(REFUSED):
            raise StartRefusedError(f"process {i} of {count} cannot start: {post[len(REFUSED) :]}")
    held = [json.loads(post[len(READY) :] or "null") or {} for post in posts]
    for i, theirs in enumerate(held):
        if differ := settings_difference(held[0], theirs):
            raise StartRefusedError(
                f"process {i} of {count} was given other settings than process 0 ({', '.join(differ)}); "
                "every process of a run takes the same flags"
            )
    if shared_folder is not None:
        check_shared(client, me, count, timeout_ms, Path(shared_folder))


def check_shared(client: Any, me: int, count: int, timeout_ms: int, folder: Path) -> None:
    """Raise :class:`StartRefusedError` on every process unless each of them sees, in ``folder``, the
    file process 0 wrote there: the run's processes must share its checkpoint folder (orbax writes
    one checkpoint from all of them). On separate disks, each process wrote its own folder and all
    of them waited at the first save for orbax's 600 s, then failed naming no cause. Process 0
    posts why it could not write the file, if it could not, and every process stops with that."""
    marker = folder / f".shared-folder-check-{uuid.uuid4().hex[:12]}"
    remove_marker = partial(marker.unlink, missing_ok=True)
    with cleanup_on_interrupt(remove_marker if me == 0 else lambda: None):
        try:
            if me == 0:
                try:
                    marker.write_text("a multi-process run checks that its processes share this folder\n")
                    posted = marker.name
                except OSError as err:
                    posted = REFUSED + f"process 0 cannot write in {folder}: {err.strerror or err}"
                client.key_value_set(f"{KEY_PREFIX}/shared/name", posted)
            name = client.blocking_key_value_get(f"{KEY_PREFIX}/shared/name", timeout_ms)
            try:  # a folder this process may not look into is one it does not share: it still posts
                sees = not name.startswith(REFUSED) and (folder / name).is_file()
            except OSError:
                sees = False
            client.key_value_set(f"{KEY_PREFIX}/shared/{me}", str(int(sees)))
            client.wait_at_barrier(f"{KEY_PREFIX}/shared/posted", timeout_ms)
            keys = [f"{KEY_PREFIX}/shared/{i}" for i in range(count)]
            seen = [client.blocking_key_value_get(key, timeout_ms) for key in keys]
            client.wait_at_barrier(f"{KEY_PREFIX}/shared/read", timeout_ms)
            if me == 0:
                with suppress(OSError):  # every process must reach the barrier below all the same
                    remove_marker()
            # No process goes on while the marker is there: the run's folder checks would find a
            # file that is not a checkpoint in the checkpoint folder.
            client.wait_at_barrier(f"{KEY_PREFIX}/shared/removed", timeout_ms)
        except Exception as err:  # the client's runtime errors, as above
            said = f"the processes could not compare their checkpoint folders: {first_line(err)}"
            raise StartRefusedError(said) from None
        finally:
            if me == 0:
                with suppress(OSError):
                    remove_marker()
    if name.startswith(REFUSED):
        raise StartRefusedError(name[len(REFUSED) :])
    if missing := [i for i, flag in enumerate(seen) if flag != "1"]:
        raise StartRefusedError(
            f"process {missing[0]} of {count} does not see process 0's files in {folder}: the run's "
            "folders must be on a file system every process shares"
        )

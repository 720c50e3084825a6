"""The commands' ``--compilation_cache_dir``: a folder given that cannot hold the cache is refused in
one line, the default folder that cannot (a read-only home) leaves the command without a cache, and
every argparse command takes the option (``train`` has its absl flag: ``test_train_cli.py``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from cli_harness import assert_refused, call

from slamorl_jax import compilation_cache, imitate
from slamorl_jax.history import __main__ as history_cli
from slamorl_jax.run_dirs import RunDirError


def test_a_given_folder_must_serve_and_the_default_one_is_passed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a_file").write_text("")
    assert compilation_cache.usable_cache_dir("") == ""
    new = str(tmp_path / "new" / "cache")
    assert compilation_cache.usable_cache_dir(new) == new
    with pytest.raises(RunDirError, match=r"^--compilation_cache_dir .* is a file, not a directory"):
        compilation_cache.usable_cache_dir(str(tmp_path / "a_file"))
    monkeypatch.setattr(compilation_cache, "DEFAULT_CACHE_DIR", str(tmp_path / "a_file" / "cache"))
    assert compilation_cache.usable_cache_dir(str(tmp_path / "a_file" / "cache")) == ""


@pytest.mark.parametrize(
    ("main", "argv"),
    [
        (imitate.main, ["--oracle_jobs=2", "--out={root}/out"]),
        (history_cli.main, ["build", "--out={root}/store.json", "--jobs=2"]),
    ],
    ids=["imitate", "history build"],
)
def test_imitate_and_history_build_refuse_a_cache_folder_under_a_file(
    main: Callable[[list[str]], int], argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a_file").write_text("")
    args = [a.replace("{root}", str(tmp_path)) for a in argv]
    args.append(f"--compilation_cache_dir={tmp_path}/a_file/cache")
    assert_refused(call(lambda: main(args), capsys, tmp_path), "--compilation_cache_dir", "cannot be created")


def test_the_commands_the_suite_runs_default_to_the_suites_cache() -> None:
    """``conftest.py`` names the suite's cache in JAX's variable before anything imports
    ``compilation_cache``, so the commands' default is the suite's folder, not the user's."""
    import conftest

    assert str(conftest.CACHE_DIR) == compilation_cache.DEFAULT_CACHE_DIR

"""What a training run keeps between its start and ``--resume`` besides its config, and how its
folders and bad settings are handled before anything trains (no training here)."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import pytest
from learner_fixtures import TINY

from slamorl_jax import checkpoint as ckpt
from slamorl_jax import run_dirs
from slamorl_jax.agent.config_checks import validate_config
from slamorl_jax.training_loop import (
    RunOptions,
    checkpoint_due,
    resolve_run,
    resumed_options,
    saved_run_options,
)

OPTIONS = RunOptions(
    checkpoint_dir=Path("c"), log_dir=Path("l"), save_interval=100, keep=3, eval_episodes=1024
)


def test_a_resumed_run_keeps_its_own_run_options_unless_given() -> None:
    """``--keep=50 --save_interval=2 --eval_episodes=0`` at the start used to become 3, 100 and 1,024
    on ``--resume``, whose first save then deleted 47 of the run's checkpoints."""
    started = RunOptions(
        checkpoint_dir=Path("c"), log_dir=Path("l"), save_interval=2, keep=50, eval_episodes=0
    )
    meta = saved_run_options(started)
    resumed = resumed_options(OPTIONS, meta, steps_held=10)
    assert (resumed.save_interval, resumed.keep, resumed.eval_episodes) == (2, 50, 0)
    given = dataclasses.replace(OPTIONS, keep=5, explicit_run_options=("keep",))
    assert resumed_options(given, meta, steps_held=10).keep == 5  # a flag given wins


def test_a_run_saved_before_its_options_were_recorded_keeps_what_it_holds() -> None:
    resumed = resumed_options(OPTIONS, {"update": 20}, steps_held=10)
    assert resumed.keep == 10 and resumed.save_interval == 100  # no step is deleted by a default
    assert resumed_options(OPTIONS, {"run_options": {"keep": True, "save_interval": -1}}, 2).keep == 3


def test_runs_started_in_the_same_second_get_folders_of_their_own(tmp_path: Path) -> None:
    base = tmp_path / "runs" / "20261204-120000"
    first, made = run_dirs.claim_new_folder(base)
    second, _ = run_dirs.claim_new_folder(base)
    assert first == base and second == base.with_name("20261204-120000-2") and second.is_dir()
    assert made.own == [base] and made.parents == [tmp_path / "runs"]
    run_dirs.remove_created(made)
    assert not base.exists() and (tmp_path / "runs").is_dir()  # the other run's folder stays


def test_train_and_evaluate_name_their_default_folders_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One helper names both commands' default folders (``runs/<stamp>``, ``runs/eval-<stamp>``)."""
    monkeypatch.chdir(tmp_path)
    run, _ = run_dirs.claim_stamped_folder()
    evaluation, _ = run_dirs.claim_stamped_folder("eval-")
    assert run.parent == evaluation.parent == Path("runs") and run.is_dir() and evaluation.is_dir()
    assert re.fullmatch(r"\d{8}-\d{6}", run.name) and re.fullmatch(r"eval-\d{8}-\d{6}", evaluation.name)
    message = run_dirs.unclaimable("the run's folder", PermissionError(13, "Permission denied"))
    assert message == f"cannot create the run's folder in {str(tmp_path / 'runs')!r}: Permission denied"


def test_a_folder_that_cannot_be_made_leaves_none_of_its_new_parents(tmp_path: Path) -> None:
    too_long = tmp_path / "new" / ("a" * 300)
    with pytest.raises(run_dirs.RunDirError, match="cannot be created"):
        run_dirs.create_run_dirs([("--checkpoint_dir", too_long)])
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("field", ["entropy_coef", "value_coef", "learning_rate"])
def test_settings_beyond_float32_are_refused(field: str) -> None:
    """1e39 passed the finiteness check as a Python float and became ``inf`` in the learner (exit 3
    after compiling instead of one line and exit 2)."""
    with pytest.raises(ValueError, match=f"--{field} must be a finite number within float32's range"):
        validate_config(dataclasses.replace(TINY, **{field: 1e39}))


@pytest.mark.parametrize(
    ("change", "phrase"),
    [
        ({"value_coef": math.inf}, "--value_coef must be a finite number"),
        ({"max_grad_norm": math.nan}, "--max_grad_norm must be a finite number"),
        ({"num_envs": 16.5}, "--num_envs must be int, got 16.5"),
        ({"num_envs": True}, "--num_envs must be int, got True"),
        ({"num_envs": "16"}, "--num_envs must be int, got '16'"),
        ({"seed": 1.5}, "--seed must be int"),
        ({"hidden_sizes": (64.5,)}, "--hidden_sizes must be a sequence of integers"),
        ({"preference": [1, 0, 0]}, "--preference must be str | None"),
        ({"num_envs": 2**40}, "--num_envs must be at most"),
        ({"total_timesteps": 1}, "is less than one update"),
    ],
)
def test_the_python_api_refuses_what_the_command_line_refuses(change: dict, phrase: str) -> None:
    """``validate_config`` (which ``make_train`` calls) checks types, finiteness, sizes and the budget
    as ``train`` does: these passed it and failed later, deep in JAX or as a nan loss."""
    with pytest.raises(ValueError, match=re.escape(phrase)):
        validate_config(dataclasses.replace(TINY, **change))


def test_logs_of_a_run_that_saved_no_checkpoint_are_not_told_to_resume(tmp_path: Path) -> None:
    """A run killed before its first save: starting it again was told to ``--resume``, and
    ``--resume`` then found no checkpoint; each now says what to do."""
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "metrics.jsonl").write_text("{}\n")
    options = RunOptions(checkpoint_dir=tmp_path / "checkpoints", log_dir=tmp_path / "logs")
    with pytest.raises(ckpt.CheckpointError, match=r"no run's checkpoint beside them.*remove them"):
        resolve_run(TINY, options)
    with pytest.raises(ckpt.CheckpointError, match="saved no checkpoint before it stopped"):
        resolve_run(TINY, dataclasses.replace(options, resume=True))
    # Told the same (and so to delete good logs) where the checkpoints were there but set aside as
    # damaged, or where --checkpoint_dir named one step of a run instead of the run's folder.
    (tmp_path / "checkpoints" / "damaged-8").mkdir()
    with pytest.raises(ckpt.CheckpointError, match=r"set aside as damaged \(damaged-8\)"):
        resolve_run(TINY, dataclasses.replace(options, resume=True))
    (tmp_path / "checkpoints" / "8" / "meta").mkdir(parents=True)
    step = dataclasses.replace(options, resume=True, checkpoint_dir=tmp_path / "checkpoints" / "8")
    with pytest.raises(ckpt.CheckpointError, match=r"is one checkpoint step .* pass --checkpoint_dir="):
        resolve_run(TINY, step)


def test_checkpoints_keep_to_the_multiples_of_save_interval() -> None:
    """Chunks of 2 updates, --save_interval=3: saved at 4, 6, 10, 12, 16, ... (the first chunk end at
    or past each multiple); counting 3 from the last save gave 4, 8, 12, 16 (every 4th update)."""
    last, saved = 0, []
    for update in range(2, 21, 2):
        if checkpoint_due(update, last, 3):
            last = update
            saved.append(update)
    assert saved == [4, 6, 10, 12, 16, 18]
    # The default cadence (100 updates in chunks of 10) and a save a signal forced off the multiples.
    assert [u for u in range(10, 301, 10) if checkpoint_due(u, u - 10, 100)] == [100, 200, 300]
    assert not checkpoint_due(140, 137, 100) and checkpoint_due(200, 137, 100)

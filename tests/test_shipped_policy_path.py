"""Every command's default ``--checkpoint`` finds the shipped policy from any working directory of a
checkout, and a missing or empty one is refused in a line that says what to do. Run from another
folder, ``recommend`` said "'checkpoints/default' does not exist", and ``--checkpoint=`` named the
working directory as the checkpoint that was not there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_harness import assert_refused, call

from slamorl_jax import evaluate, recommend, shipped_policy
from slamorl_jax.shipped_policy import CHECKOUT_POLICY, SHIPPED_POLICY, resolve_checkpoint

REPO_ROOT = Path(__file__).resolve().parent.parent


def test_the_default_resolves_to_the_checkout_from_another_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert CHECKOUT_POLICY == REPO_ROOT / SHIPPED_POLICY and CHECKOUT_POLICY.is_dir()
    assert resolve_checkpoint("--checkpoint", SHIPPED_POLICY) == str(CHECKOUT_POLICY)
    (tmp_path / SHIPPED_POLICY).mkdir(parents=True)  # the working directory's own comes first
    assert resolve_checkpoint("--checkpoint", SHIPPED_POLICY) == SHIPPED_POLICY


def test_missing_and_empty_checkpoints_say_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(shipped_policy, "CHECKOUT_POLICY", tmp_path / "installed" / SHIPPED_POLICY)
    with pytest.raises(ValueError, match=r"shipped policy is in the repository.*pass --checkpoint=PATH"):
        resolve_checkpoint("--checkpoint", SHIPPED_POLICY)
    with pytest.raises(ValueError, match=r"^--compare 'other' does not exist$"):
        resolve_checkpoint("--compare", "other")
    with pytest.raises(ValueError, match="--checkpoint is empty"):
        resolve_checkpoint("--checkpoint", "")


def test_recommend_answers_from_another_folder_with_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    job = REPO_ROOT / "docs" / "example_job.json"
    outcome = call(lambda: recommend.main([f"--job={job}"]), capsys, tmp_path)
    assert outcome.code == 0, outcome.report()
    assert {"gpus", "cpus", "action_name"} <= set(json.loads(outcome.stdout))


@pytest.mark.parametrize("main", [recommend.main, evaluate.main], ids=["recommend", "evaluate"])
def test_an_empty_checkpoint_flag_is_named(
    main: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "job.json").write_text((REPO_ROOT / "docs" / "example_job.json").read_text())
    args = ["--job=job.json"] if main is recommend.main else ["--out_dir=out"]
    outcome = call(lambda: main([*args, "--checkpoint="]), capsys, tmp_path)
    assert_refused(outcome, "--checkpoint is empty")


def test_evaluate_compares_with_the_shipped_policy_from_another_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--compare=shipped=checkpoints/default`` passed the check from another folder, then failed
    to load: the resolved path was checked and thrown away."""
    monkeypatch.chdir(tmp_path)
    args = evaluate.parse_args([f"--compare=shipped={SHIPPED_POLICY}", "--out_dir=out"])
    assert args.compare == {"shipped": str(CHECKOUT_POLICY)} and args.checkpoint == str(CHECKOUT_POLICY)

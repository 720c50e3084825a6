"""Every command's default ``--checkpoint`` finds the shipped policy from any working directory of a
checkout or of an installed package, and a missing or empty one is refused in a line that says what
to do. Run from another folder, ``recommend`` said "'checkpoints/default' does not exist", and
``--checkpoint=`` named the working directory as the checkpoint that was not there; a package
installed from a wheel held no policy at all."""

from __future__ import annotations

import filecmp
import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_harness import assert_refused, call

from slamorl_jax import evaluate, recommend, shipped_policy
from slamorl_jax.shipped_policy import CHECKOUT_POLICY, INSTALLED_POLICY, SHIPPED_POLICY, resolve_checkpoint

REPO_ROOT = Path(__file__).resolve().parent.parent


def test_the_default_resolves_to_the_checkout_from_another_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert CHECKOUT_POLICY == REPO_ROOT / SHIPPED_POLICY and CHECKOUT_POLICY.is_dir()
    assert resolve_checkpoint("--checkpoint", SHIPPED_POLICY) == str(CHECKOUT_POLICY)
    (tmp_path / SHIPPED_POLICY).mkdir(parents=True)  # the working directory's own comes first
    assert resolve_checkpoint("--checkpoint", SHIPPED_POLICY) == SHIPPED_POLICY


def test_python_finds_the_shipped_policy_from_any_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``load_policy("checkpoints/default")`` works only from the repository's root; the public
    ``shipped_policy_path`` gives the checkout's policy, else the installed copy, else says neither."""
    import slamorl_jax

    monkeypatch.chdir(tmp_path)
    assert slamorl_jax.shipped_policy_path() == CHECKOUT_POLICY
    monkeypatch.setattr(shipped_policy, "CHECKOUT_POLICY", tmp_path / "elsewhere" / SHIPPED_POLICY)
    monkeypatch.setattr(shipped_policy, "INSTALLED_POLICY", CHECKOUT_POLICY)  # as in a wheel's install
    assert slamorl_jax.shipped_policy_path() == CHECKOUT_POLICY
    monkeypatch.setattr(shipped_policy, "INSTALLED_POLICY", tmp_path / "site-packages" / "shipped")
    with pytest.raises(FileNotFoundError, match=r"neither a checkout .* nor the installed package"):
        slamorl_jax.shipped_policy_path()


def test_missing_and_empty_checkpoints_say_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(shipped_policy, "CHECKOUT_POLICY", tmp_path / "elsewhere" / SHIPPED_POLICY)
    monkeypatch.setattr(shipped_policy, "INSTALLED_POLICY", tmp_path / "site-packages" / "shipped")
    with pytest.raises(ValueError, match=r"neither a checkout nor .* pass --checkpoint=PATH"):
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


def _same_tree(left: Path, right: Path) -> bool:
    """Whether two folders hold the same names with the same bytes, all the way down."""
    compared = filecmp.dircmp(left, right)
    if compared.left_only or compared.right_only or compared.common_funny or compared.funny_files:
        return False
    _, mismatch, errors = filecmp.cmpfiles(left, right, compared.common_files, shallow=False)
    return not mismatch and not errors and all(_same_tree(left / d, right / d) for d in compared.common_dirs)


def test_a_built_package_carries_the_shipped_policy_and_answers_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``setup.py``'s ``build_py`` (what a wheel and an sdist install run) copies the policy byte for
    byte to where ``INSTALLED_POLICY`` looks, the sdist carries it (``MANIFEST.in``), and with no
    checkout beside the package the default ``--checkpoint`` answers from that copy."""
    pytest.importorskip("setuptools", reason="the build hook needs setuptools (the [test] extra has it)")
    build_lib, egg_base = tmp_path / "build", tmp_path / "egg"
    egg_base.mkdir()
    # Everything it writes goes to tmp_path (egg_info's metadata went to the repository's root).
    command = ["setup.py", "-q", "egg_info", f"--egg-base={egg_base}", "build_py", f"--build-lib={build_lib}"]
    done = subprocess.run(
        [sys.executable, *command], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    package = build_lib / "slamorl_jax"
    built = package / INSTALLED_POLICY.relative_to(Path(shipped_policy.__file__).resolve().parent)
    assert _same_tree(REPO_ROOT / SHIPPED_POLICY, built)
    assert f"graft {SHIPPED_POLICY}" in (REPO_ROOT / "MANIFEST.in").read_text().splitlines()

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(shipped_policy, "CHECKOUT_POLICY", tmp_path / "no-checkout" / SHIPPED_POLICY)
    monkeypatch.setattr(shipped_policy, "INSTALLED_POLICY", built)
    assert resolve_checkpoint("--checkpoint", SHIPPED_POLICY) == str(built)
    job = REPO_ROOT / "docs" / "example_job.json"
    answers = []
    for flags in ([], [f"--checkpoint={CHECKOUT_POLICY}"]):  # the default, then the checkout's policy
        outcome = call(lambda f=flags: recommend.main([f"--job={job}", *f]), capsys, tmp_path)
        assert outcome.code == 0, outcome.report()
        answers.append(json.loads(outcome.stdout))
    assert answers[0] == answers[1]


def test_evaluate_adds_every_compare_flag_and_refuses_a_name_given_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--compare a=... --compare b=...`` ran ``b`` alone: each repeated flag replaced the last."""
    monkeypatch.chdir(tmp_path)
    args = evaluate.parse_args(
        [f"--compare=a={SHIPPED_POLICY}", f"--compare=b={SHIPPED_POLICY},c={SHIPPED_POLICY}", "--out_dir=out"]
    )
    assert list(args.compare) == ["a", "b", "c"]
    with pytest.raises(SystemExit) as stopped:
        evaluate.parse_args(
            [f"--compare=a={SHIPPED_POLICY}", f"--compare=a={SHIPPED_POLICY}", "--out_dir=out"]
        )
    assert stopped.value.code == 2
    assert capsys.readouterr().err.strip().endswith("--compare: name 'a' given twice")

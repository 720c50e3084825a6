"""The runs ``training_seeds --runs`` and ``weights_ablation --runs`` compare are checked to belong
together (``benchmarks/run_sets.py``). A run stopped part-way, a form mixing runs of two commands (a
severity run among the static ones, our reward with the paper's) and forms of two envs all went into
the figures without a word; the ablation evaluated every form on the first run's env."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from cli_harness import assert_refused, call
from learner_fixtures import TINY, shared_trainer

from slamorl_jax import checkpoint as ckpt
from slamorl_jax.agent.config import TrainConfig


def _run(root: Path, name: str, finished: bool = True, **changes: object) -> Path:
    """A run folder whose checkpoint holds ``TINY`` with ``changes``, at its last update or its first."""
    config = dataclasses.replace(TINY, **changes)
    state = shared_trainer(TINY).fresh()
    state = state.replace(update=config.num_updates if finished else TINY.updates_per_chunk)
    ckpt.save(ckpt.make_manager(root / name / "checkpoints"), state, config)
    return root / name


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runs")
    return {
        "static0": _run(root, "static0", weights="static", seed=0),
        "static1": _run(root, "static1", weights="static", seed=1),
        "severity0": _run(root, "severity0", weights="severity", seed=0),
        "severity1": _run(root, "severity1", weights="severity", seed=1),
        "stopped": _run(root, "stopped", finished=False, weights="static", seed=2),
        "severity_in_static": _run(root, "severity_in_static", weights="severity", seed=2),
        "paper_reward": _run(root, "paper_reward", weights="severity", seed=2, sla_met_bonus=0.0),
        "paper_reward3": _run(root, "paper_reward3", weights="severity", seed=3, sla_met_bonus=0.0),
        "static0_again": _run(root, "static0_again", weights="static", seed=0),
    }


def test_runs_of_one_command_per_form_pass_with_their_settings(runs: dict[str, Path]) -> None:
    from benchmarks.run_sets import checked_runs

    forms = {"static": [runs["static0"], runs["static1"]], "severity": [runs["severity0"], runs["severity1"]]}
    read = checked_runs(forms, "prog", ("weights",))
    assert [r.update for r in read["severity"]] == [TINY.num_updates] * 2
    assert read["static"][1].as_dict(("seed", "weights")) == {
        "run": str(runs["static1"]),
        "update": TINY.num_updates,
        "seed": 1,
        "weights": "static",
    }
    assert isinstance(read["static"][0].config, TrainConfig)


@pytest.mark.parametrize(
    ("forms", "phrases"),
    [
        ({"static": ["static0", "stopped"]}, ("--runs static:", "stopped at update 2 of 8", "--resume")),
        (
            {"static": ["static0", "severity_in_static"]},
            ("--runs static:", "weights='static' vs 'severity'", "differ in their seed only"),
        ),
        (
            {"static": ["static0", "static1"], "severity": ["paper_reward", "paper_reward3"]},
            ("--runs severity:", "sla_met_bonus=", "vs 0.0", "forms differ in seed, weights only"),
        ),
        ({"static": ["static0", "static0"]}, ("--runs static:", "is named twice")),
        ({"static": ["static0", "static0_again"]}, ("both trained with --seed=0", "one run per seed")),
    ],
    ids=["stopped", "mixed-form", "another-reward", "twice", "one-seed-twice"],
)
def test_runs_that_do_not_belong_together_are_refused_in_one_line(
    forms: dict[str, list[str]],
    phrases: tuple[str, ...],
    runs: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from benchmarks.run_sets import checked_runs

    named = {form: [runs[name] for name in names] for form, names in forms.items()}
    assert_refused(call(lambda: checked_runs(named, "prog", ("weights",)), capsys, tmp_path), *phrases)


def test_the_benchmarks_refuse_runs_that_do_not_belong_together(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through the commands, before any evaluation: ``weights_ablation`` with a form of another
    reward, ``training_seeds`` with a run of another seed than ``--seeds`` says."""
    from benchmarks import training_seeds, weights_ablation

    out = f"--out={tmp_path / 'report.json'}"
    static = f"--runs=static={runs['static0']},{runs['static1']}"
    severity = f"--runs=severity={runs['paper_reward']},{runs['paper_reward3']}"
    outcome = call(lambda: weights_ablation.main([static, severity, "--episodes=1", out]), capsys, tmp_path)
    assert_refused(outcome, "--runs severity:", "sla_met_bonus")
    seeds = [f"--runs={runs['static0']},{runs['static1']}", "--seeds=0,5", out]
    outcome = call(lambda: training_seeds.main(seeds), capsys, tmp_path)
    assert_refused(outcome, f"--runs: {runs['static1']} was trained with --seed=1, --seeds says 5")


def test_an_env_setting_spelt_out_is_no_difference() -> None:
    """``--reallocation_pause_s=30`` (the env's own) and ``--event_share=0`` on a scenario without
    events trained the same env as leaving them out, and were refused as other settings; another
    value still differs, and so does a fixed preference where the scenario draws one per job."""
    from benchmarks.run_sets import differences

    spelt = dataclasses.replace(TINY, reallocation_pause_s=30.0, event_share=0.0)
    assert differences(TINY, spelt, ("seed",)) == []
    other = dataclasses.replace(spelt, reallocation_pause_s=60.0, preference="time")
    assert sorted(differences(TINY, other, ("seed",))) == [
        "preference=None vs 'time'",
        "reallocation_pause_s=None vs 60.0",
    ]
    assert differences(TINY, dataclasses.replace(TINY, learning_rate=0.5), ("seed",)) == [
        "learning_rate=0.001 vs 0.5"
    ]

"""``train --init_from``: a run starting from another checkpoint's policy (``warm_start.py``)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jax
import pytest
from cli_harness import assert_refused, call
from learner_fixtures import TINY, cli_flags, shared_trainer, trees_equal

from slamorl_jax import checkpoint as ckpt
from slamorl_jax import policy_checkpoint, train
from slamorl_jax.training_loop import resumed_flag_matches
from slamorl_jax.warm_start import NETWORK_SETTINGS, init_from_config, layout_difference, warm_start

REPO_ROOT = Path(__file__).resolve().parent.parent

ONE_CHUNK = dataclasses.replace(
    TINY, total_timesteps=TINY.num_envs * TINY.rollout_length * TINY.updates_per_chunk
)


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A TINY checkpoint whose parameters differ from a fresh TINY run's (another seed)."""
    compiled = shared_trainer(TINY)
    state = compiled.fresh(seed=7)
    directory = tmp_path_factory.mktemp("source") / "checkpoints"
    ckpt.save(ckpt.make_manager(directory), state, TINY)
    return directory


@pytest.fixture(scope="module")
def source_with_gains(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A TINY checkpoint whose config started its network from other gains and another initialiser
    (the same layout: both priors exist)."""
    started = dataclasses.replace(
        TINY, suggestion_gain_init=2.5, relocate_gain_init=3.0, initializer="glorot"
    )
    directory = tmp_path_factory.mktemp("gains") / "checkpoints"
    ckpt.save(ckpt.make_manager(directory), shared_trainer(TINY).fresh(seed=7), started)
    return directory


def test_a_warm_start_records_the_sources_starting_settings_and_refuses_others(
    source_with_gains: Path,
) -> None:
    """``--suggestion_gain_init=12`` with ``--init_from`` trained from the source's learnt gain and
    recorded 12; an unset one recorded the default."""
    config = init_from_config(dataclasses.replace(TINY, init_from=str(source_with_gains)))
    started = (config.suggestion_gain_init, config.relocate_gain_init, config.initializer)
    assert started == (2.5, 3.0, "glorot")
    same = dataclasses.replace(TINY, init_from=str(source_with_gains), suggestion_gain_init=2.5)
    assert init_from_config(same, given=["suggestion_gain_init"]).suggestion_gain_init == 2.5
    for name, value, shown in (
        ("suggestion_gain_init", 12.0, "--suggestion_gain_init=2.5"),
        ("relocate_gain_init", 0.0, "--relocate_gain_init=3.0"),
        ("initializer", "he", "--initializer=glorot"),
    ):
        other = dataclasses.replace(TINY, init_from=str(source_with_gains), **{name: value})
        refusal = rf"^--{name} has no effect with --init_from: .*{shown}"
        with pytest.raises(ckpt.CheckpointError, match=refusal):
            init_from_config(other, given=[name])
    assert init_from_config(TINY) is TINY


@pytest.mark.parametrize("source", ["checkpoints/static-weights", "tests/data/legacy-policy-v1"])
def test_a_paper_feature_policy_starts_a_run_of_its_network_settings(source: str) -> None:
    """A policy of the paper's 21 features (saved before the forecast block) was refused with "start
    the run without --init_from", though a run with --observation=paper and the source's other
    network settings reads the same features with the same layers. The advice now names the flag
    that differs, and the run it describes starts from the source."""
    path = str(REPO_ROOT / source)
    stored = ckpt.stored_config(ckpt.read_meta(path)[0])
    assert stored.observation == "paper"
    own = dataclasses.replace(
        TINY, init_from=path, **{name: getattr(stored, name) for name in NETWORK_SETTINGS}
    )
    init_from_config(own)  # starts: it raised "start the run without --init_from" for every run
    with pytest.raises(
        ckpt.CheckpointError, match=r"trained with --observation=paper, .* use --observation=paper$"
    ):
        init_from_config(dataclasses.replace(own, observation="full"))


def test_a_mismatch_names_a_setting_the_network_uses(tmp_path: Path) -> None:
    """A paper policy whose config records ``--nosuggestion_prior`` (an old config's default, or what
    ``imitate --like`` copied), which the paper moves ignore, was refused naming that flag, and the
    advice given (``--nosuggestion_prior``) was refused with ``--actions=paper`` in turn: the setting
    that differs in the network is the paper moves' prior."""
    from slamorl_jax.agent.networks import ActorCritic, init_params
    from slamorl_jax.env.observation import NUM_FEATURES

    paper = dataclasses.replace(TINY, actions="paper", suggestion_prior=False, paper_suggestion_prior=False)
    params = init_params(ActorCritic(paper.network), jax.random.key(0), NUM_FEATURES)
    policy_checkpoint.save_policy(tmp_path / "paper", params, paper)
    run = dataclasses.replace(TINY, actions="paper", init_from=str(tmp_path / "paper"))
    with pytest.raises(
        ckpt.CheckpointError, match=r"trained with --nopaper_suggestion_prior, this run's has "
    ):
        init_from_config(run)


def test_warm_start_takes_the_parameters_and_keeps_the_rest_fresh(source: Path) -> None:
    compiled = shared_trainer(TINY)
    fresh = compiled.fresh()
    warm = warm_start(fresh, source)
    assert trees_equal(warm.params, policy_checkpoint.load_policy(source).params)
    assert not trees_equal(warm.params, fresh.params)
    for name in ("opt_state", "env_state", "obs", "key", "update"):
        assert trees_equal(getattr(warm, name), getattr(fresh, name)), name


def test_layout_difference_names_the_first_mismatch() -> None:
    a = {"params": {"w": jax.ShapeDtypeStruct((3, 4), "float32")}}
    assert layout_difference(a, a) is None
    b = {"params": {"w": jax.ShapeDtypeStruct((3, 5), "float32")}}
    assert "params/w has shape (3, 4), this run's (3, 5)" in layout_difference(a, b)
    c = {"params": {"v": jax.ShapeDtypeStruct((3, 4), "float32")}}
    assert "params/v" in layout_difference(a, c)


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    train.FLAGS.unparse_flags()


def _train(config: dataclasses.dataclass, *extra: str) -> object:
    argv = ["slamorl_jax.train", *cli_flags(config), "--eval_episodes=0", "--noprogress", *extra]
    return lambda: train.main(train.parse_flags(argv))


@pytest.mark.slow  # trains one chunk (about 8 s with a warm compilation cache)
def test_the_cli_records_init_from(source: Path, workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outcome = call(_train(ONE_CHUNK, f"--init_from={source}", "--run_dir=run"), capsys, workdir)
    assert outcome.code == 0, outcome.report()
    assert f"init: the policy starts from {source}" in outcome.stderr
    meta = json.loads(
        (workdir / "run" / "checkpoints" / str(ONE_CHUNK.num_updates) / "meta" / "metadata").read_text()
    )
    # Recorded as the step folder it loaded, absolute (not as typed: a run folder's latest step moves on).
    assert (
        meta["config"]["init_from"] == str(ckpt.checkpoint_step_dir(source)) == str(source.absolute() / "0")
    )
    summary = json.loads((workdir / "run" / "logs" / "summary.json").read_text())
    assert summary["config"]["init_from"] == str(ckpt.checkpoint_step_dir(source))
    # The same command with --resume is the same run (it was refused: "flags differ ... init_from").
    outcome = call(_train(ONE_CHUNK, f"--init_from={source}", "--run_dir=run", "--resume"), capsys, workdir)
    assert outcome.code == 0 and "flags differ" not in outcome.stderr, outcome.report()


def test_a_resumed_init_from_matches_the_folder_it_was_typed_as(tmp_path: Path) -> None:
    step = str(tmp_path / "policy" / "0")  # what the run recorded: the step folder it loaded
    for typed in (step, str(tmp_path / "policy"), str(tmp_path / "x" / ".." / "policy")):
        assert resumed_flag_matches("init_from", step, typed), typed
    # A folder further up was accepted (even "/"); --init_from itself refuses it on a new run.
    for typed in ("other", "policy/1", "pol", ".", "/"):
        typed = str(tmp_path / typed)
        assert not resumed_flag_matches("init_from", step, typed), typed
    assert not resumed_flag_matches("init_from", None, step)
    assert not resumed_flag_matches("init_from", step, None)
    assert resumed_flag_matches("seed", 3, 3) and not resumed_flag_matches("seed", 3, 4)


@pytest.mark.parametrize(
    ("extra", "phrases"),
    [
        (("--hidden_sizes=8,8",), ("trained with --hidden_sizes=16,16", "this run's has --hidden_sizes=8,8")),
        (("--actions=paper",), ("trained with --actions=targets_relocate", "this run's has --actions=paper")),
        (("--activation=relu",), ("trained with --activation=tanh", "this run's has --activation=relu")),
        (
            ("--target_cpus_per_gpu=0,2,4,6,10",),
            (
                "trained with --target_cpus_per_gpu=0,2,4,8,12",
                "this run's has --target_cpus_per_gpu=0,2,4,6,10",
            ),
        ),
        (("--suggestion_gain_init=12",), ("--suggestion_gain_init has no effect with --init_from", "=4.0")),
        (("--init_from=nowhere",), ("--init_from", "does not exist")),
    ],
)
def test_the_cli_refuses_an_unusable_init_from(
    extra: tuple[str, ...],
    phrases: tuple[str, ...],
    source: Path,
    workdir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    flags = (f"--init_from={source}", *extra, "--run_dir=run")
    assert_refused(call(_train(ONE_CHUNK, *flags), capsys, workdir), *phrases)


def test_flags_the_sources_network_leaves_without_effect_are_refused(
    tmp_path: Path, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A source started without the relocate prior has no relocate rule to set: ``--relocate_gate``
    and ``--relocate_payback`` were recorded and ignored (refused without ``--init_from``)."""
    started = dataclasses.replace(TINY, relocate_gain_init=0.0)
    directory = tmp_path / "no-prior" / "checkpoints"
    ckpt.save(ckpt.make_manager(directory), shared_trainer(started).fresh(seed=7), started)
    flags = [flag for flag in cli_flags(ONE_CHUNK) if not flag.startswith("--relocate_gain_init=")]
    for flag in ("--relocate_gate=0.3", "--relocate_payback=5"):
        argv = ["slamorl_jax.train", *flags, f"--init_from={directory}", flag, "--run_dir=run"]
        outcome = call(lambda argv=argv: train.main(train.parse_flags(argv)), capsys, workdir)
        name = flag.split("=")[0]
        assert_refused(outcome, f"{name} has no effect without the relocate prior", "its source's")

"""orbax checkpoints: exact round trips, ``load_policy``, resume = uninterrupted, and bad checkpoints."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from learner_fixtures import TINY, Compiled, random_inputs, shared_trainer, to_host, trees_equal

from slamorl_jax import checkpoint as ckpt
from slamorl_jax import policy_checkpoint
from slamorl_jax.agent.networks import ActorCritic, init_params
from slamorl_jax.agent.trainer import TrainState
from slamorl_jax.array_checksum import signed_meta
from slamorl_jax.env.catalog import load_catalog, parse_catalog
from slamorl_jax.env.observation import NUM_FEATURES, TARGET_BLOCK

SAVED_STEP = TINY.updates_per_chunk  # the good checkpoint holds the state after one chunk


@dataclasses.dataclass(frozen=True)
class Saved:
    """A run directory with one good checkpoint, and a host copy of the state it holds."""

    root: Path
    state: TrainState  # NumPy leaves, key as key data


@pytest.fixture(scope="module")
def compiled() -> Compiled:
    """TINY's jitted ``init`` and ``update_chunk`` (shared with the other learner test modules)."""
    return shared_trainer(TINY)


@pytest.fixture(scope="module")
def saved(compiled: Compiled, tmp_path_factory: pytest.TempPathFactory) -> Saved:
    """One chunk of training saved at step ``SAVED_STEP``."""
    state, _ = compiled.run(compiled.fresh(), 1)
    root = tmp_path_factory.mktemp("run") / "checkpoints"
    assert ckpt.save(ckpt.make_manager(root), state, TINY) == SAVED_STEP
    return Saved(root=root, state=to_host(state))


@pytest.fixture
def copy_of(saved: Saved, tmp_path: Path) -> Path:
    """A private copy of the good run directory, free to damage."""
    return Path(shutil.copytree(saved.root, tmp_path / "checkpoints"))


def test_save_then_restore_gives_identical_state(saved: Saved, compiled: Compiled) -> None:
    template = compiled.fresh(seed=7)  # other values, same structure
    for path in (saved.root, saved.root / str(SAVED_STEP)):
        restored = ckpt.restore_state(path, template)
        assert jnp.issubdtype(restored.key.dtype, jax.dtypes.prng_key)
        assert trees_equal(restored, saved.state)
    assert ckpt.has_checkpoint(saved.root)
    meta, _, step = ckpt.read_meta(saved.root)
    assert step == SAVED_STEP and meta["update"] == SAVED_STEP
    assert meta["env_steps"] == SAVED_STEP * TINY.batch_size
    assert meta["format_version"] == ckpt.FORMAT_VERSION


def test_load_policy_acts_like_the_live_parameters(saved: Saved, compiled: Compiled) -> None:
    obs, weights = random_inputs(seed=0, n=256)
    params = jax.tree.map(jnp.asarray, saved.state.params)
    live_logits, live_values = compiled.trainer.apply(params, obs, weights)
    greedy = np.asarray(jnp.argmax(live_logits, axis=-1))
    # The checks below could not pass by constant outputs: logits and values vary with the input.
    assert np.ptp(np.asarray(live_logits), axis=0).max() > 1e-4
    assert np.ptp(np.asarray(live_values), axis=0).max() > 1e-4
    for path in (saved.root, saved.root / str(SAVED_STEP)):
        policy = policy_checkpoint.load_policy(path)
        assert policy.step == SAVED_STEP
        assert policy.config == TINY
        np.testing.assert_array_equal(np.asarray(policy(obs, weights)), greedy)
        np.testing.assert_allclose(np.asarray(policy.logits(obs, weights)), live_logits, rtol=1e-6)
        np.testing.assert_allclose(np.asarray(policy.values(obs, weights)), live_values, rtol=1e-6)
        sampled = np.asarray(policy(obs, weights, jax.random.key(5)))
        assert sampled.shape == (256,) and np.issubdtype(sampled.dtype, np.integer)
        assert sampled.min() >= 0 and sampled.max() < TINY.network.num_actions
        np.testing.assert_array_equal(sampled, np.asarray(policy(obs, weights, jax.random.key(5))))
    # NumPy inputs of one sample work too.
    single = policy_checkpoint.load_policy(saved.root)(np.asarray(obs[0]), np.asarray(weights[0]))
    assert int(single) == greedy[0]


def test_resume_equals_uninterrupted(compiled: Compiled, tmp_path: Path) -> None:
    straight, _ = compiled.run(compiled.fresh(), 4)
    half, _ = compiled.run(compiled.fresh(), 2)
    ckpt.save(ckpt.make_manager(tmp_path), half, TINY)
    resumed = ckpt.restore_state(tmp_path, compiled.fresh(seed=7))  # any leaf left unrestored differs
    resumed, _ = compiled.run(resumed, 2)
    assert int(resumed.update) == int(straight.update) == 4 * TINY.updates_per_chunk
    assert trees_equal(resumed.params, straight.params)
    assert trees_equal(resumed.opt_state, straight.opt_state)
    assert trees_equal(resumed, straight)


@pytest.mark.slow  # compiles a second trainer (about 10 s); the constant-rate case above is the default's
def test_resume_equals_uninterrupted_under_a_decaying_learning_rate(tmp_path: Path) -> None:
    """With ``--lr_schedule=linear`` the rate depends on the optimiser's step count, which the resumed
    state must carry on from (TINY's constant rate never read it; a learner audit checked it by hand)."""
    linear = dataclasses.replace(TINY, lr_schedule="linear")
    compiled = shared_trainer(linear)
    from slamorl_jax.agent.schedule import learning_rate_after

    chunk = TINY.updates_per_chunk
    assert learning_rate_after(linear, 4 * chunk) < learning_rate_after(linear, 2 * chunk)  # it decays
    straight, _ = compiled.run(compiled.fresh(), 4)
    half, _ = compiled.run(compiled.fresh(), 2)
    ckpt.save(ckpt.make_manager(tmp_path), half, linear)
    resumed, _ = compiled.run(ckpt.restore_state(tmp_path, compiled.fresh(seed=7)), 2)
    # the optimiser's step count (and so each update's rate) carried on: the same parameters
    assert trees_equal(resumed.opt_state, straight.opt_state)
    assert trees_equal(resumed, straight)
    fresh_count, _ = compiled.run(half.replace(opt_state=compiled.fresh().opt_state), 2)
    assert not trees_equal(fresh_count.params, straight.params)  # what a lost optimiser state gives


def test_keeps_the_newest_checkpoints(compiled: Compiled, tmp_path: Path) -> None:
    manager = ckpt.make_manager(tmp_path, keep=2)
    state = compiled.fresh()
    for _ in range(3):
        state, _ = compiled.run(state, 1)
        ckpt.save(manager, state, TINY)
    steps = sorted(int(p.name) for p in tmp_path.iterdir() if p.name.isdigit())
    assert steps == [2 * TINY.updates_per_chunk, 3 * TINY.updates_per_chunk]
    assert policy_checkpoint.load_policy(tmp_path).step == 3 * TINY.updates_per_chunk


def remove_item(item: str) -> Callable[[Path], None]:
    """Damage: delete one item (``meta``, ``state`` or ``policy``) of the saved step."""
    return lambda step_dir: shutil.rmtree(step_dir / item)


def write_meta(text: str) -> Callable[[Path], None]:
    """Damage: replace the saved step's meta JSON."""
    return lambda step_dir: (step_dir / "meta" / "metadata").write_text(text)


def edit_meta(signed: bool = True, **changes: object) -> Callable[[Path], None]:
    """Damage: change fields of the saved step's meta JSON (``config_extra`` adds a config key),
    its checksum re-made to match (so the field's own check is what refuses it) unless not ``signed``."""

    def apply(step_dir: Path) -> None:
        meta_file = step_dir / "meta" / "metadata"
        meta = json.loads(meta_file.read_text())
        fields = dict(changes)
        extra = fields.pop("config_extra", None)
        meta.update(fields)
        if extra:
            meta["config"].update(extra)
        meta_file.write_text(json.dumps(signed_meta(meta) if signed else meta))

    return apply


BROKEN = {
    "meta removed": (remove_item("meta"), "no complete checkpoint"),
    "meta not JSON": (write_meta("{not json"), "partial: unreadable meta"),
    "meta empty": (write_meta(""), "partial: unreadable meta"),
    "wrong format_version": (edit_meta(format_version=99), "format_version 99"),
    "no format_version": (edit_meta(format_version=None), "format_version None"),
    "unknown config key": (edit_meta(config_extra={"warp_factor": 9}), "incompatible config.*warp_factor"),
    "a config of null": (edit_meta(config=None), "incompatible config: a config must be a JSON object"),
    # Trained on another version's observation or action grid: refused, not read with today's meaning.
    "another observation layout": (edit_meta(observation_layout="0" * 16), "another layout of its \\d+ feat"),
    "another observation size": (edit_meta(observation_dim=221), "another observation \\(221 features"),
    "another action count": (edit_meta(num_actions=73), "73 actions"),
    # Malformed fields: refused in one CheckpointError, never an AttributeError or an unchecked load.
    "unknown action set": (edit_meta(config_extra={"actions": "bogus"}), "config: --actions must be"),
    "config value of another type": (edit_meta(config_extra={"learning_rate": "x"}), "incompatible config"),
    "a preference that is not text": (edit_meta(config_extra={"preference": 5}), "incompatible config"),
    # Types the checks after it assume: a float seed ended "unexpected TypeError" in the PRNG (exit 1).
    "a seed that is not an integer": (edit_meta(config_extra={"seed": 0.5}), "incompatible config.*seed"),
    "a coefficient that is text": (edit_meta(config_extra={"shaping": "yes"}), "config.*shaping must"),
    "a switch that is not a bool": (edit_meta(config_extra={"suggestion_prior": 1}), "suggestion_prior must"),
    "layer sizes not integers": (edit_meta(config_extra={"hidden_sizes": [8.5]}), "hidden_sizes must be"),
    "a target grid that is text": (edit_meta(config_extra={"target_cpus_per_gpu": "0,2"}), "target_cpus_per"),
    "a target grid of four values": (
        edit_meta(config_extra={"target_cpus_per_gpu": [0, 2, 4, 8]}),
        "config: --target_cpus_per_gpu must be 5 increasing",
    ),
    # Its config names another grid than the one its features were saved with: refused, not run on
    # the grid the config names.
    "another target grid than its layout's": (
        edit_meta(config_extra={"target_cpus_per_gpu": [0, 2, 4, 6, 10]}),
        "another layout of its \\d+ feat",
    ),
    "action count not an integer": (edit_meta(num_actions="9"), "num_actions is not an integer"),
    "observation size missing a value": (edit_meta(observation_dim=None), "observation_dim is not an"),
    "digests a string": (edit_meta(array_sha256="abc"), "damaged: its meta's array_sha256 is not a map"),
    "digests of an item a list": (edit_meta(array_sha256={"policy": ["a"]}), "array_sha256 is not a map"),
    # A value changed on disk (a flipped digit of a config value): refused, not read as other settings.
    "meta edited, checksum not": (
        edit_meta(signed=False, config_extra={"learning_rate": 0.5}),
        "damaged: its meta does not match the checksum",
    ),
}


@pytest.mark.parametrize("damage", list(BROKEN))
@pytest.mark.parametrize("as_step_dir", [False, True], ids=["run dir", "step dir"])
def test_broken_checkpoints_raise_checkpoint_error(
    damage: str, as_step_dir: bool, copy_of: Path, compiled: Compiled
) -> None:
    corrupt, message = BROKEN[damage]
    step_dir = copy_of / str(SAVED_STEP)
    corrupt(step_dir)
    path = step_dir if as_step_dir else copy_of
    if as_step_dir and damage == "meta removed":
        message = "no complete checkpoint"  # a step directory without meta is not a checkpoint
    with pytest.raises(ckpt.CheckpointError, match=message):
        policy_checkpoint.load_policy(path)
    with pytest.raises(ckpt.CheckpointError, match=message):
        ckpt.restore_state(path, compiled.fresh())


def test_missing_and_empty_directories_raise_checkpoint_error(tmp_path: Path, compiled: Compiled) -> None:
    with pytest.raises(ckpt.CheckpointError, match="does not exist"):
        policy_checkpoint.load_policy(tmp_path / "nope")
    with pytest.raises(ckpt.CheckpointError, match="does not exist"):
        ckpt.restore_state(tmp_path / "nope", compiled.fresh())
    with pytest.raises(ckpt.CheckpointError, match="no complete checkpoint"):
        policy_checkpoint.load_policy(tmp_path)
    assert not ckpt.has_checkpoint(tmp_path) and not ckpt.has_checkpoint(tmp_path / "nope")
    assert issubclass(ckpt.CheckpointError, ValueError)


def test_a_run_folder_points_at_its_checkpoints(copy_of: Path) -> None:
    """``load_policy(runs/x)`` (a run's ``--run_dir``, its steps in ``checkpoints/``) says where they are."""
    with pytest.raises(ckpt.CheckpointError, match=f"a run's folder keeps them in {copy_of}"):
        policy_checkpoint.load_policy(copy_of.parent)
    assert policy_checkpoint.load_policy(copy_of).step == SAVED_STEP


def test_missing_arrays_raise_checkpoint_error(copy_of: Path, compiled: Compiled, saved: Saved) -> None:
    shutil.rmtree(copy_of / str(SAVED_STEP) / "state")
    with pytest.raises(ckpt.CheckpointError, match="cannot restore training state"):
        ckpt.restore_state(copy_of, compiled.fresh())
    # The policy needs only meta and policy.
    assert policy_checkpoint.load_policy(copy_of).step == SAVED_STEP
    shutil.rmtree(copy_of / str(SAVED_STEP) / "policy")
    with pytest.raises(ckpt.CheckpointError, match="cannot restore the policy"):
        policy_checkpoint.load_policy(copy_of)


def test_restoring_onto_another_network_raises_checkpoint_error(saved: Saved, compiled: Compiled) -> None:
    other = ActorCritic(dataclasses.replace(TINY.network, hidden_sizes=(8,)))
    template = compiled.fresh().replace(params=init_params(other, jax.random.key(0), NUM_FEATURES))
    with pytest.raises(ckpt.CheckpointError, match="cannot restore training state"):
        ckpt.restore_state(saved.root, template)


def add_partial_steps(root: Path) -> None:
    """A later step without meta (an interrupted or damaged save) and an orbax temporary directory."""
    partial = root / str(2 * SAVED_STEP)
    partial.mkdir()
    shutil.copytree(root / str(SAVED_STEP) / "state", partial / "state")
    (root / f"{3 * SAVED_STEP}.orbax-checkpoint-tmp-1700000000").mkdir()


def test_partial_later_step_falls_back_to_the_last_complete_one(
    copy_of: Path, saved: Saved, compiled: Compiled
) -> None:
    add_partial_steps(copy_of)
    assert ckpt.has_checkpoint(copy_of)
    assert policy_checkpoint.load_policy(copy_of).step == SAVED_STEP
    assert trees_equal(ckpt.restore_state(copy_of, compiled.fresh()), saved.state)


def test_damaged_latest_step_leaves_older_steps_loadable(copy_of: Path, compiled: Compiled) -> None:
    state = ckpt.restore_state(copy_of, compiled.fresh())
    state, _ = compiled.run(state, 1)
    ckpt.save(ckpt.make_manager(copy_of), state, TINY)
    latest = copy_of / str(2 * SAVED_STEP)
    write_meta("{truncated")(latest)
    with pytest.raises(ckpt.CheckpointError, match=str(latest)):
        policy_checkpoint.load_policy(copy_of)
    assert policy_checkpoint.load_policy(copy_of / str(SAVED_STEP)).step == SAVED_STEP


def test_saving_over_a_partial_step_succeeds(copy_of: Path, compiled: Compiled) -> None:
    add_partial_steps(copy_of)
    state = ckpt.restore_state(copy_of, compiled.fresh())
    state, _ = compiled.run(state, 1)  # reaches the partial step's number
    ckpt.save(ckpt.make_manager(copy_of), state, TINY)
    assert policy_checkpoint.load_policy(copy_of).step == 2 * SAVED_STEP


# slow: kept out of the default suite's time budget (run with -m slow)
@pytest.mark.slow
def test_the_shared_target_head_trains_saves_and_loads(tmp_path: Path) -> None:
    """``--target_head``: the actor scores the 80 targets with one shared head from the observation's
    per-target block; a chunk of training saves and loads into a policy that acts the same."""
    config = dataclasses.replace(TINY, target_head=True, updates_per_chunk=1)
    assert config.network.target_block == TARGET_BLOCK
    compiled = shared_trainer(config)
    state, _ = compiled.run(compiled.fresh(), 1)
    params = state.params["params"]
    assert "actor_targets" in params and "actor_moves" in params and "actor" not in params
    ckpt.save(ckpt.make_manager(tmp_path), state, config)
    policy = policy_checkpoint.load_policy(tmp_path)
    assert policy.config.target_head and policy.network.config.target_block == TARGET_BLOCK
    obs, weights = random_inputs(seed=3, n=64)
    logits, _ = compiled.trainer.apply(state.params, obs, weights)
    assert logits.shape == (64, TINY.network.num_actions)
    np.testing.assert_allclose(np.asarray(policy.logits(obs, weights)), np.asarray(logits), rtol=1e-6)
    assert np.all(np.isfinite(np.asarray(logits)))


def test_a_run_saved_before_the_dual_multipliers_refuses_to_resume(copy_of: Path, tmp_path: Path) -> None:
    """A run whose meta has no ``state_version`` (saved before ``EnvState.multipliers``) is refused
    by ``--resume`` with one clear line, and none of its steps is set aside as damaged."""
    from slamorl_jax.training_loop import RunOptions, resolve_run

    meta_file = copy_of / str(SAVED_STEP) / "meta" / "metadata"
    meta = json.loads(meta_file.read_text())
    assert meta.pop("state_version") == ckpt.STATE_VERSION
    meta_file.write_text(json.dumps(signed_meta(meta)))
    options = RunOptions(checkpoint_dir=copy_of, log_dir=tmp_path / "logs", resume=True)
    with pytest.raises(ckpt.CheckpointError, match=r"state_version 1.*start a new run") as err:
        resolve_run(TINY, options)
    assert "\n" not in str(err.value)
    assert ckpt.complete_steps(copy_of) == [SAVED_STEP]
    assert policy_checkpoint.load_policy(copy_of).step == SAVED_STEP  # the policy still loads


@pytest.mark.parametrize(
    ("source", "change", "phrase"),
    [
        ("export", None, "holds a policy only"),
        ("run", {"observation_layout": "an older layout"}, "trained on another layout"),
        ("run", {"num_actions": 9}, "actions in its"),
    ],
)
def test_resume_refuses_what_is_not_this_versions_run_and_sets_nothing_aside(
    copy_of: Path, tmp_path: Path, source: str, change: dict | None, phrase: str
) -> None:
    """A policy-only checkpoint (``checkpoints/default``, an export, ``imitate``'s output) and a run
    of another observation or action set are refused by ``--resume`` with one line before anything
    is restored. Every restore error used to count as damage: ``--resume`` renamed each step
    ``damaged-<step>``, after which nothing loaded the shipped policy."""
    from slamorl_jax.training_loop import RunOptions, resolve_run

    target = copy_of
    if source == "export":
        target = tmp_path / "exported"
        policy_checkpoint.export_policy(copy_of, target)
    step = ckpt.complete_steps(target)[-1]
    if change:
        meta_file = target / str(step) / "meta" / "metadata"
        meta_file.write_text(json.dumps(signed_meta({**json.loads(meta_file.read_text()), **change})))
    options = RunOptions(checkpoint_dir=target, log_dir=tmp_path / "logs", resume=True)
    with pytest.raises(ckpt.CheckpointError, match=phrase) as err:
        resolve_run(TINY, options)
    assert "\n" not in str(err.value)
    assert ckpt.complete_steps(target) == [step]


SHIPPED = Path(__file__).resolve().parent.parent / "checkpoints" / "default"
LEGACY = Path(__file__).resolve().parent / "data" / "legacy-policy-v1"
_OBS, _WEIGHTS = np.zeros(NUM_FEATURES, np.float32), np.full(3, 1 / 3, np.float32)
# (id, obs, weights, exception, phrase) for the shipped policy; each used to be a flax shape error, an
# IndexError, a concatenate TypeError, or an answer: 400 features read as the first 351, NaN as action 0.
BAD_POLICY_INPUTS = [
    ("350 features", np.zeros(350), _WEIGHTS, ValueError, f"obs must have shape [..., {NUM_FEATURES}]"),
    ("400 features", np.zeros(400), _WEIGHTS, ValueError, "got (400,)"),
    ("the paper's 21", np.zeros(21), _WEIGHTS, ValueError, "obs must have shape"),
    ("a scalar obs", np.float32(0.5), _WEIGHTS, ValueError, "got ()"),
    ("2 weights", _OBS, np.ones(2), ValueError, "weights must have shape [..., 3]"),
    ("a batch of obs, one weight vector", np.zeros((4, NUM_FEATURES)), _WEIGHTS, ValueError, "same leading"),
    ("NaN obs", np.full(NUM_FEATURES, np.nan), _WEIGHTS, ValueError, "obs must be finite"),
    ("infinite weights", _OBS, np.array([np.inf, 0.0, 0.0]), ValueError, "weights must be finite"),
    ("string obs", np.array(["a"] * NUM_FEATURES), _WEIGHTS, TypeError, "obs must hold real numbers"),
    ("complex obs", np.zeros(NUM_FEATURES, complex), _WEIGHTS, TypeError, "obs must hold real numbers"),
    ("None weights", _OBS, None, TypeError, "weights must hold real numbers"),
    # Accepted, and they changed the actions: the env's weights are a distribution over the objectives.
    ("weights summing to 5", _OBS, np.array([3.0, 1.0, 1.0]), ValueError, "sum to 1 per observation"),
    ("negative weights", _OBS, np.array([1.2, -0.1, -0.1]), ValueError, "non-negative"),
]


@pytest.fixture(scope="module")
def shipped() -> policy_checkpoint.LoadedPolicy:
    """The shipped default policy."""
    return policy_checkpoint.load_policy(SHIPPED)


@pytest.mark.parametrize(
    ("obs", "weights", "error", "phrase"),
    [c[1:] for c in BAD_POLICY_INPUTS],
    ids=[c[0] for c in BAD_POLICY_INPUTS],
)
def test_bad_policy_inputs_raise_one_line_naming_the_argument(
    shipped: policy_checkpoint.LoadedPolicy, obs: Any, weights: Any, error: type[Exception], phrase: str
) -> None:
    for call in (shipped, shipped.logits, shipped.values):
        with pytest.raises(error) as info:
            call(obs, weights)
        assert phrase in str(info.value) and "\n" not in str(info.value)


def test_a_loaded_policy_jits_as_a_callable_and_hashes_by_identity(
    shipped: policy_checkpoint.LoadedPolicy,
) -> None:
    """``jax.jit(policy)`` raised "unhashable type: 'dict'" (a frozen dataclass hashed its params)."""
    obs, weights = np.zeros((2, NUM_FEATURES), np.float32), np.full((2, 3), 1 / 3, np.float32)
    np.testing.assert_array_equal(jax.jit(shipped)(obs, weights), shipped(obs, weights))
    assert {shipped: "usable as a key"}[shipped] == "usable as a key"


def test_policy_inputs_that_stay_accepted(shipped: policy_checkpoint.LoadedPolicy) -> None:
    """Lists, integer or bool observations, any batch shape; a legacy policy also takes its own 21
    features, and jit still traces through the checks (no value check on a tracer)."""
    assert shipped(list(_OBS), list(_WEIGHTS)).shape == ()
    assert shipped(np.zeros((2, 3, NUM_FEATURES), int), np.full((2, 3, 3), 1 / 3)).shape == (2, 3)
    assert shipped(np.zeros(NUM_FEATURES, bool), _WEIGHTS).shape == ()
    legacy = policy_checkpoint.load_policy(LEGACY)
    assert int(legacy(_OBS[:21], _WEIGHTS)) == int(legacy(_OBS, _WEIGHTS))
    with pytest.raises(ValueError, match=re.escape(f"[..., 21 or {NUM_FEATURES}]")):
        legacy(np.zeros(30), _WEIGHTS)
    nan_obs = jnp.full(NUM_FEATURES, jnp.nan)
    assert jax.jit(shipped.logits)(nan_obs, _WEIGHTS).shape == (shipped.network.config.num_actions,)


def test_a_policy_of_another_target_grid_saves_loads_and_runs_on_its_own_grid(
    saved: Saved, compiled: Compiled, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run trained on another CPUs-per-GPU grid (``--target_cpus_per_gpu``) saves that grid's
    observation layout, loads with it, builds its env params on it, and ``evaluate`` refuses to
    compare it with a policy of another grid (one line, exit 2) instead of running both on one."""
    from slamorl_jax import evaluate
    from slamorl_jax.env.observation import OBSERVATION_LAYOUT, observation_layout

    grid = (0.0, 2.0, 4.0, 6.0, 10.0)
    config = dataclasses.replace(TINY, target_cpus_per_gpu=grid)
    state, _ = compiled.run(compiled.fresh(), 1)  # the network does not depend on the grid
    root = tmp_path / "grid" / "checkpoints"
    assert ckpt.save(ckpt.make_manager(root), state, config) == SAVED_STEP
    meta, _, _ = ckpt.read_meta(root)
    assert meta["observation_layout"] == observation_layout(grid) != OBSERVATION_LAYOUT
    policy = policy_checkpoint.load_policy(root)
    assert policy.config == config and trees_equal(
        policy.params, policy_checkpoint.load_policy(saved.root).params
    )
    np.testing.assert_array_equal(np.asarray(policy.env_params.target_cpus_per_gpu), grid)
    argv = [f"--checkpoint={saved.root}", f"--compare=other={root}", f"--out_dir={tmp_path / 'eval'}"]
    with pytest.raises(SystemExit) as info:
        evaluate.main(argv)
    err = capsys.readouterr().err.strip()
    assert info.value.code == 2 and len(err.splitlines()) == 1, err
    assert "--compare other: trained with --target_cpus_per_gpu=0,2,4,6,10" in err
    assert not (tmp_path / "eval").exists()


def test_a_failed_write_is_one_line_naming_the_step_and_why(
    compiled: Compiled, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk during a periodic save printed hundreds of lines of orbax's threads' tracebacks
    before the run's one-line error; now the save raises one ``CheckpointWriteError`` saying why."""
    import errno

    manager = ckpt.make_manager(tmp_path / "ck")

    def disk_full(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(manager, "save", disk_full)
    with pytest.raises(ckpt.CheckpointWriteError) as failed:
        ckpt.save(manager, compiled.fresh(), TINY)
    message = str(failed.value)
    assert "\n" not in message and "update 0" in message and message.endswith("No space left on device")
    # TensorStore's ValueError carries the OS's error number; any other ValueError is a program
    # error, raised as it is, not reported as the disk's.
    for error, expected in (
        (
            ValueError("RESOURCE_EXHAUSTED: Failed writing: No space [os_error_code='28']"),
            ckpt.CheckpointWriteError,
        ),
        (ValueError("tree structures differ"), ValueError),
    ):
        fresh = ckpt.make_manager(tmp_path / f"ck-{expected.__name__}")

        def fail_with(*args: Any, error: Exception = error, **kwargs: Any) -> None:
            raise error

        monkeypatch.setattr(fresh, "save", fail_with)
        with pytest.raises(expected) as failed:
            ckpt.save(fresh, compiled.fresh(), TINY)
        assert type(failed.value) is expected


def test_resuming_a_step_folder_names_the_run_folder(saved: Saved) -> None:
    """``--resume --checkpoint_dir=<run>/checkpoints/<step>`` said "no complete checkpoint in .../<step>";
    it now names the folder to pass, with or without logs beside it."""
    from slamorl_jax.checkpoint_resume import newest_readable_meta

    step_dir = saved.root / str(SAVED_STEP)
    hint = rf"is one checkpoint step .* --checkpoint_dir={saved.root} "
    with pytest.raises(ckpt.CheckpointError, match=hint):
        newest_readable_meta(step_dir)
    assert newest_readable_meta(saved.root)["update"] == SAVED_STEP


def test_a_policy_saved_with_env_params_of_its_own_refuses_the_configs(tmp_path: Path) -> None:
    """A policy trained in Python on another cluster and saved with ``save_policy`` loaded back with
    its config's env params (the Pollux cluster): ``evaluate`` and ``recommend`` judged it in another
    world, silently. Saved with its ``env_params``, it refuses the config's and checks params given."""
    from slamorl_jax.agent.trainer import make_train
    from slamorl_jax.env import validate_params, with_derived_tables
    from slamorl_jax.env.params import with_values

    trainer = make_train(TINY)
    network_params = init_params(trainer.network, jax.random.key(0), NUM_FEATURES)
    own = validate_params(with_derived_tables(with_values(trainer.env_params, gpus_per_node=8, max_nodes=2)))
    policy_checkpoint.save_policy(tmp_path / "own", network_params, TINY, env_params=own)
    policy = policy_checkpoint.load_policy(tmp_path / "own")
    with pytest.raises(
        ValueError, match=r"trained on other env params than its config builds \(gpus_per_node"
    ):
        policy.env_params  # noqa: B018  (the property refuses)
    policy.check_env_params(own)  # its own: fine
    with pytest.raises(
        ValueError, match=r"params differ from those the policy was trained on \(gpus_per_node\)"
    ):
        policy.check_env_params(trainer.env_params)
    # The same values given otherwise are the same params: a Python float or float64 for a float32
    # field, tables rebuilt under vmap (rounded otherwise in a few bits), a copy on the device. Only
    # set fields are compared (a rebuild's derived tables may round differently).
    policy.check_env_params(own.replace(reallocation_pause_s=float(own.reallocation_pause_s)))
    policy.check_env_params(jax.device_put(own))
    rounded = own.replace(job_rows=own.job_rows * (1 + 1e-7))
    policy.check_env_params(rounded)
    # No catalogue rebuilds its params: moving it to another is refused as such (its own: a no-op).
    other = parse_catalog(
        {**load_catalog().raw, "prices": {**load_catalog().raw["prices"], "vcpu_hour": 1.0}}
    )
    with pytest.raises(ValueError, match=r"saved with env params of its own \(save_policy's env_params\)"):
        policy.on_catalog(other)
    assert policy.on_catalog(load_catalog()).trained_env_params == policy.trained_env_params
    # Saved with the params its config builds, it records none and runs as any policy.
    policy_checkpoint.save_policy(tmp_path / "plain", network_params, TINY, env_params=trainer.env_params)
    plain = policy_checkpoint.load_policy(tmp_path / "plain")
    assert plain.trained_env_params is None and trees_equal(plain.env_params, trainer.env_params)
    as_float = trainer.env_params.replace(reallocation_pause_s=float(trainer.env_params.reallocation_pause_s))
    policy_checkpoint.save_policy(tmp_path / "same", network_params, TINY, env_params=as_float)
    assert policy_checkpoint.load_policy(tmp_path / "same").trained_env_params is None


@pytest.mark.parametrize(
    "mode",
    [
        ["--job=job.json"],
        ["--jobs=job.json"],
        ["--jobs=job.json", "--keep_going"],
        ["--serve"],
        ["--http=127.0.0.1:0"],
    ],
)
def test_every_recommend_mode_refuses_a_policy_saved_with_env_params_of_its_own(
    mode: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--job`` refused such a policy in one line; ``--jobs --keep_going`` ended "unexpected
    ValueError", ``--serve`` answered every job with the refusal and exit 0, and ``--http`` served
    400s: the policy, not the job, was wrong."""
    from cli_harness import assert_refused, call

    from slamorl_jax import recommend
    from slamorl_jax.agent.trainer import make_train
    from slamorl_jax.env import validate_params, with_derived_tables
    from slamorl_jax.env.params import with_values

    trainer = make_train(TINY)
    own = validate_params(with_derived_tables(with_values(trainer.env_params, gpus_per_node=8, max_nodes=2)))
    network_params = init_params(trainer.network, jax.random.key(0), NUM_FEATURES)
    policy_checkpoint.save_policy(tmp_path / "own", network_params, TINY, env_params=own)
    shutil.copy(Path(__file__).resolve().parent.parent / "docs" / "example_job.json", tmp_path / "job.json")
    monkeypatch.chdir(tmp_path)
    argv = [f"--checkpoint={tmp_path / 'own'}", *mode]
    outcome = call(lambda: recommend.main(argv), capsys, tmp_path)
    assert_refused(
        outcome, "this policy was trained on other env params than its config builds (gpus_per_node"
    )

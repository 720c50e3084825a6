"""Damaged checkpoints are refused with one line, never loaded as other numbers (issue 11, rows 6-8).

Every checkpoint carries SHA-256 digests of its arrays in its ``meta``; a file in the way of a
checkpoint, truncated array files and flipped bytes are :class:`CheckpointError`s naming the step, and
``--resume`` sets a damaged newest step aside and continues from the newest intact one.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from learner_fixtures import REPO_ROOT, TINY, Compiled, shared_trainer, trees_equal

from slamorl_jax import checkpoint as ckpt
from slamorl_jax import policy_checkpoint, training_loop
from slamorl_jax.array_checksum import META_DIGEST_KEY, META_KEY, meta_digest, signed_meta
from slamorl_jax.checkpoint_resume import restore_newest_intact

LEGACY = REPO_ROOT / "tests" / "data" / "legacy-policy-v1"


@pytest.fixture(scope="module")
def compiled() -> Compiled:
    """TINY's jitted functions (shared with the other learner test modules)."""
    return shared_trainer(TINY)


@pytest.fixture(scope="module")
def two_steps(compiled: Compiled, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run directory with steps 1 and 2 of different parameters (no training needed)."""
    root = tmp_path_factory.mktemp("run") / "checkpoints"
    manager = ckpt.make_manager(root)
    state = compiled.fresh()
    for update in (1, 2):
        params = jax.tree.map(lambda x, u=update: x + u, state.params)
        ckpt.save(manager, state.replace(params=params, update=jnp.int32(update)), TINY)
    return root


@pytest.fixture
def run_copy(two_steps: Path, tmp_path: Path) -> Path:
    """A copy of ``two_steps`` to damage."""
    return Path(shutil.copytree(two_steps, tmp_path / "checkpoints"))


def largest_file(directory: Path) -> Path:
    """The biggest file under ``directory`` (an item's array data)."""
    return max((p for p in directory.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)


def flip_bytes(path: Path, count: int = 64) -> None:
    """Invert ``count`` bytes in the middle of ``path``."""
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + count] = bytes(b ^ 0xFF for b in data[middle : middle + count])
    path.write_bytes(bytes(data))


def edit_digest(step_dir: Path, item: str) -> None:
    """Change one stored digest of ``item`` (as if its array's bytes had changed on disk)."""
    meta_file = step_dir / "meta" / "metadata"
    meta = json.loads(meta_file.read_text())
    first = sorted(meta[META_KEY][item])[0]
    meta[META_KEY][item][first] = "0" * 64
    meta_file.write_text(json.dumps(signed_meta(meta)))  # the meta's own checksum re-made to match


def assert_one_line(error: pytest.ExceptionInfo[ckpt.CheckpointError], *phrases: str) -> None:
    text = str(error.value)
    assert len(text.splitlines()) == 1 and len(text) < 500, text
    assert "TensorStore" not in text, text
    for phrase in phrases:
        assert phrase in text, text


def test_saves_carry_a_digest_of_every_array(two_steps: Path, compiled: Compiled) -> None:
    meta, _, step = ckpt.read_meta(two_steps)
    assert step == 2
    digests = meta[META_KEY]
    assert set(digests) == {"state", "policy"}
    assert len(digests["policy"]) == len(jax.tree.leaves(compiled.fresh().params))
    assert all(len(d) == 64 for d in digests["state"].values())
    assert meta[META_DIGEST_KEY] == meta_digest(meta)  # and one of the meta itself


def test_a_changed_meta_value_is_refused_and_resume_sets_its_step_aside(
    run_copy: Path, compiled: Compiled
) -> None:
    """A meta value changed on disk (here the update counter, as a flipped digit would) is refused
    with one line, never read as another run's settings; ``--resume`` sets that step aside."""
    meta_file = run_copy / "2" / "meta" / "metadata"
    meta_file.write_text(meta_file.read_text().replace('"update": 2', '"update": 7'))
    with pytest.raises(ckpt.CheckpointError) as error:
        policy_checkpoint.load_policy(run_copy)
    assert_one_line(error, str(run_copy / "2"), "meta does not match the checksum")
    lines: list[str] = []
    state = restore_newest_intact(run_copy, compiled.fresh(), report=lines.append)
    assert int(state.update) == 1 and (run_copy / "damaged-2").is_dir(), lines


def test_a_file_is_not_a_checkpoint(tmp_path: Path) -> None:
    """Row 6."""
    a_file = tmp_path / "hostname"
    a_file.write_text("host\n")
    with pytest.raises(ckpt.CheckpointError) as error:
        policy_checkpoint.load_policy(a_file)
    assert_one_line(error, str(a_file), "is a file")
    with pytest.raises(ckpt.CheckpointError) as error:
        policy_checkpoint.load_policy(tmp_path / "x\0y")
    assert_one_line(error, "does not exist")


@pytest.mark.parametrize("item", ["policy", "state"])
def test_truncated_array_data_is_one_line(
    run_copy: Path, compiled: Compiled, item: str, capfd: pytest.CaptureFixture[str]
) -> None:
    """Row 7: one line, without TensorStore's spec or "Exception ignored" reports on stderr."""
    data = largest_file(run_copy / "2" / item)
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
    with pytest.raises(ckpt.CheckpointError) as error:
        if item == "policy":
            policy_checkpoint.load_policy(run_copy)
        else:
            ckpt.restore_state(run_copy, compiled.fresh())
    assert_one_line(error, str(run_copy / "2"))
    assert "Exception ignored" not in capfd.readouterr().err


@pytest.mark.parametrize("damage", ["index", "manifest"])
@pytest.mark.parametrize("item", ["policy", "state"])
def test_a_damaged_index_is_damage_not_another_layout(
    run_copy: Path, compiled: Compiled, item: str, damage: str, capfd: pytest.CaptureFixture[str]
) -> None:
    """orbax reads the metadata of a step whose array index (the OCDBT tree under ``d/``) or manifest
    is damaged as ``None``; that was taken for arrays of another layout ("another JAX PRNG
    implementation?"), so ``--resume`` stopped instead of setting the step aside, and tracebacks
    followed the line."""
    if damage == "index":
        for index in (run_copy / "2" / item / "d").iterdir():
            index.write_bytes(index.read_bytes()[:100])
    else:
        (run_copy / "2" / item / "manifest.ocdbt").unlink()
    with pytest.raises(ckpt.CheckpointError) as error:
        if item == "policy":
            policy_checkpoint.load_policy(run_copy)
        else:
            ckpt.restore_state(run_copy, compiled.fresh())
    assert not isinstance(error.value, ckpt.IncompatibleCheckpointError), str(error.value)
    assert_one_line(error, str(run_copy / "2"))
    lines: list[str] = []
    state = restore_newest_intact(run_copy, compiled.fresh(), report=lines.append)
    assert int(state.update) == 1 and (run_copy / "damaged-2").is_dir(), lines
    err = capfd.readouterr().err
    assert "Exception ignored" not in err and "Traceback" not in err, err


@pytest.mark.parametrize("item", ["policy", "state"])
def test_flipped_bytes_are_refused(run_copy: Path, compiled: Compiled, item: str) -> None:
    """Row 8: damaged array data never loads as other numbers."""
    flip_bytes(largest_file(run_copy / "2" / item))
    with pytest.raises(ckpt.CheckpointError) as error:
        if item == "policy":
            policy_checkpoint.load_policy(run_copy)
        else:
            ckpt.restore_state(run_copy, compiled.fresh())
    assert_one_line(error, str(run_copy / "2"))


def test_a_changed_array_names_the_array(run_copy: Path) -> None:
    edit_digest(run_copy / "2", "policy")
    with pytest.raises(ckpt.CheckpointError) as error:
        policy_checkpoint.load_policy(run_copy)
    assert_one_line(error, "is damaged", "['params']", "checksum")
    assert policy_checkpoint.load_policy(run_copy / "1").step == 1  # the other step is untouched


def test_checkpoints_without_digests_still_load() -> None:
    """A policy saved before digests existed loads unchecked (the shipped ones are loaded by
    ``test_shipped_policy.py``)."""
    meta, _, step = ckpt.read_meta(LEGACY)
    assert META_KEY not in meta
    assert policy_checkpoint.load_policy(LEGACY).step == step


def test_resume_sets_a_damaged_newest_step_aside(run_copy: Path, compiled: Compiled) -> None:
    """Row 8: ``restore_newest_intact`` reports the damaged step, renames it, restores the previous."""
    edit_digest(run_copy / "2", "state")
    lines: list[str] = []
    state = restore_newest_intact(run_copy, compiled.fresh(), report=lines.append)
    assert int(state.update) == 1
    expected = jax.tree.map(lambda x: x + 1, compiled.fresh().params)
    assert trees_equal(state.params, expected)
    assert len(lines) == 1 and "damaged" in lines[0] and "damaged-2" in lines[0], lines
    assert ckpt.complete_steps(run_copy) == [1] and (run_copy / "damaged-2").is_dir()
    edit_digest(run_copy / "1", "state")  # the last intact step damaged too: nothing is left
    with pytest.raises(ckpt.CheckpointError, match="no intact checkpoint"):
        restore_newest_intact(run_copy, compiled.fresh(), report=lines.append)


def test_resume_sets_aside_a_newest_step_whose_policy_alone_is_damaged(
    run_copy: Path, compiled: Compiled
) -> None:
    """A step whose training state checks out but whose policy (what evaluate, recommend and export
    read) does not is damaged too: a complete run would otherwise resume as "complete" with a last
    policy no command can load."""
    edit_digest(run_copy / "2", "policy")
    lines: list[str] = []
    state = restore_newest_intact(run_copy, compiled.fresh(), report=lines.append)
    assert int(state.update) == 1 and (run_copy / "damaged-2").is_dir(), lines
    assert len(lines) == 1 and "damaged-2" in lines[0], lines


def test_resume_sets_nothing_aside_for_a_state_of_another_layout(run_copy: Path, compiled: Compiled) -> None:
    """Intact steps whose arrays have other shapes than the template's (another PRNG implementation's
    keys, another network) are not damage: ``--resume`` refuses them in one line and renames none
    (each used to be set aside as ``damaged-<step>``, after which nothing resumed)."""
    fresh = compiled.fresh()
    leaves, treedef = jax.tree.flatten(fresh.params)
    leaves[0] = jnp.zeros((leaves[0].shape[0] + 1, *leaves[0].shape[1:]), leaves[0].dtype)
    other = fresh.replace(params=jax.tree.unflatten(treedef, leaves))
    lines: list[str] = []
    with pytest.raises(ckpt.IncompatibleCheckpointError) as error:
        restore_newest_intact(run_copy, other, report=lines.append)
    assert_one_line(error, "other shapes or types", "no checkpoint was set aside")
    assert ckpt.complete_steps(run_copy) == [1, 2] and not lines
    assert int(restore_newest_intact(run_copy, fresh, report=lines.append).update) == 2


@pytest.mark.slow  # trains TINY twice (about 7 s warm); the fallback itself is tested above
def test_a_resumed_run_continues_past_a_damaged_step(
    compiled: Compiled, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The training loop resumes from the previous step and saves over the damaged one's number."""
    options = training_loop.RunOptions(
        checkpoint_dir=tmp_path / "checkpoints",
        log_dir=tmp_path / "logs",
        save_interval=TINY.updates_per_chunk,
        eval_episodes=0,
        progress=False,
    )
    assert training_loop.run_training(TINY, options) == 0
    last = TINY.num_updates
    flip_bytes(largest_file(options.checkpoint_dir / str(last) / "state"))
    edit_digest(options.checkpoint_dir / str(last), "state")
    capsys.readouterr()
    resumed = training_loop.RunOptions(**{**vars(options), "resume": True})
    assert training_loop.run_training(TINY, resumed) == 0
    err = capsys.readouterr().err
    assert f"damaged-{last}" in err and "trying the previous checkpoint" in err, err
    assert policy_checkpoint.load_policy(options.checkpoint_dir).step == last


def test_digests_without_the_policys_are_refused_not_loaded_unchecked(run_copy: Path) -> None:
    """Meta whose digests name the state's arrays only: the policy loaded unchecked, so damaged
    parameters read as other numbers. Only a checkpoint with no digests at all (older) loads so."""
    meta_file = run_copy / "2" / "meta" / "metadata"
    meta = json.loads(meta_file.read_text())
    meta[META_KEY] = {"state": meta[META_KEY]["state"]}
    meta_file.write_text(json.dumps(signed_meta(meta)))
    with pytest.raises(ckpt.CheckpointError) as error:
        policy_checkpoint.load_policy(run_copy)
    assert_one_line(error, "holds no checksums of its policy")


def test_an_export_pairs_the_parameters_with_their_own_steps_meta(
    run_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that saves step 2 between the export's loading step 1 and reading the meta: the copy
    held step 1's parameters with step 2's config and counters (and fresh digests hid it)."""
    load = policy_checkpoint.load_policy
    monkeypatch.setattr(policy_checkpoint, "load_policy", lambda source: load(Path(source) / "1"))
    exported = policy_checkpoint.export_policy(run_copy, tmp_path / "exported")
    meta, _, step = ckpt.read_meta(exported)
    assert step == 1 and meta["update"] == 1


def test_a_policy_that_loads_leaves_the_process_unraisable_hook_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every load installed the filter of abandoned restores, which drops any coroutine's report:
    a service that loads its policy lost reports of its own bugs for the rest of its life."""
    import sys

    def own_hook(unraisable: object) -> None:  # the service's own
        pass

    import logging

    monkeypatch.setattr(sys, "unraisablehook", own_hook)
    monkeypatch.setattr(sys, "excepthook", own_hook)
    filters = list(logging.getLogger("asyncio").filters)
    policy_checkpoint.load_policy(Path(__file__).resolve().parent.parent / "checkpoints" / "default")
    assert sys.unraisablehook is own_hook and sys.excepthook is own_hook
    assert logging.getLogger("asyncio").filters == filters

"""The Python API refuses what used to give a wrong answer silently (found by an audit of the library
as a researcher calls it): truncated jobs counted as finished, another env's action set under a
config's name, a shared catalogue written in place, points of the wrong shape in a hypervolume."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import numpy as np
import pytest

from slamorl_jax.agent.config import TrainConfig
from slamorl_jax.agent.trainer import make_train
from slamorl_jax.env import JobAllocationEnv, make, observe
from slamorl_jax.env.catalog import load_catalog
from slamorl_jax.env.params import with_values
from slamorl_jax.episodes import keep_allocation, run_episodes, summarise_episodes
from slamorl_jax.evaluation.pareto import hypervolume
from slamorl_jax.live_encoding import reported_job


def test_jobs_cut_short_by_the_step_limit_are_not_counted_as_finished() -> None:
    """With ``max_steps_in_episode=10`` the partial jobs were summarised as whole ones: their time so
    far against the whole job's reference, and deadlines not yet reached counted as met."""
    env, params = make("mixed")
    whole = run_episodes(env, params, keep_allocation, jax.random.key(0), 16)
    short_limit = with_values(params, max_steps_in_episode=10)
    cut = run_episodes(env, short_limit, keep_allocation, jax.random.key(0), 16)
    assert np.asarray(whole["finished"]).all()
    cut_short = np.asarray(cut["truncated"])
    assert cut_short.any() and not np.asarray(whole["truncated"]).any()
    assert not (np.asarray(cut["finished"]) & cut_short).any()
    summary = summarise_episodes(cut)
    assert summary["truncated"] == cut_short.sum()
    assert summary["episodes"] == np.asarray(cut["finished"]).sum() == 16 - cut_short.sum()
    done = np.asarray(cut["finished"])
    ratio = np.asarray(cut["episode_time_s"]) / np.asarray(cut["time_ref_s"])
    assert summary["time_vs_request"] == pytest.approx(ratio[done].mean())
    with pytest.raises(ValueError, match="no job ran to completion"):
        summarise_episodes({**cut, "finished": np.zeros(16, bool)})


def test_make_train_refuses_an_env_of_another_action_set() -> None:
    """The trainer built a 90-action network under a config that says ``paper`` (9 actions), and its
    checkpoints recorded the config's action set."""
    with pytest.raises(ValueError, match=r"'targets' action set but config\.actions is 'paper'"):
        make_train(TrainConfig(actions="paper"), JobAllocationEnv(action_set="targets"))


def test_make_train_names_a_config_of_another_type_and_keeps_configs_hashable() -> None:
    """A dict of settings failed in ``dataclasses`` ("must be called with a dataclass type"); layer
    sizes given as a list made the config unhashable (the grid's list was already a tuple)."""
    with pytest.raises(TypeError, match="config must be a TrainConfig"):
        make_train({"num_envs": 8})
    config = TrainConfig(hidden_sizes=[16, 16], target_cpus_per_gpu=[0, 2, 4, 6, 10])
    assert config == TrainConfig(hidden_sizes=(16, 16), target_cpus_per_gpu=(0, 2, 4, 6, 10))
    assert hash(config) == hash(TrainConfig(hidden_sizes=(16, 16), target_cpus_per_gpu=(0, 2, 4, 6, 10)))


def test_the_shared_catalogue_cannot_be_written_in_place() -> None:
    """``load_catalog()`` is cached: prices multiplied in place reached every env and policy after."""
    catalog = load_catalog()
    with pytest.raises(ValueError, match="read-only"):
        catalog.gpu_price_per_hour[:] = 0.0
    assert np.all(make("mixed")[1].gpu_price_per_hour > 0)


def test_hypervolume_refuses_points_of_another_shape() -> None:
    """``[K, 3]`` rows or a transposed ``[2, K]`` array were reshaped into other points."""
    points = np.array([[0.5, 0.5], [0.25, 0.75]])
    assert hypervolume(points[0]) == hypervolume(points[:1])
    for bad in (np.c_[points, [1.0, 1.0]], np.c_[points.T, [0.1, 0.9]]):  # [K, 3], [2, K]
        with pytest.raises(ValueError, match=r"shape \[K, 2\]"):
            hypervolume(bad)


def test_bad_keys_and_counts_are_named_not_failed_on_inside_jax() -> None:
    """``run_episodes`` with the key 0 said "invalid PRNG key data", with ``num_episodes=-1`` "slice
    limit_indices"; a policy sampled with a batch of keys said "categorical accepts a single key"."""
    from slamorl_jax.env import NUM_FEATURES
    from slamorl_jax.policy_checkpoint import load_policy

    env, params = make("mixed")
    with pytest.raises(TypeError, match="key must be one JAX PRNG key"):
        run_episodes(env, params, keep_allocation, 0, 4)
    for count in (-1, 0, 2.0, True):
        with pytest.raises(ValueError, match="num_episodes must be a positive integer"):
            run_episodes(env, params, keep_allocation, jax.random.key(0), count)
    with pytest.raises(TypeError, match="params must be EnvParams"):
        run_episodes(env, None, keep_allocation, jax.random.key(0), 4)
    with pytest.raises(TypeError, match="key must be one JAX PRNG key"):
        make_train(TrainConfig(num_envs=4)).init(0, params)
    policy = load_policy(Path(__file__).resolve().parent.parent / "checkpoints" / "default")
    obs, weights = np.zeros((2, NUM_FEATURES), np.float32), np.full((2, 3), 1 / 3, np.float32)
    with pytest.raises(TypeError, match="key must be one JAX PRNG key"):
        policy(obs, weights, jax.random.split(jax.random.key(0), 2))
    assert policy(obs, weights, jax.random.key(0)).shape == (2,)


def test_save_policy_refuses_what_load_policy_would(tmp_path: Path) -> None:
    """``save_policy`` wrote params of another network, or any dict, and an invalid config; loading
    them failed later with a hint about "another JAX PRNG implementation"."""
    from slamorl_jax.agent.networks import ActorCritic, init_params
    from slamorl_jax.env import NUM_FEATURES
    from slamorl_jax.policy_checkpoint import load_policy, save_policy

    config = TrainConfig(hidden_sizes=(8, 8))
    network = ActorCritic(config.network)
    params = init_params(network, jax.random.key(0), NUM_FEATURES)
    for wrong in (
        {"foo": 1},
        init_params(ActorCritic(TrainConfig(hidden_sizes=(8, 4)).network), jax.random.key(0), NUM_FEATURES),
    ):
        with pytest.raises(ValueError, match="params are not the network of this config"):
            save_policy(tmp_path / "p", wrong, config)
    with pytest.raises(ValueError, match="num_envs"):
        save_policy(tmp_path / "p", params, TrainConfig(hidden_sizes=(8, 8), num_envs=-5))
    assert not (tmp_path / "p").exists()
    save_policy(tmp_path / "p", params, config)
    assert load_policy(tmp_path / "p").config == config


def test_history_writers_refuse_what_their_loaders_would(tmp_path: Path) -> None:
    """``save_records`` and ``save_decisions`` wrote stores and logs their own loaders refused (an
    empty store, a ``.txt``, epochs of -5, a NaN in a decision), and a NumPy count raised TypeError."""
    import dataclasses

    from slamorl_jax.history.decisions import load_decisions, save_decisions
    from slamorl_jax.history.records import HistoryRecord, load_records, save_records

    good = HistoryRecord("imagenet-resnet50", "T4", 60, 90_000.0, 80.0, (1.0, 0.0, 0.0), 8, 32)
    for records, path, phrase in [
        ([], "h.json", "no records"),
        ([good], "h.txt", "must end in .json or .csv"),
        ([dataclasses.replace(good, epochs=-5)], "h.json", "record 0: epochs"),
        ([dataclasses.replace(good, deadline_s=float("nan"))], "h.csv", "record 0: deadline_s"),
        ([good, dataclasses.replace(good, preference=(5.0, 5.0, 5.0))], "h.json", "record 1: preference"),
    ]:
        with pytest.raises(ValueError, match=phrase):
            save_records(records, tmp_path / path)
    save_records([good], tmp_path / "h.csv")
    assert load_records(tmp_path / "h.csv") == [good]
    example = json.loads((Path(__file__).resolve().parent.parent / "docs" / "example_job.json").read_text())
    decision = {**example, "next_gpus": np.int64(8), "next_cpus": 32}
    for rows, path, phrase in [
        ([], "d.jsonl", "no decisions"),
        ([decision], "d.txt", "must end in .json or .jsonl"),
        ([{**decision, "next_gpus": 4.0}], "d.jsonl", "decision 0: next_gpus"),
        ([decision, {**decision, "elapsed_s": float("nan")}], "d.json", "decision 1: "),
    ]:
        with pytest.raises(ValueError, match=phrase):
            save_decisions(rows, tmp_path / path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h.csv"]
    save_decisions([decision], tmp_path / "d.jsonl")
    assert load_decisions(tmp_path / "d.jsonl")[0].next_gpus == 8


def test_one_env_functions_name_a_batched_state() -> None:
    """``observe`` and ``reported_job`` take one env's state: given a batch they failed with a
    concatenation error about shapes (9, 4) and (4, 6), and 'only 0-dimensional arrays can be
    converted to Python scalars'."""
    env, params = make("mixed")
    _, states = jax.jit(jax.vmap(env.reset, (0, None)))(jax.random.split(jax.random.key(0), 4), params)
    with pytest.raises(ValueError, match=r"batch of envs .*jax\.vmap\(observe"):
        jax.eval_shape(observe, states, params)  # the check is static: traced, not compiled, here
    with pytest.raises(ValueError, match=r"batch of envs .*jax\.tree\.map"):
        reported_job(states)
    one = jax.tree.map(lambda leaf: leaf[0], states)
    batched = jax.eval_shape(jax.vmap(observe, (0, None)), states, params)
    assert jax.eval_shape(observe, one, params).shape == batched.shape[1:]
    assert reported_job(one).epochs_done == 0


def test_a_history_rule_built_in_python_refuses_records_the_loader_would() -> None:
    """``HistoryStart.from_records`` took records built in Python unchecked: an unknown workload was
    a bare KeyError, epochs of -5 and weights of 5, 5, 5 became a table silently."""
    import dataclasses

    from slamorl_jax.history.lookup import HistoryStart, table_from_records
    from slamorl_jax.history.records import HistoryRecord

    good = HistoryRecord("imagenet-resnet50", "T4", 60, 90_000.0, 80.0, (1.0, 0.0, 0.0), 8, 32)
    for changes, phrase in [
        ({"workload": "no-such-model"}, "record 1: .*no-such-model"),
        ({"epochs": -5}, "record 1: epochs"),
        ({"preference": (5.0, 5.0, 5.0)}, "record 1: preference"),
        ({"preference": "balanced"}, "record 1: preference must be three weights"),
    ]:
        with pytest.raises(ValueError, match=phrase):
            HistoryStart.from_records([good, dataclasses.replace(good, **changes)])
    assert table_from_records([good]).gpus.tolist() == [8]


def test_an_incomplete_step_folder_is_named_as_one(tmp_path: Path) -> None:
    """A step whose save did not finish (no ``meta``) read as "no complete checkpoint in .../8
    (expected numbered step directories)", though it is one."""
    from slamorl_jax.checkpoint import CheckpointError
    from slamorl_jax.policy_checkpoint import load_policy

    (tmp_path / "checkpoints" / "4" / "meta").mkdir(parents=True)
    (tmp_path / "checkpoints" / "8").mkdir()
    with pytest.raises(CheckpointError, match=r"8 is an incomplete step .* complete steps are 4$"):
        load_policy(tmp_path / "checkpoints" / "8")


def test_run_episodes_refuses_params_validate_params_would() -> None:
    """Stale derived tables (``gpus_per_node`` changed, no ``with_derived_tables``) ran with the old
    tables' costs; a NaN noise gave NaN times; a step limit of 0 gave jobs of no epoch."""
    env, params = make("mixed")
    for changes, phrase in [
        ({"gpus_per_node": 2}, "are stale"),
        ({"epoch_time_noise": float("nan")}, "epoch_time_noise"),
        ({"max_steps_in_episode": 0}, "max_steps_in_episode"),
    ]:
        with pytest.raises(ValueError, match=phrase):
            run_episodes(env, with_values(params, **changes), keep_allocation, jax.random.key(0), 4)

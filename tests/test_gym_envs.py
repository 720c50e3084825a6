"""slamorl_jax.gym: the Gymnasium envs under Gymnasium's env checker and MO-Gymnasium's wrappers.

The README snippet (test_readme_interop.py) runs make_vec + MORecordEpisodeStatistics and
mo_gymnasium.make + LinearReward; here: the checker, the next-step autoreset, the episode returns
the statistics wrapper reports, and bad input.
"""

from __future__ import annotations

import pickle
import re
import warnings
from pathlib import Path

import gymnasium
import mo_gymnasium as mo_gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from slamorl_jax.env import EnvParams, make
from slamorl_jax.gym import ENV_ID, JobAllocationMOEnv, JobAllocationVectorEnv
from slamorl_jax.gym.batched import RESET_INFO_KEYS
from tests import test_gymnax_env as gymnax_env_tests

SHIPPED = Path(__file__).resolve().parent.parent / "checkpoints" / "default"


def short_jobs(scenario: str = "balanced") -> EnvParams:
    """The scenario's params with 2-3 epoch jobs."""
    return gymnax_env_tests.short_jobs(make(scenario)[1])


@pytest.mark.slow
def test_single_env_passes_the_gymnasium_env_checker() -> None:
    """check_env passes; its only warning is MO-Gymnasium's usual one about a non-scalar reward."""
    env = gymnasium.make(ENV_ID, scenario="balanced")
    assert isinstance(env.unwrapped, JobAllocationMOEnv)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)  # render() included: it returns None, warning as Gymnasium's envs do
    messages = [str(w.message) for w in caught]
    expected = ("reward returned by `step()` must be a float", "does not render")
    assert all(any(e in m for e in expected) for m in messages), messages
    assert env.unwrapped.reward_space.shape == (3,)


@pytest.mark.slow
def test_vector_env_next_step_autoreset_and_mo_episode_statistics() -> None:
    """A job's last step returns its last observation and flags; the env's next step shows the new
    job with zero reward and masked info; MORecordEpisodeStatistics' returns are the reward sums."""
    envs = gymnasium.make_vec(ENV_ID, num_envs=4, params=short_jobs())
    assert isinstance(envs, JobAllocationVectorEnv)
    stats = mo_gym.wrappers.vector.MORecordEpisodeStatistics(envs, gamma=1.0)
    obs, _ = stats.reset(seed=5)
    assert obs in envs.observation_space
    np.testing.assert_array_equal(stats.reset(seed=5)[0], obs)  # reseeding repeats the jobs
    totals, pending, seen = np.zeros((4, 3), np.float32), np.zeros(4, bool), 0
    for _ in range(8):
        obs, rewards, terminated, truncated, info = stats.step(envs.action_space.sample())
        assert obs in envs.observation_space and rewards.shape == (4, 3)
        np.testing.assert_array_equal(info["_episode_time_s"], ~pending)
        assert np.all(rewards[pending] == 0) and not np.any((terminated | truncated)[pending])
        totals[~pending] += rewards[~pending]
        done = terminated | truncated
        if done.any():
            np.testing.assert_allclose(info["episode"]["r"][done], totals[done], rtol=1e-5)
            seen += int(done.sum())
        totals[done] = 0
        pending = done
    assert seen >= 4


def test_bad_input_is_one_line() -> None:
    """Bad seeds, actions, options and constructor arguments raise one-line ValueErrors (checked
    before anything compiles)."""
    envs = JobAllocationVectorEnv(num_envs=4, params=short_jobs())
    one = JobAllocationMOEnv(params=short_jobs())
    n = one.action_space.n
    bad_calls = (
        (lambda: envs.step(np.zeros(3, int)), "4 integer action indices"),
        (lambda: envs.step(np.zeros(4)), "4 integer action indices"),
        # Outside the action space (the JAX env would clip them without a word).
        (lambda: envs.step(np.array([0, 1, n, 2])), f"must lie in the action space [0, {n})"),
        (lambda: envs.step(np.full(4, -1)), "must lie in the action space"),
        (lambda: one.step(n), "action must lie in the action space"),
        (lambda: one.step(-1), "action must lie in the action space"),
        (lambda: one.step(np.uint64(2**63)), "action must lie in the action space"),
        (lambda: one.step(2.0), "action must be one integer action index"),
        (lambda: one.step(True), "action must be one integer action index"),
        (lambda: one.step([1, 2]), "action must be one integer action index"),
        (lambda: one.reset(seed=True), "one integer"),
        (lambda: one.reset(seed=-1), "one integer >= 0"),
        (lambda: envs.reset(seed=-3), "one integer >= 0"),
        (lambda: envs.reset(seed=[1, 2]), "a list of seeds holds one per env: 4, got (2,)"),
        (lambda: envs.reset(seed=[1, 2, -1, 3]), "each seed of the list must be an integer >= 0 or None"),
        (lambda: envs.reset(seed=[1, 2, True, 3]), "each seed of the list"),
        (lambda: envs.reset(seed=np.zeros((2, 2), int)), "one per env: 4, got (2, 2)"),
        (lambda: envs.reset(seed=2.5), "one integer >= 0 or a list of 4, one per env"),
        (lambda: one.reset(seed=[1]), "seed must be one integer >= 0"),
        (lambda: envs.reset(options={"params": 1}), "unknown reset option"),
        (lambda: envs.reset(options=[1]), "options must be a dict"),
        (lambda: envs.reset(options={"env_params": 1}), "must be EnvParams"),
        (lambda: JobAllocationVectorEnv(num_envs=0), "positive integer"),
        (lambda: JobAllocationVectorEnv(max_episode_steps=0), "max_episode_steps must be a positive integer"),
        (lambda: JobAllocationVectorEnv(scenario=""), "unknown scenario ''"),  # it built "mixed"
        (lambda: JobAllocationMOEnv(scenario=""), "unknown scenario ''"),
        (lambda: JobAllocationMOEnv(render_mode="human"), "render_mode"),
        (lambda: JobAllocationMOEnv(scenario="nope"), "unknown scenario"),
    )
    for call, words in bad_calls:
        with pytest.raises(ValueError, match=re.escape(words)) as err:
            call()
        assert "\n" not in str(err.value)
    with pytest.raises(TypeError, match="params must be EnvParams, got str"):
        JobAllocationMOEnv(params="balanced")
    # A leaf of the wrong type through gymnasium.make: one line (make appended its keyword arguments to
    # a TypeError, the whole EnvParams over 200 lines).
    bad_leaf = short_jobs().replace(cpu_step=4)
    for make_env in (
        lambda: gymnasium.make(ENV_ID, params=bad_leaf),
        lambda: gymnasium.make_vec(ENV_ID, params=bad_leaf),
    ):
        with pytest.raises(ValueError, match=r"cpu_step must be an integer array") as err:
            make_env()
        assert "\n" not in str(err.value) and len(str(err.value)) < 300


def test_a_list_of_seeds_runs_each_env_as_a_single_env_seeded_alike() -> None:
    """Gymnasium's vector form ``reset(seed=[...])`` (it was refused): env ``i`` runs the jobs, and
    after its job ends the next ones, that a single env reset with ``seed[i]`` runs; ``None`` entries
    draw their own seed, and the same list repeats the jobs."""
    seeds = [7, 11, 7]
    envs = JobAllocationVectorEnv(num_envs=3, params=short_jobs())
    singles = [JobAllocationMOEnv(params=short_jobs()) for _ in seeds]
    obs, info = envs.reset(seed=seeds)
    firsts = [one.reset(seed=seed) for one, seed in zip(singles, seeds, strict=True)]
    np.testing.assert_array_equal(obs[0], obs[2])  # the same seed, the same job
    assert not np.array_equal(obs[0], obs[1])
    for i, (single_obs, single_info) in enumerate(firsts):
        np.testing.assert_allclose(obs[i], single_obs, rtol=1e-6, atol=1e-7)
        assert info["workload"][i] == single_info["workload"]
    rng, ended = np.random.default_rng(0), 0
    for _ in range(7):  # jobs of 2-3 epochs: every env ends one and starts the next
        actions = rng.integers(0, envs.single_action_space.n, size=3)
        obs, rewards, terminated, truncated, _ = envs.step(actions)
        for i, one in enumerate(singles):
            single_obs, single_reward, single_term, single_trunc, _ = one.step(int(actions[i]))
            np.testing.assert_allclose(obs[i], single_obs, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(rewards[i], single_reward, rtol=1e-5, atol=1e-6)
            assert (terminated[i], truncated[i]) == (single_term, single_trunc)
        ended += int((terminated | truncated).sum())
    assert ended >= 3
    np.testing.assert_array_equal(envs.reset(seed=seeds)[0], envs.reset(seed=np.array(seeds))[0])
    mixed = envs.reset(seed=[None, 11, None])[0]
    np.testing.assert_allclose(mixed[1], firsts[1][0], rtol=1e-6, atol=1e-7)
    # The list seeds the vector env's own generator too: the unseeded resets after it repeat (they
    # drew from a generator never seeded), the None entries of the list included.
    again = JobAllocationVectorEnv(num_envs=3, params=short_jobs())
    for one in (envs, again):
        one.reset(seed=[None, 11, None])
    for _ in range(2):
        np.testing.assert_array_equal(envs.reset()[0], again.reset()[0])


def test_make_vec_passes_a_step_limit_the_vector_env_applies() -> None:
    """``gymnasium.make_vec`` hands ``max_episode_steps`` (the caller's or the spec's) to the vector
    env, which refused the keyword with a TypeError; each job is now truncated after that many
    decisions, as ``gymnasium.make``'s ``TimeLimit`` truncates a single env."""
    envs = gymnasium.make_vec(ENV_ID, num_envs=4, max_episode_steps=2, scenario="balanced")
    assert int(envs.unwrapped.params.max_steps_in_episode) == 2
    envs.reset(seed=0)
    envs.step(np.zeros(4, int))
    _, _, terminated, truncated, _ = envs.step(np.zeros(4, int))
    assert np.all(terminated | truncated) and truncated.any()
    envs.reset(options={"env_params": short_jobs()})  # new params keep the limit, as TimeLimit would
    assert int(envs.unwrapped.params.max_steps_in_episode) == 2
    with pytest.raises(ValueError, match="max_steps_in_episode"):  # validation's bound, named
        JobAllocationVectorEnv(max_episode_steps=10**7)


def test_numpy_seeds_work_in_both_envs() -> None:
    """The single env took only Python ints (Gymnasium's own error for ``np.int64``) while the vector
    env took NumPy's too; both take them now, and the same seed gives the same job."""
    one = JobAllocationMOEnv(params=short_jobs())
    np.testing.assert_array_equal(one.reset(seed=np.int64(3))[0], one.reset(seed=3)[0])


def test_switching_params_at_reset_switches_the_reward_space() -> None:
    """Another reward clip and SLA bonuses bound the rewards otherwise: after
    ``reset(options={"env_params": ...})`` ``reward_space`` is the new params' (it stayed the first
    params', and MO-Gymnasium's clipping and normalising wrappers read it), and every reward lies in it."""
    from slamorl_jax.env import JobAllocationEnv
    from slamorl_jax.env.params import with_values

    other = with_values(short_jobs(), reward_clip=0.5, sla_met_bonus=10.0, all_slas_bonus=50.0)
    bounds = JobAllocationEnv().reward_space(other)
    for env in (JobAllocationMOEnv(scenario="balanced"), JobAllocationVectorEnv(4, scenario="balanced")):
        before = env.reward_space.high.copy()
        env.reset(seed=0, options={"env_params": other})
        np.testing.assert_array_equal(env.reward_space.high, np.asarray(bounds.high, np.float32))
        np.testing.assert_array_equal(env.reward_space.low, np.asarray(bounds.low, np.float32))
        assert not np.array_equal(before, env.reward_space.high)
        for _ in range(8):
            rewards = np.reshape(env.step(_keep(env))[1], (-1, 3))
            assert all(env.reward_space.contains(r.astype(np.float32)) for r in rewards)


def _keep(env: JobAllocationMOEnv | JobAllocationVectorEnv) -> object:
    """The no-op action, one per job."""
    from slamorl_jax.env import NO_OP_ACTION

    return np.full((env.num_envs,), NO_OP_ACTION) if isinstance(env, JobAllocationVectorEnv) else NO_OP_ACTION


def test_reset_info_gives_a_loaded_policy_its_first_decision() -> None:
    """``reset``'s info holds each new job's first objective weights and identity, so a loaded policy
    drives the Gymnasium envs from the first decision on: the weights are the JAX env's own
    (``JobAllocationVectorEnv`` masks them like ``step``'s info), and an episode runs to its end."""
    from slamorl_jax.policy_checkpoint import load_policy

    policy = load_policy(SHIPPED)
    one = JobAllocationMOEnv(scenario="balanced", action_set=policy.config.actions, params=short_jobs())
    obs, info = one.reset(seed=4)
    assert set(info) == set(RESET_INFO_KEYS) == {"weights", "workload", "gpu_type", "scenario", "preference"}
    np.testing.assert_array_equal(info["weights"], np.asarray(one._job._carry.state.weights[0]))
    for _ in range(10):
        action = int(policy(obs[None], info["weights"][None])[0])
        obs, _, terminated, truncated, info = one.step(action)
        if terminated or truncated:
            break
    assert terminated or truncated
    # Stepping on without reset() shows the next job with reset's info: the policy acts on.
    next_obs, reward, terminated, truncated, next_info = one.step(action)
    assert set(next_info) == set(RESET_INFO_KEYS) and not (terminated or truncated)
    np.testing.assert_array_equal(reward, np.zeros(3, np.float32))
    np.testing.assert_array_equal(next_info["weights"], np.asarray(one._job._carry.state.weights[0]))
    assert int(policy(next_obs[None], next_info["weights"][None])[0]) >= 0
    envs = JobAllocationVectorEnv(num_envs=3, scenario="balanced", params=short_jobs())
    obs, info = envs.reset(seed=4)
    assert info["weights"].shape == (3, 3) and info["_weights"].all()
    assert np.asarray(policy(obs, info["weights"])).shape == (3,)


def test_the_vector_step_that_shows_a_new_job_gives_resets_info() -> None:
    """On the step that only shows an env's new job, its ``info`` held the figures of a step the env
    took and threw away (54 s of time, one reallocation) with every mask false, and never the new
    job's identity. It is reset's info now (the new job's, masks true), as on Gymnasium's own vector
    envs, and zeros with masks false for the rest; the stepping envs' info is as before."""
    envs = JobAllocationVectorEnv(num_envs=4, scenario="balanced", params=short_jobs())
    envs.reset(seed=2)
    pending, checked = np.zeros(4, bool), 0
    for _ in range(8):
        shown_job = {
            name: np.asarray(getattr(envs._jobs._carry.state.job, name)) for name in RESET_INFO_KEYS[1:]
        }
        shown_weights = np.asarray(envs._jobs._carry.state.weights)
        _, _, terminated, truncated, info = envs.step(envs.action_space.sample())
        for name in RESET_INFO_KEYS:
            assert info[f"_{name}"].all(), name
        np.testing.assert_array_equal(info["_episode_time_s"], ~pending)
        if pending.any():
            checked += 1
            for name in ("episode_time_s", "reallocations", "reallocated", "mean_gpu_util"):
                assert not np.any(info[name][pending]), name
            for name, value in shown_job.items():
                np.testing.assert_array_equal(info[name][pending], value[pending])
            np.testing.assert_array_equal(info["weights"][pending], shown_weights[pending])
        pending = terminated | truncated
    assert checked, "no job ended: the check never ran"


def test_the_envs_pickle_and_carry_on_identically() -> None:
    """A pickled env (multiprocessing, a saved experiment) resumes the same jobs: its jitted functions
    are fetched again, the jobs travel as arrays."""
    for make_env in (
        lambda: JobAllocationMOEnv(params=short_jobs()),
        lambda: JobAllocationVectorEnv(num_envs=3, params=short_jobs()),
    ):
        env = make_env()
        env.reset(seed=3)
        copy = pickle.loads(pickle.dumps(env))
        actions = [env.action_space.sample() for _ in range(4)]
        for action in actions:
            want, got = env.step(action), copy.step(action)
            np.testing.assert_array_equal(got[0], want[0])
            np.testing.assert_array_equal(got[1], want[1])


def test_render_returns_none_with_a_warning_and_mo_sync_vector_env_runs() -> None:
    for env in (JobAllocationMOEnv(), JobAllocationVectorEnv(num_envs=2)):
        with pytest.warns(UserWarning, match="does not render"):
            assert env.render() is None
    # Copies of the single env in MO-Gymnasium's own vector env (README: not Gymnasium's "sync").
    envs = mo_gym.wrappers.vector.MOSyncVectorEnv([lambda: JobAllocationMOEnv(params=short_jobs())] * 2)
    envs.reset(seed=0)
    rewards = envs.step(envs.action_space.sample())[1]
    assert rewards.shape == (2, 3)

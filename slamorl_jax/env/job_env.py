"""``JobAllocationEnv``: one ML training job on a GPU cluster, re-allocated every epoch.

Functional, gymnax-style API (pure functions of arrays; jit, vmap and scan them freely)::

    env = JobAllocationEnv()
    params = env.default_params                       # or scenario_params("deadline-critical")
    obs, state = env.reset(key, params)
    obs, state, reward, terminated, truncated, info = env.step(key, state, action, params)
    # a batch at once, as vmap(env.step) but building new jobs only where one ended:
    obs, state, reward, terminated, truncated, info = env.step_batch(keys, state, action, params)

Episode: one training job of ``job.epochs`` epochs; each ``step`` is one decision: the action changes
the allocation, then one epoch runs. The job runs on its hidden true constants (``job_truth.py``); the
agent sees its workload's profile and what the job has measured (``online_model.py``). A GPU change
checkpoints and restarts the job (``reallocation_pause_s``, 30 s: Pollux's simulator constant
``rescale_time``, not a measurement); a CPU-only change restarts the data loaders
(``cpu_reallocation_pause_s``); both pauses are billed. Random
contention (a noisy neighbour or a congested link: compute x (1 + ``contention_compute_slowdown``),
inter-node sync x (1 + ``contention_network_slowdown``)) starts with ``contention_start_prob`` an
epoch and ends with ``contention_end_prob``; a GPU change restarts the job on a fresh placement,
which leaves it (and a mid-run event of its nodes, ``shifts.py``).
The episode terminates when the last epoch completes; it is truncated (never by default) after
``max_steps_in_episode`` decisions. ``step`` auto-resets: when the episode ends it returns the first
observation of a new job, and the last observation of the old one in ``info["final_observation"]``.

Observation: float32 features in [0, 1]: the paper's 21, then the forecast block
(``observation.FEATURE_NAMES``, ``forecast.py``).
Actions: the env's action set (``action_sets.py``): ``paper`` = the 9 moves GPU {-1, 0, +1} x
CPU {-step, 0, +step}; ``targets`` = those 9 and 80 absolute targets; ``targets_relocate``
(default) = those and relocate (the same allocation on fresh nodes, one GPU pause). An action index
outside the set is clipped to it (-1 acts as 0, one past the end as the last action). ``step`` takes
one integer index (shape ``()``; ``step_batch`` one per env): a float, bool or string action raises
``TypeError`` and a batch ``ValueError``, when traced (dtypes and shapes are static under ``jit``, so
the checks cost a compiled step nothing); so does a ``key`` that is not one PRNG key, or ``params``
that are not ``EnvParams``.
Reward: a float32 vector over ``objectives.OBJECTIVES``:

* ``time`` = -(epoch time + pause) / T_ref, clipped at ``-reward_clip``;
* ``cost`` = -(epoch cost) / C_ref, clipped at ``-reward_clip``;
* ``sla``  = -(mean of the six severities) / epochs, plus at the last epoch
  ``sla_met_bonus x (number of the six job-level SLAs met) + all_slas_bonus x [all six met]``.

T_ref and C_ref are the job's true time and cost at its requested allocation, so a whole episode's
time and cost rewards are about -T / T_ref and -C / C_ref for any workload. ``reward_space`` bounds
each. Why the end-of-job sizes (2 per SLA, 4 more for all six): evaluation ranks a job's outcome
by the SLAs it meets first (the hindsight oracle picks the allocation that meets the most, then the
best time and cost), so one SLA must be worth more than what a policy can gain on time or cost. With
the presets' SLA weight 0.2, one SLA is worth 0.4 of scalarised return, as much as a time-preference
job (weight 0.6) finishing 0.67 x T_ref sooner, beyond the usual gap between good allocations;
meeting all six is worth 0.8 more again, because "all SLAs met" is the rate evaluation reports.

``info`` (fixed structure every step): ``weights`` (adaptive weights for the returned observation),
``step_weights`` (those in force when the action was taken), ``final_weights`` (those of the pre-reset
``final_observation``), ``reallocated`` (whether the action changed the allocation), ``severities`` and
``sla_met`` of the epoch, ``projected_remaining_time_s`` and ``projected_remaining_cost_usd`` (the
advanced job's remaining epochs at its latest epoch rate; 0 at its end), and the episode figures of the
job that the step advanced (meaningful when it is done): ``episode_time_s``, ``episode_cost_usd``,
``time_ref_s``, ``cost_ref_usd``, ``deadline_met``, ``budget_met``, ``job_sla_met`` (6 job-level checks,
``objectives.py``), ``all_slas_met``, ``sla_compliance`` (fraction of the six met), ``mean_severity``,
``mean_gpu_util`` and ``mean_cpu_util`` (time-weighted over the job), ``reallocations``, ``epochs``,
``workload``, ``gpu_type``, ``scenario``, ``preference``, plus ``terminated``, ``truncated``,
``final_observation`` and ``final_state`` (the pre-reset state: ``env.get_obs(final_state, params)`` is
``final_observation``, for callers that need it only sometimes). No host callbacks and no Python control
flow on traced values.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from gymnax.environments.environment import Environment

from slamorl_jax.env import action_sets, batched_step, shifts, spaces
from slamorl_jax.env import draws as d
from slamorl_jax.env.actions import clip_allocation
from slamorl_jax.env.catalog import Catalog
from slamorl_jax.env.defaults import catalog_or_default
from slamorl_jax.env.episode_figures import episode_figures
from slamorl_jax.env.epoch_readings import epoch_readings, unstarted_state
from slamorl_jax.env.job_generator import initial_allocation, initial_metrics, sample_job_row
from slamorl_jax.env.job_model import billed_usd, epoch_metrics
from slamorl_jax.env.objectives import NUM_OBJECTIVES
from slamorl_jax.env.observation import observe
from slamorl_jax.env.online_model import epoch_surprise, record_epoch
from slamorl_jax.env.params import EnvParams, cluster_bounds
from slamorl_jax.env.pauses import move_pause_s
from slamorl_jax.env.scenarios import check_scenario, scenario_params
from slamorl_jax.env.state import EnvState, check_state
from slamorl_jax.env.validation import check_one_configuration

Info = dict[str, jax.Array]


def truncated_after(next_state: EnvState, terminated: jax.Array, params: EnvParams) -> jax.Array:
    """Whether a step that led to ``next_state`` truncated its episode: the step limit reached by a
    job that did not finish on it."""
    return jnp.logical_and(next_state.steps >= params.max_steps_in_episode, jnp.logical_not(terminated))


class JobAllocationEnv(Environment[EnvState, EnvParams]):
    """SLA-aware GPU/CPU re-allocation of one ML training job per episode (see module docstring).

    A gymnax ``Environment``: ``reset``/``step`` are overridden (the same contract, keeping this env's
    draws and its richer ``info``), and ``reset_env``/``step_env``, ``get_obs``, ``is_terminal``,
    ``is_truncated``, ``discount`` and the four spaces are gymnax's hooks. ``scenario`` names the
    scenario of ``default_params`` (what ``gymnax.make`` returns).
    """

    reward_dim = NUM_OBJECTIVES
    name = "JobAllocation-v0"

    def __init__(
        self,
        catalog: Catalog | None = None,
        action_set: str = action_sets.DEFAULT_ACTION_SET,
        scenario: str = "mixed",
        branch_on_init_strategy: bool = True,
    ) -> None:
        # A new job's first readings come from its table row unless the params' start strategy
        # draws random allocations, when the model is evaluated (``job_generator.initial_metrics``).
        # True: a ``lax.cond`` on the params skips the model otherwise (free on a CPU; on a GPU its
        # predicate is copied to the host every time jobs are built). False: both are computed and
        # one is selected. The same states either way; ``benchmarks.env_throughput
        # --also-branch-free`` times the two.
        self.branch_on_init_strategy = branch_on_init_strategy
        self.scenario = check_scenario(scenario)
        self.catalog = catalog_or_default(catalog)
        self.action_set = action_sets.check_action_set(action_set)
        self._num_actions = action_sets.num_actions(action_set)

    def __repr__(self) -> str:
        return f"JobAllocationEnv(action_set={self.action_set!r}, scenario={self.scenario!r})"

    @property
    def num_actions(self) -> int:
        """Number of actions of the env's action set."""
        return self._num_actions

    @functools.cached_property
    def default_params(self) -> EnvParams:
        """Defaults of the calibration cluster with the env's scenario (``mixed`` unless chosen; built
        once per env)."""
        return scenario_params(self.scenario, self.catalog)

    # Spaces (gymnax's classes, ``spaces.py``) ------------------------------------------------
    def action_space(self, params: EnvParams | None = None) -> spaces.Discrete:
        """The re-allocation actions of the env's action set."""
        return spaces.action_space(self.num_actions)

    def observation_space(self, params: EnvParams | None = None) -> spaces.Box:
        """``NUM_FEATURES`` features in [0, 1]."""
        return spaces.observation_space()

    def reward_space(self, params: EnvParams | None = None) -> spaces.Box:
        """Bounds of the (time, cost, sla) reward vector under ``params``."""
        return spaces.reward_space(self.params_or_default(params))

    def state_space(self, params: EnvParams | None = None) -> spaces.Dict:
        """The ``EnvState`` structure as nested gymnax ``Dict`` and ``Box`` spaces (``spaces.py``)."""
        params = self.params_or_default(params)
        return spaces.state_space(jax.eval_shape(self.reset_env, jax.random.key(0), params)[1])

    # gymnax hooks ----------------------------------------------------------------------------
    def get_obs(
        self, state: EnvState, params: EnvParams | None = None, key: jax.Array | None = None
    ) -> jax.Array:
        """The observation of ``state`` (``observation.observe``; deterministic, ``key`` is unused)."""
        check_state(state)
        return observe(state, self.params_or_default(params))

    def is_terminated(self, state: EnvState, params: EnvParams | None = None) -> jax.Array:
        """Whether the job of ``state`` has run all its epochs."""
        return state.epoch >= state.job.epochs

    def is_terminal(self, state: EnvState, params: EnvParams | None = None) -> jax.Array:
        """gymnax's name for :meth:`is_terminated` (natural termination only, no time limit)."""
        return self.is_terminated(state, params)

    def is_truncated(self, state: EnvState, params: EnvParams | None = None) -> jax.Array:
        """Whether ``state`` has reached the ``max_steps_in_episode`` decision limit."""
        params = self.params_or_default(params)
        return state.steps >= params.max_steps_in_episode

    def discount(self, state: EnvState, params: EnvParams | None = None) -> jax.Array:
        """0.0 once the job has terminated, else 1.0 (the bootstrap mask; truncation keeps 1.0)."""
        return jnp.where(self.is_terminated(state, params), 0.0, 1.0).astype(jnp.float32)

    def reset_env(self, key: jax.Array, params: EnvParams) -> tuple[jax.Array, EnvState]:
        """gymnax's reset hook: the same as :meth:`reset`."""
        return self.reset(key, params)

    def step_env(
        self, key: jax.Array, state: EnvState, action: jax.Array | int, params: EnvParams
    ) -> tuple[jax.Array, EnvState, jax.Array, jax.Array, Info]:
        """gymnax's step hook: one decision and epoch with no auto-reset and no truncation:
        ``(obs, state, reward, terminated, info)``. :meth:`step` with the same key advances the job
        identically, then adds truncation and the auto-reset."""
        check_one_configuration(params)
        u = d.uniforms(key, d.STEP_DRAWS + d.RESET_DRAWS)[: d.STEP_DRAWS]
        next_state, reward, terminated, info = self.transition(u, state, action, params)
        return observe(next_state, params), next_state, reward, terminated, info

    # Reset ----------------------------------------------------------------------------------
    def params_or_default(self, params: EnvParams | None) -> EnvParams:
        """``params``, or :attr:`default_params` when ``None``; ``TypeError`` for anything else (a
        trace-time check: it costs a compiled step nothing)."""
        if params is None:
            return self.default_params
        if not isinstance(params, EnvParams):
            raise TypeError(f"params must be EnvParams (or None: the defaults), got {type(params).__name__}")
        return params

    def reset(self, key: jax.Array, params: EnvParams | None = None) -> tuple[jax.Array, EnvState]:
        """Draw a new job and return its first observation and state."""
        params = self.params_or_default(params)
        check_one_configuration(params)  # a sweep's stacked params, unmapped: ValueError naming a field
        state = self.reset_from_draws(d.uniforms(key, d.RESET_DRAWS), params)
        return observe(state, params), state

    def reset_from_draws(self, u: jax.Array, params: EnvParams) -> EnvState:
        """The reset state for the ``RESET_DRAWS`` uniforms ``u`` (``draws.py`` names each slot)."""
        u = d.as_tuple(u)
        job, row = sample_job_row(u, params)
        gpus, cpus = initial_allocation(u, job, params)
        start, end = params.contention_start_prob, params.contention_end_prob
        stationary = start / jnp.maximum(start + end, 1e-9)
        m = initial_metrics(job, row, gpus, cpus, params, branch=self.branch_on_init_strategy)
        return unstarted_state(job, gpus, cpus, m, u[d.CONTENTION_AT_START] < stationary, params)

    def place(self, state: EnvState, gpus: jax.Array, cpus: jax.Array, params: EnvParams) -> EnvState:
        """A job that has not run an epoch yet (a ``reset`` state), started at ``(gpus, cpus)`` instead.

        The allocation is clipped to the cluster as an action's would be, and the readings are the
        profile's forecast for it, as at reset; the job, its contention and its counters are kept.
        Evaluation uses it to start the same jobs at baseline and oracle allocations.
        """
        check_state(state)
        gpus, cpus = clip_allocation(
            jnp.asarray(gpus, jnp.int32), jnp.asarray(cpus, jnp.int32), *cluster_bounds(params)
        )
        m = epoch_metrics(state.job.profile, gpus, cpus, params)
        return unstarted_state(state.job, gpus, cpus, m, state.contended, params)

    # Step -----------------------------------------------------------------------------------
    def step(
        self,
        key: jax.Array,
        state: EnvState,
        action: jax.Array | int,
        params: EnvParams | None = None,
    ) -> tuple[jax.Array, EnvState, jax.Array, jax.Array, jax.Array, Info]:
        """One decision and one epoch; auto-resets a finished job (see module docstring)."""
        params = self.params_or_default(params)
        check_one_configuration(params)
        u = d.uniforms(key, d.STEP_DRAWS + d.RESET_DRAWS)
        return self.step_from_draws(u[: d.STEP_DRAWS], u[d.STEP_DRAWS :], state, action, params)

    def step_from_draws(
        self,
        u_step: jax.Array,
        u_reset: jax.Array,
        state: EnvState,
        action: jax.Array | int,
        params: EnvParams,
    ) -> tuple[jax.Array, EnvState, jax.Array, jax.Array, jax.Array, Info]:
        """``step`` with explicit uniforms: ``STEP_DRAWS`` for the epoch, ``RESET_DRAWS`` for a reset."""
        next_state, reward, terminated, truncated, info = self.advance_from_draws(
            u_step, state, action, params
        )
        done = jnp.logical_or(terminated, truncated)
        reset_state = self.reset_from_draws(u_reset, params)
        state_out = jax.tree.map(lambda r, s: jnp.where(done, r, s), reset_state, next_state)
        obs, info = self.finish_step(state_out, next_state, terminated, truncated, info, params)
        return obs, state_out, reward, terminated, truncated, info

    def step_batch(
        self,
        keys: jax.Array,
        state: EnvState,
        action: jax.Array,
        params: EnvParams | None = None,
        reset_slots: int | None = None,
        reset_by: str | None = None,
    ) -> tuple[jax.Array, EnvState, jax.Array, jax.Array, jax.Array, Info]:
        """``vmap(step)`` over a batch of envs (leading axis of ``keys``, ``state`` and ``action``),
        building fresh jobs only for the envs whose job ended (``batched_step.py``; the trainer's
        step)."""
        params = self.params_or_default(params)
        return batched_step.step_batch(self, keys, state, action, params, reset_slots, reset_by)

    def advance_from_draws(
        self, u_step: jax.Array, state: EnvState, action: jax.Array | int, params: EnvParams
    ) -> tuple[EnvState, jax.Array, jax.Array, jax.Array, Info]:
        """A step's transition with no reset: ``(next state, reward, terminated, truncated, info)``."""
        next_state, reward, terminated, info = self.transition(u_step, state, action, params)
        return next_state, reward, terminated, truncated_after(next_state, terminated, params), info

    def finish_step(
        self,
        state_out: EnvState,
        next_state: EnvState,
        terminated: jax.Array,
        truncated: jax.Array,
        info: Info,
        params: EnvParams,
    ) -> tuple[jax.Array, Info]:
        """A step's observation of ``state_out`` (``next_state``, or the next job's after a reset) and
        its ``info`` completed with the step's end flags and the pre-reset ``next_state``."""
        # Two separate calls, so a caller that never reads final_observation (it may read
        # final_state and observe it only when needed, as the trainer does) does not pay for it.
        obs = observe(state_out, params)
        final_obs = observe(next_state, params)
        info = {
            **info,
            "weights": state_out.weights,
            "final_weights": next_state.weights,
            "terminated": terminated,
            "truncated": truncated,
            "final_observation": final_obs,
            "final_state": next_state,
        }
        return obs, info

    def transition(
        self, u: jax.Array, state: EnvState, action: jax.Array | int, params: EnvParams
    ) -> tuple[EnvState, jax.Array, jax.Array, Info]:
        """Apply ``action`` and run one epoch (no reset): next state, reward, terminated, info."""
        u = d.as_tuple(u)
        check_state(state)  # type and shape are static: checked when traced
        job = state.job
        action = action_sets.traced_as_array(action)
        action_sets.check_action_dtype(action)  # dtype and shape are static: checked when traced
        if jnp.ndim(action) != 0:
            raise ValueError(
                f"action must be one action index (shape ()), got shape {jnp.shape(action)}: step a "
                "batch with env.step_batch or jax.vmap(env.step)"
            )
        action = action_sets.clip_action(action, self.action_set)
        # A preemption (shifts.py) restarts the job on fewer GPUs before this epoch, ahead of the
        # action, which then applies from there; the restart pause is billed with the epoch.
        start_gpus, start_cpus, restart = shifts.preemption(
            state.gpus, state.cpus, job.shift_value, shifts.preempts(job, state.epoch), params
        )
        gpus, cpus = action_sets.apply(action, start_gpus, start_cpus, params)
        # Relocating (targets_relocate) restarts the job on fresh nodes at the same allocation.
        relocate = action_sets.relocates(action, self.action_set)
        changed = jnp.logical_or(jnp.logical_or(gpus != start_gpus, cpus != start_cpus), relocate)
        # A GPU change (the agent's or a preemption's) or a relocation restarts the job on a fresh
        # placement: it leaves the contention of its old nodes and its event if that was its
        # nodes' (shifts.py).
        restarted = jnp.logical_or(jnp.logical_or(start_gpus != state.gpus, gpus != start_gpus), relocate)
        relocated = jnp.logical_and(restarted, params.moves_leave_contention)
        left = jnp.logical_or(state.event_left, shifts.leaves(job, state.epoch, relocated))
        contended = jnp.where(
            jnp.logical_and(state.contended, jnp.logical_not(relocated)),
            u[d.CONTENTION_SWITCH] >= params.contention_end_prob,
            u[d.CONTENTION_SWITCH] < params.contention_start_prob,
        )
        spell, node_factor = shifts.node_slowdown(job, state.epoch, left)
        running = job.constants.replace(compute_s=job.constants.compute_s * node_factor)
        m = epoch_metrics(running, gpus, cpus, params, jnp.logical_or(contended, spell))
        noise = jnp.exp(params.epoch_time_noise * d.standard_normal_approx(u[d.EPOCH_NOISE]))
        epoch_time = m.epoch_time_s * noise
        pause = move_pause_s(start_gpus, start_cpus, gpus, cpus, params, relocate) + restart
        interval = epoch_time + pause
        interval_cost = billed_usd(interval, m.price_per_hour)
        working = epoch_time / interval
        gpu_util = jnp.clip(
            m.gpu_util * working + params.util_noise * (2.0 * u[d.GPU_UTIL_NOISE] - 1.0), 0.0, 1.0
        )
        cpu_util = jnp.clip(
            m.cpu_util * working + params.util_noise * (2.0 * u[d.CPU_UTIL_NOISE] - 1.0), 0.0, 1.0
        )
        throughput = job.constants.samples_per_epoch / interval
        epoch = state.epoch + 1
        # The job's mid-run event (shifts.py) happens at the end of this epoch: the world after it
        # (targets, prices, true compute).
        job_after = shifts.shifted_job(job, shifts.fires(job, epoch))
        # The profile where the job is, after any price change (its epoch time and shares, which
        # the online model records, do not depend on the price).
        profile_now = epoch_metrics(job_after.profile, gpus, cpus, params)
        # What the online model learns from this epoch (online_model.py).
        measured = (epoch_time, profile_now.epoch_time_s, profile_now.compute_share, profile_now.sync_share)
        elapsed = state.elapsed_s + interval
        cost = state.cost_usd + interval_cost
        readings = epoch_readings(
            job_after, m.replace(price_per_hour=profile_now.price_per_hour), epoch_time, throughput,
            gpu_util, cpu_util, elapsed, cost, epoch, params, state.multipliers,
        )  # fmt: skip
        severities = readings["severities"]
        terminated = epoch >= job.epochs
        next_state = state.replace(
            job=job_after,
            steps=state.steps + 1,
            epoch=epoch,
            gpus=gpus,
            cpus=cpus,
            contended=contended,
            event_left=left,
            elapsed_s=elapsed,
            cost_usd=cost,
            **readings,
            gpu_busy_s=state.gpu_busy_s + gpu_util * interval,
            cpu_busy_s=state.cpu_busy_s + cpu_util * interval,
            peak_memory_gib=jnp.maximum(state.peak_memory_gib, m.memory_used_gib),
            reallocations=state.reallocations + changed.astype(jnp.int32),
            severity_sum=state.severity_sum + jnp.mean(severities),
            profile_now=profile_now,
            model_stats=record_epoch(state.model_stats, *measured),
            surprise=epoch_surprise(state.model_stats, *measured, params),
        )
        figures = episode_figures(next_state)
        epochs_f = job.epochs.astype(jnp.float32)
        completion = params.sla_met_bonus * jnp.sum(
            figures["job_sla_met"].astype(jnp.float32)
        ) + params.all_slas_bonus * figures["all_slas_met"].astype(jnp.float32)
        reward = jnp.stack(
            [
                -jnp.minimum(interval / job.time_ref_s, params.reward_clip),
                -jnp.minimum(interval_cost / job.cost_ref_usd, params.reward_clip),
                -jnp.mean(severities) / epochs_f + jnp.where(terminated, completion, 0.0),
            ]
        ).astype(jnp.float32)
        info = {
            "step_weights": state.weights,
            "severities": severities,
            "sla_met": severities <= 0.0,
            "reallocated": changed,
            "projected_remaining_time_s": readings["projected_remaining_time_s"],
            "projected_remaining_cost_usd": readings["projected_remaining_cost_usd"],
            **figures,
        }
        return next_state, reward, terminated, info

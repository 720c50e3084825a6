"""The best controller reachable with the paper's 9 moves, in hindsight: an anchor for evaluation.

The static oracle (``baselines.BestStatic``) places a job at its best allocation for free, before
the first epoch. A policy restricted to the paper's action set (GPU {-1, 0, +1} x CPU {-step, 0,
+step}, indices 0-8 in every action set) cannot: it walks there one move per epoch and pays a pause
for every re-allocation. :class:`BestReachable` is the best controller of a simple family, found by
exact search over the noise-free model of each job, so such a policy is judged against what it
can reach.

**Family (walk-then-hold).** For every destination ``d`` of the full allocation lattice
(``static_allocations.full_lattice``: ``L`` points, 480 on the default cluster), the controller
starts at the job's start allocation ``s`` (what the job holds before its first epoch: the request
in ``evaluate``) and, before every epoch, takes the paper move toward ``d``: GPU delta
``sign(g_d - g)``, CPU delta ``sign(c_d - c)`` CPU steps (action ``3 (dg + 1) + (dc + 1)``),
applied with the env's clipping (``actions.apply_action``); once at ``d`` it keeps it (action 4).
As in the env, each step is a decision followed by one epoch: the first move is taken before the
first epoch, which runs at the first move's allocation. ``d = s`` is the static start. A walk
longer than the job's ``E`` epochs is cut there (and then is the same trajectory as the walk to
the point it reached), so the distinct trajectories are the walks of at most ``E`` moves.

**Evaluation (exact; the noise- and contention-free model, the env's rules).** The walk visits
``a_1 .. a_E`` (``a_0 = s``). Epoch ``e`` lasts ``interval_e = t(a_e) + pause_e``, ``t`` the
model's epoch time (``job_model.epoch_metrics`` on the job's true constants ``state.job.constants``),
``pause_e`` = ``reallocation_pause_s`` when the GPU count changed from ``a_{e-1}``,
``cpu_reallocation_pause_s`` when only the CPUs changed, else 0, and is billed at ``a_e``'s price.
The six job-level SLA checks are ``job_env.episode_figures``'s: total time <= deadline, total cost
<= budget, ``E x samples_per_epoch / total time >= min throughput``, peak memory used <= maximum,
time-weighted mean GPU and CPU utilisation >= minimum, where a paused job does no work
(utilisation of an interval = epoch utilisation x ``t / interval``, as in
``JobAllocationEnv.transition`` without noise), so mean utilisation = ``sum_e u(a_e) t(a_e) / T``.

**Ranking (as ``BestStatic``).** The destination whose trajectory meets the most of the six SLAs;
ties broken by the lowest preference-weighted time and cost relative to the request,
``(w_time T / T_ref + w_cost C / C_ref) / (w_time + w_cost)``, on the trajectory's total time ``T``
and cost ``C``; among walks with the same trajectory, those that arrive within the job (at most
``E`` moves) are kept, and remaining ties go to the first lattice point.

**Search.** Walks form a tree: the walk from ``s`` toward a point it passes is the same walk cut
there (GPUs move monotonically toward ``g_d``; CPUs move monotonically toward ``c_d`` and are
clipped only by the node-count cap, which is monotone in GPUs, so the cut walk replays the same
moves), hence every walk is its parent's walk plus one move. :func:`walk_tables` walks every pair
of lattice points once per cluster (the longest walk on the default cluster is 47 moves; it
checks the tree property) and stores, per start and destination, the parent, the depth (moves),
the kind of the last move (GPU change or CPU-only change) and the 2^r-th ancestors. Per job the
model is evaluated once on the lattice, each point's epoch (interval, cost, busy GPU- and
CPU-seconds, memory) is summed up its chain to the start by pointer jumping
(``ceil(log2(K + 1))`` = 6 rounds of one packed gather for ``K`` = 47), and the epochs after
arrival are added in closed form (``(E - depth) x`` the destination's epoch). ``plan`` ranks the
walks of at most ``E`` moves (a longer walk is cut to one of them); ``outcomes`` also gives the
cut walks, by jumping to the ancestor at depth ``E``. That is ``O(L log K)`` per job,
independent of ``E``, vectorised over jobs (``vmap``) and destinations: on a 2-core CPU the plans
of 2,048 jobs take about 0.11 s, and a run of the anchor 0.21 s against 0.04 s for a static one.

**Run.** :class:`BestReachable` is an ``episodes.Controller``: ``plan`` (once per job, after the
start rule) picks the destination and ``act`` takes the move toward it from the env's current
allocation. The actions do not depend on noise, so the run follows the planned trajectory exactly;
only its times and costs carry the run's noise and contention (common random numbers with the
other methods). It plans the job's world as it is at the start: a job's mid-run event
(``env/shifts.py``; ``mixed`` and ``shifting``) is not in its model, so there it is the best walk
for a world that stays as it was (``replanning.py`` is the anchor that knows the events).
The anchor does not see the noise, so a policy can beat it on a job; and the family is not every
sequence of moves (a walk moves diagonally first and never waits, turns back, or stops part-way
to move on later), so the exhaustive optimum over the ``9^E`` move sequences
can be better: on 2- and 3-epoch jobs the anchor attains it on about 98 % and 93 % of jobs
(``tests/test_reachable.py``, which measures it by brute force).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from slamorl_jax.env.actions import apply_action, floor_div, move_toward
from slamorl_jax.env.job_model import billed_usd
from slamorl_jax.env.params import EnvParams, cluster_bounds
from slamorl_jax.env.pauses import change_pause_s
from slamorl_jax.env.plans import plan_objective
from slamorl_jax.env.sla import slas_met
from slamorl_jax.env.state import EnvState
from slamorl_jax.env.static_allocations import full_lattice, lattice_metrics

# Kind of the move into a lattice point on a walk (``walk_tables``); the root (the start) has none.
NO_MOVE, GPU_MOVE, CPU_MOVE = 0, 1, 2
_PARENT_BITS, _DEPTH_BITS = 16, 12  # packing of a walk-table entry into one int32


@struct.dataclass
class ReachablePlan:
    """One job's walk-then-hold controller (or, from ``outcomes``, every destination's) and its
    expected noise-free outcome."""

    gpus: jax.Array  # int32 destination
    cpus: jax.Array  # int32
    sla_met: jax.Array  # (6,) bool: the job-level SLA checks of the trajectory (``[6, L]`` for all)
    objective: jax.Array  # preference-weighted time and cost relative to the request
    time_s: jax.Array  # total time of the trajectory
    cost_usd: jax.Array  # total cost
    moves: jax.Array  # int32 re-allocations within the job's epochs
    arrives: jax.Array  # bool: the walk reaches the destination within the job's epochs


@dataclasses.dataclass(frozen=True)
class BestReachable:
    """The anchor over a fixed lattice and cluster (hashable, so its episode runner compiles once).

    Build it with :meth:`for_params` from concrete params; it serves params with the same cluster
    shape (``actions``' bounds: GPUs per job, GPUs and CPUs per node, CPU step); pauses, prices and
    the model are read from the params it runs with. See the module docstring.
    """

    gpus: tuple[int, ...]  # the lattice: GPU-major, CPUs ascending (``full_lattice``)
    cpus: tuple[int, ...]
    bounds: tuple[int, int, int, int]  # (max GPUs, GPUs per node, CPUs per node, CPU step)

    @classmethod
    def for_params(cls, params: EnvParams) -> BestReachable:
        """The anchor over every allocation that actions can reach under ``params``."""
        gpus, cpus = full_lattice(params)
        bounds = tuple(int(b) for b in cluster_bounds(params))
        anchor = cls(tuple(int(g) for g in gpus), tuple(int(c) for c in cpus), bounds)
        walk_tables(anchor.gpus, anchor.cpus, anchor.bounds)  # build (and check) the tables now
        return anchor

    @property
    def max_moves(self) -> int:
        """The longest walk between two lattice points."""
        return walk_tables(self.gpus, self.cpus, self.bounds).max_moves

    def index(self, gpus: jax.Array, cpus: jax.Array) -> jax.Array:
        """Lattice index of allocations ``(gpus, cpus)`` that lie on the lattice."""
        return _lattice_index(self.gpus, self.cpus, self.bounds[3], gpus, cpus)

    def outcomes(self, state: EnvState, params: EnvParams) -> ReachablePlan:
        """The noise-free outcome of the walk toward every lattice point, for one job from its
        current allocation (fields ``[L]``, ``sla_met`` ``[6, L]``)."""
        walks = self._walks(state, params)
        # A walk longer than the job stops at its ancestor at depth E: jump depth - E steps up.
        cut = jnp.maximum(walks["depth"] - state.job.epochs, 0)
        reached = jnp.arange(len(self.gpus), dtype=jnp.int32)
        for bit, ancestor in enumerate(walks["ancestors"]):
            reached = jnp.where(((cut >> bit) & 1) == 1, _take(ancestor, reached), reached)
        return self._judge(
            state, params, _take(walks["sums"], reached), _take(walks["epoch"], reached), walks["depth"]
        )

    def plan(self, state: EnvState, params: EnvParams) -> ReachablePlan:
        """One fresh job's best walk-then-hold controller: most SLAs met, then lowest objective,
        among the walks that arrive within the job (a longer walk repeats the one it is cut to)."""
        walks = self._walks(state, params)
        # Walks that do not arrive are judged on wrong (uncut) sums, but never chosen.
        every = self._judge(state, params, walks["sums"], walks["epoch"], walks["depth"])
        sla_count = jnp.where(every.arrives, jnp.sum(every.sla_met.astype(jnp.int32), axis=0), -1)
        best = jnp.argmin(jnp.where(sla_count == jnp.max(sla_count), every.objective, jnp.inf))
        return jax.tree.map(lambda x: x[..., best], every)

    def act(self, plan: ReachablePlan, state: EnvState, params: EnvParams) -> jax.Array:
        """The move toward the plan's destination from the job's current allocation (4 once there)."""
        return move_toward(state.gpus, state.cpus, plan.gpus, plan.cpus)

    def _walks(self, state: EnvState, params: EnvParams) -> dict:
        """For one job and every destination: the sums over its whole walk from the job's current
        allocation (``sums`` ``[L, 5]``: time, cost, busy GPU- and CPU-seconds, peak memory), the
        destination's own epoch without a pause (``epoch`` ``[L, 5]``), the walk's moves (``depth``)
        and the 2^r-th ancestors (``ancestors``, one ``[L]`` row per r)."""
        tables = walk_tables(self.gpus, self.cpus, self.bounds)
        start = self.index(state.gpus, state.cpus)
        _, depth, kind = unpack(jnp.asarray(tables.packed)[start])  # this start's walks, [L]
        ancestors = jnp.asarray(tables.ancestors)[:, start].astype(jnp.int32)  # [rounds, L]

        m = lattice_metrics(
            state.job.constants, jnp.asarray(self.gpus, jnp.int32), jnp.asarray(self.cpus, jnp.int32), params
        )
        pause = change_pause_s(kind == GPU_MOVE, kind == CPU_MOVE, params)
        epoch = jnp.stack(
            [
                m.epoch_time_s,
                billed_usd(m.epoch_time_s, m.price_per_hour),
                m.gpu_util * m.epoch_time_s,  # a paused job does no work
                m.cpu_util * m.epoch_time_s,
                m.memory_used_gib,
            ],
            axis=-1,
        )
        # The epoch after the move into each point, as summed along walks (the start has none).
        pause_sums = [pause, billed_usd(pause, m.price_per_hour)] + [jnp.zeros_like(pause)] * 3
        step = epoch + jnp.stack(pause_sums, axis=-1)
        sums = jnp.where((kind != NO_MOVE)[:, None], step, 0.0)
        # Pointer jumping: after round r, each point's sums cover it and its 2^(r+1) - 1 nearest
        # ancestors (the start adds zeros and is its own parent); 2^rounds > max_moves covers all.
        for ancestor in ancestors:
            up = _take(sums, ancestor)
            sums = jnp.concatenate([sums[:, :4] + up[:, :4], jnp.maximum(sums[:, 4:], up[:, 4:])], axis=1)
        return {"sums": sums, "epoch": epoch, "depth": depth, "ancestors": ancestors}

    def _judge(
        self, state: EnvState, params: EnvParams, walked: jax.Array, held: jax.Array, depth: jax.Array
    ) -> ReachablePlan:
        """SLA checks and objective of trajectories of ``walked`` sums (``[L, 5]``) followed by
        ``E - depth`` epochs (if positive) of ``held`` (``[L, 5]``), per destination."""
        job = state.job
        epochs = job.epochs
        hold = (epochs - jnp.minimum(depth, epochs)).astype(jnp.float32)[:, None]
        time_s, cost, gpu_busy, cpu_busy = (walked[:, :4] + hold * held[:, :4]).T
        peak = jnp.where(hold[:, 0] > 0, jnp.maximum(walked[:, 4], held[:, 4]), walked[:, 4])
        targets = job.sla_targets
        elapsed = jnp.maximum(time_s, 1e-9)
        samples = epochs.astype(jnp.float32) * job.constants.samples_per_epoch
        met = slas_met(time_s, cost, samples / elapsed, peak, gpu_busy / elapsed, cpu_busy / elapsed, targets)
        objective = plan_objective(job, time_s, cost)
        return ReachablePlan(
            gpus=jnp.asarray(self.gpus, jnp.int32),
            cpus=jnp.asarray(self.cpus, jnp.int32),
            sla_met=met,
            objective=objective,
            time_s=time_s,
            cost_usd=cost,
            moves=jnp.minimum(depth, epochs).astype(jnp.int32),
            arrives=depth <= epochs,
        )


def _take(table: jax.Array, index: jax.Array) -> jax.Array:
    """``table[index]`` along the first axis for indices known to be in range (a faster gather on CPU)."""
    return table.at[index].get(mode="promise_in_bounds")


def _lattice_index(
    lattice_gpus: tuple[int, ...], lattice_cpus: tuple[int, ...], cpu_step: int, gpus, cpus
) -> jax.Array:
    """Index into the GPU-major lattice of points ``(gpus, cpus)`` on it."""
    counts = np.bincount(np.asarray(lattice_gpus) - 1)
    offsets = jnp.asarray(np.concatenate([[0], np.cumsum(counts)[:-1]]), jnp.int32)
    return offsets[jnp.asarray(gpus) - 1] + floor_div(cpus, cpu_step) - 1


def unpack(packed: jax.Array | np.ndarray) -> tuple:
    """``(parent, moves, kind of the last move)`` of packed walk-table entries (``walk_tables``)."""
    parent = packed & ((1 << _PARENT_BITS) - 1)
    depth = (packed >> _PARENT_BITS) & ((1 << _DEPTH_BITS) - 1)
    return parent, depth, packed >> (_PARENT_BITS + _DEPTH_BITS)


class WalkTables(NamedTuple):
    """Every walk between two lattice points, by start ``s`` and destination ``d`` (``walk_tables``)."""

    packed: np.ndarray  # [L, L] int32: parent, moves, kind of the last move (``unpack``)
    ancestors: np.ndarray  # [rounds, L, L] int16: the 2^r-th ancestor of d on the walk from s
    max_moves: int  # the longest walk; 2^rounds > max_moves


@functools.lru_cache(maxsize=8)
def walk_tables(
    gpus: tuple[int, ...], cpus: tuple[int, ...], bounds: tuple[int, int, int, int]
) -> WalkTables:
    """Every walk between points of the lattice ``(gpus, cpus)`` on the cluster ``bounds``.

    ``packed[s, d]`` holds, for the walk from ``s`` toward ``d``, the lattice index of the point
    before ``d`` (``d`` itself when ``d = s``) in the low 16 bits, the walk's moves in the next 12,
    and the kind of its last move (``NO_MOVE``, ``GPU_MOVE``, ``CPU_MOVE``) above them;
    ``ancestors[r, s, d]`` is the point ``2^r`` moves before ``d`` (``s`` if none).
    Raises ``ValueError`` if some walk does not arrive or the walks do not form a tree.
    """
    size = len(gpus)
    if size >= 1 << 15:
        raise ValueError(f"lattice of {size} points is too large for the walk tables")
    start_g, dest_g = (x.ravel() for x in np.meshgrid(gpus, gpus, indexing="ij"))
    start_c, dest_c = (x.ravel() for x in np.meshgrid(cpus, cpus, indexing="ij"))

    @jax.jit
    def move(g: jax.Array, c: jax.Array) -> tuple[jax.Array, jax.Array]:
        return apply_action(move_toward(g, c, dest_g, dest_c), g, c, *bounds)

    lookup = np.full((max(gpus) + 1, max(cpus) + 1), -1, np.int32)
    lookup[np.asarray(gpus), np.asarray(cpus)] = np.arange(size)

    def index(g: np.ndarray, c: np.ndarray) -> np.ndarray:
        return lookup[g, c]

    g, c = start_g, start_c
    parent = index(g, c)
    depth = np.zeros(size * size, np.int32)
    kind = np.full(size * size, NO_MOVE, np.int32)
    path = [parent]  # position after each move (for the tree check)
    moves = 0
    while not np.all((g == dest_g) & (c == dest_c)):
        moves += 1
        if moves >= 1 << _DEPTH_BITS:
            raise ValueError(
                "a walk between two lattice points does not arrive; is the lattice the cluster's?"
            )
        new_g, new_c = (np.asarray(x) for x in move(g, c))
        moving = (g != dest_g) | (c != dest_c)
        parent = np.where(moving, index(g, c), parent)
        depth = np.where(moving, moves, depth)
        kind = np.where(moving, np.where(new_g != g, GPU_MOVE, CPU_MOVE), kind)
        g, c = new_g, new_c
        path.append(index(g, c))
    parent, depth, kind = (x.reshape(size, size) for x in (parent, depth, kind))
    # Tree check: the parent of the k-th point of every walk is its (k-1)-th point.
    positions = np.stack(path, axis=1).reshape(size, size, moves + 1)
    starts = np.arange(size)[:, None]
    for k in range(1, moves + 1):
        if np.any((depth >= k) & (parent[starts, positions[:, :, k]] != positions[:, :, k - 1])):
            raise ValueError("walks on this lattice do not form a tree")
    ancestors = [parent]
    for _ in range(1, max(1, math.ceil(math.log2(moves + 1)))):
        ancestors.append(np.take_along_axis(ancestors[-1], ancestors[-1], axis=1))
    packed = parent | (depth << _PARENT_BITS) | (kind << (_PARENT_BITS + _DEPTH_BITS))
    return WalkTables(packed.astype(np.int32), np.stack(ancestors).astype(np.int16), moves)

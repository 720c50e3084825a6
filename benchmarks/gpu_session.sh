#!/bin/bash
# Issue 7's speed bars, issue 10's scaling and where the time goes, on one GPU, in one call of under
# 10 minutes:
#   1. benchmarks.env_throughput: our env step against gymnax CartPole-v1 (issue 7: >= 0.3x at 4,096)
#   2. benchmarks.train_throughput: PPO on our env against PPO on CartPole with the same learner, at
#      CartPole's own width and at ours (issue 7: >= 0.7x at 4,096)
#   3. benchmarks.step_profile of the env step (and, as part step_profile_train, of a PPO update) at
#      4,096 envs: each kernel's time charged to the Python lines it was traced from (the trace and
#      the program's text are kept, so `python -m benchmarks.step_profile --from-trace PREFIX
#      --out /tmp/again.json` charges them again on any machine)
#   4. benchmarks.scaling: steps/s up to 2**20 envs, compile time and peak device memory (issue 10),
#      and the plain-Python job loop on the machine's CPU
# Each part has its own time limit, and a part that fails leaves the others running. Results are
# written to $RESULTS (default benchmarks/results) as *_gpu.* files, replacing those there (each
# benchmark is given --overwrite); with $OUT set (the device tool's
# folder of files to bring back, which takes at most 8) they are also packed, after every part, into
# $OUT/gpu_session.tgz: `tar xzf gpu_session.tgz -C benchmarks/results` puts them in place.
#
#   bash benchmarks/gpu_session.sh          # on the GPU machine, from the repository root
#   DRY=1 bash benchmarks/gpu_session.sh    # tiny sizes on any machine: checks the script itself
#                                           # (without DRY=1, a machine whose JAX has no GPU is
#                                           # refused: its numbers are not the *_gpu results)
#   PARTS="machine env_throughput" ENV_SIZES=4096 ENV_LIMIT=90 bash benchmarks/gpu_session.sh
#                                           # some parts only (names as logged), other sizes
#   bash benchmarks/gpu_scaling.sh          # the scaling part alone, at every size (issue 10)
#
#   bash benchmarks/gpu_session.sh wheels  # here, before the call: fetch the wheels below
#
# A machine with no registry access takes the pure-Python packages this project needs beyond what
# its image has (the device tool's nvidia-h200 image lacks gymnax, gymnasium, Farama-Notifications
# and tensorboardX) as wheels from ./.gpuwheels, installed with --no-deps --no-index. `wheels`
# downloads the versions installed here and keeps the folder out of git (.git/info/exclude); the
# device tool's call then names it: carry [".gpuwheels"].
set -uo pipefail
if [ -n "${OUT:-}" ]; then
    OUT=$(cd "$OUT" && pwd) || exit 2  # from where the script was started; pack runs in $RESULTS
fi
cd "$(dirname "$0")/.." || exit 2
PYTHON=${PYTHON:-python3}
if [ "${1:-}" = wheels ]; then
    pins=$("$PYTHON" -c 'import importlib.metadata as m
print(" ".join(f"{n}=={m.version(n)}" for n in ("gymnax", "gymnasium", "Farama-Notifications", "tensorboardX")))') || exit 2
    grep -qx '/.gpuwheels/' .git/info/exclude 2>/dev/null || echo '/.gpuwheels/' >>.git/info/exclude
    rm -rf .gpuwheels  # wheels of other versions would make the install there fail
    # shellcheck disable=SC2086  # one argument per pin
    exec "$PYTHON" -m pip download -q --no-deps --only-binary=:all: -d .gpuwheels $pins
fi
ALL_PARTS="machine env_throughput train_throughput step_profile step_profile_train scaling"
# By default all but step_profile_train (its kept trace is 2026-12-04's): the rest fit one call.
PARTS=${PARTS:-machine env_throughput train_throughput step_profile scaling}
for name in $PARTS; do  # a misspelt part would run nothing and spend a GPU call on it; checked
    # before anything is written
    case " $ALL_PARTS " in
    *" $name "*) ;;
    *) echo "gpu_session.sh: unknown part '$name' in PARTS (parts: $ALL_PARTS)" >&2 && exit 2 ;;
    esac
done
if [ "${DRY:-0}" = 1 ]; then  # a check of the script must not replace the committed GPU results
    RESULTS=${RESULTS:-$(mktemp -d)}
else
    # CPU numbers under the *_gpu names (and the log emptied) would replace the GPU's: checked
    # before anything is written. The wheels below are gymnax and the like, not JAX.
    backend=$("$PYTHON" -c 'import jax; print(jax.default_backend())' 2>/dev/null | tail -n 1)
    if [ "$backend" != gpu ]; then
        echo "gpu_session.sh: JAX's default backend is '${backend:-unknown}', not a GPU;" \
            "DRY=1 checks the script on any machine" >&2
        exit 2
    fi
    RESULTS=${RESULTS:-benchmarks/results}
fi
mkdir -p "$RESULTS" || exit 2
echo "results in $RESULTS"
LOG="$RESULTS/gpu_session.log"
: >"$LOG"
export PYTHONPATH=.
export PYTHONUNBUFFERED=1
export XLA_PYTHON_CLIENT_PREALLOCATE=false  # peak memory then measures what a row needs
if [ -d .gpuwheels ]; then
    "$PYTHON" -m pip install -q --no-deps --no-index .gpuwheels/*.whl 2>&1 | grep -v WARNING | tee -a "$LOG"
fi
if [ "${DRY:-0}" = 1 ]; then
    ENV_SIZES=64 TRAIN_SIZES=64 PROFILE_ENVS=64 SCALE_ENV=64 SCALE_TRAIN=64 BUDGET=20 ROW=60
else
    # 2**20 envs and training past 4,096 are the scaling part's rows.
    # SCALE_* size the scaling part: its sizes, the seconds after which no row starts and each
    # row's limit (benchmarks/gpu_scaling.sh runs the whole sweep with them).
    ENV_SIZES=${ENV_SIZES:-4096,65536} TRAIN_SIZES=${TRAIN_SIZES:-4096} PROFILE_ENVS=4096
    SCALE_ENV=${SCALE_ENV:-1048576} SCALE_TRAIN=${SCALE_TRAIN:-16384,65536,262144}
    BUDGET=${SCALE_BUDGET:-80} ROW=${SCALE_ROW:-80}
fi
STARTED=$(mktemp)  # what this run wrote is newer than this file
pack() {  # this run's results so far (not older ones beside them), into the one file brought back
    if [ -n "${OUT:-}" ]; then
        (cd "$RESULTS" && find . -maxdepth 1 -name '*_gpu*' -newer "$STARTED" -print0 |
            xargs -0 tar czf "$OUT/gpu_session.tgz" gpu_session.log) ||
            echo "packing the results failed" | tee -a "$LOG"
    fi
}
part() {  # part SECONDS NAME COMMAND...: one part under its own limit, its exit status logged
    local limit=$1 name=$2
    shift 2
    case " $PARTS " in *" $name "*) ;; *) return 0 ;; esac  # not asked for this time
    echo "== $name (limit ${limit}s) $(date -u +%T)" | tee -a "$LOG"
    timeout -k 10 "$limit" "$@" 2>&1 | tee -a "$LOG"
    echo "== $name: exit ${PIPESTATUS[0]} $(date -u +%T)" | tee -a "$LOG"
    pack
}
# The default parts' limits add up to 580 s (the backend's check above takes seconds), inside the
# device tool's 600 s a command (the env and training benchmarks time five and four programs a size:
# the other reset and the branch-free variants beside the defaults).
part 30 machine bash -c 'nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv 2>&1;
    "$1" -c "import jax, flax, optax, orbax.checkpoint, gymnax; print(jax.__version__, jax.devices())"' _ "$PYTHON"
part "${ENV_LIMIT:-170}" env_throughput "$PYTHON" -m benchmarks.env_throughput --num-envs "$ENV_SIZES" \
    --python-seconds 0 --repeats 5 --also-reset-by scatter,select --also-branch-free \
    --out "$RESULTS/env_throughput_gpu.json" --overwrite
part 150 train_throughput "$PYTHON" -m benchmarks.train_throughput --num-envs "$TRAIN_SIZES" \
    --repeats 3 --also-branch-free --out "$RESULTS/train_throughput_gpu.json" --overwrite
part 50 step_profile "$PYTHON" -m benchmarks.step_profile --num-envs "$PROFILE_ENVS" --steps 32 --top 30 \
    --out "$RESULTS/step_profile_gpu.json" --keep-trace "$RESULTS/step_profile_gpu" --overwrite
part 60 step_profile_train "$PYTHON" -m benchmarks.step_profile --program train \
    --num-envs "$PROFILE_ENVS" --top 30 --out "$RESULTS/step_profile_train_gpu.json" \
    --keep-trace "$RESULTS/step_profile_train_gpu" --overwrite
part $((BUDGET + ROW + 20)) scaling "$PYTHON" -m benchmarks.scaling --devices=native \
    --env-num-envs="$SCALE_ENV" --train-num-envs="$SCALE_TRAIN" --rounds=1 --repeats=3 \
    --python-seconds=3 --row-timeout="$ROW" --budget-s="$BUDGET" --out="$RESULTS/scaling_gpu.json" --overwrite

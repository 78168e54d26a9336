#!/usr/bin/env bash
# The SLURM path for real: a one-node SLURM cluster on this machine (Debian's slurm-wlm and
# munge, daemons started by hand: no systemd needed), and the ci grid (configs/ci.yaml) run
# through the shipped profile, profiles/slurm, with only its placeholders filled in. Checks:
#   1. every sbatch job of the grid ends COMPLETED, on the CPU partition (a CPU config asks
#      for no GPU), with the rule's own small memory and time limit; the tables are complete
#      (missing.json is {}); the jobs got the submit shell's environment (the activated venv,
#      and a variable set only here: MPLCONFIGDIR, which the jobs that draw figures create);
#   2. a training job stopped mid-run is resubmitted by the profile's retries and resumes
#      from its checkpoint, twice: SIGUSR1 (what --signal=USR1@600 sends before the time
#      limit; the trainer checkpoints and exits 75), then a plain scancel of the retry; the
#      last retry finishes (done.json resumed_from) and the cell's per-step log keeps every
#      attempt's steps.
# Not checked: GPU scheduling (the fake GPU only makes the GPU partition schedulable),
# several nodes, accounting (no slurmdbd: the plugin is told to ask squeue), site policies.
# About 5 minutes on 2 cores (apt included); it prints its times.
#
# Called at the end of .ci/run, in its environment (.ci/venv); by hand: bash .ci/slurm_check.sh
# (root, apt for the two packages; SAGC_CI_VENV=DIR for another environment with the project
# installed). SAGC_CI_SLURM=0 skips it. The cluster lives in a temporary folder and is stopped
# at the end, also on failure; SAGC_CI_SLURM_KEEP=1 keeps that folder (logs, results).
set -euo pipefail

if [ "${SAGC_CI_SLURM:-1}" = "0" ]; then
    echo "slurm check: skipped (SAGC_CI_SLURM=0)"
    exit 0
fi
cd "$(dirname "$0")/.."
REPO=$(pwd)
T0=$(date +%s)
say() { echo "slurm check [$(($(date +%s) - T0)) s]: $*"; }

VENV=${SAGC_CI_VENV:-$REPO/.ci/venv}
if [ ! -f "$VENV/bin/activate" ]; then
    echo "slurm check FAILED: no environment at $VENV (.ci/run creates it; or set SAGC_CI_VENV)" >&2
    exit 1
fi
# shellcheck disable=SC1091
source "$VENV/bin/activate"
export WANDB_MODE=offline HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export WANDB_X_DISABLE_STATS=true
if [ "$(id -u)" != 0 ]; then
    echo "slurm check FAILED: needs root (apt, the SLURM daemons, munge)" >&2
    exit 1
fi

# --- 1. packages -----------------------------------------------------------------------------
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null; then
    say "installing slurm-wlm and munge (apt)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null
fi
say "$(slurmctld -V)"

# --- 2. a one-node cluster in a scratch folder -----------------------------------------------
S=$(mktemp -d /tmp/sagc-slurm.XXXXXX)
chmod 755 "$S"
mkdir -p "$S/log" "$S/out" "$S/spool/ctld" "$S/spool/d" "$S/work"
chown -R slurm:slurm "$S/spool/ctld" "$S/log"
HOST=$(hostname -s)
CPUS=$(nproc)
MEM_MB=$(awk '/^MemTotal:/ {print int($2 / 1024 * 0.8)}' /proc/meminfo)
# SLURM's default place: the jobs' own srun (the plugin runs each job through srun) reads it
# there, whatever SLURM_CONF the submit shell had. A config written by someone else is left
# alone: this check is for a machine without SLURM (CI's).
CONF_DIR=/etc/slurm
MARK="# written by sagc-repro .ci/slurm_check.sh"
if [ -e "$CONF_DIR/slurm.conf" ] && ! grep -qF "$MARK" "$CONF_DIR/slurm.conf"; then
    echo "slurm check FAILED: $CONF_DIR/slurm.conf exists (a SLURM is configured here); this check sets up its own one-node cluster, on a machine without one" >&2
    exit 1
fi
mkdir -p "$CONF_DIR"
cat >"$CONF_DIR/slurm.conf" <<EOF
$MARK (a one-node cluster for the CI check; removed at its end)
ClusterName=ci
SlurmctldHost=$HOST
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$S/spool/ctld
SlurmdSpoolDir=$S/spool/d
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
# Finished jobs stay visible to squeue for an hour: the plugin's squeue status mode needs
# 120 s or more, and this check reads every job's final state at the end.
MinJobAge=3600
GresTypes=gpu
NodeName=$HOST CPUs=$CPUS RealMemory=$MEM_MB Gres=gpu:1 State=UNKNOWN
PartitionName=cpu Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$HOST MaxTime=INFINITE State=UP
EOF
# A fake GPU, so that a --gpus request can be scheduled on the gpu partition: Count=1 alone
# leaves the node INVAL (slurmd finds no device), File=/dev/null works.
cat >"$CONF_DIR/gres.conf" <<EOF
$MARK
AutoDetect=off
NodeName=$HOST Name=gpu File=/dev/null
EOF

STARTED_MUNGE=0
CTLD_PID=
SLURMD_PID=
SNAKE_PID=
dump_logs() {
    for f in "$S"/log/*; do
        [ -f "$f" ] || continue
        echo "----- $f (last 40 lines)" >&2
        tail -n 40 "$f" >&2
    done
    if [ -f /var/log/munge/munged.log ]; then
        echo "----- /var/log/munge/munged.log (last 10 lines)" >&2
        tail -n 10 /var/log/munge/munged.log >&2
    fi
}
fail() {
    echo "slurm check FAILED: $*" >&2
    dump_logs
    exit 1
}
stop_cluster() {
    local rc=$?
    set +e
    if [ -n "$SNAKE_PID" ] && kill -0 "$SNAKE_PID" 2>/dev/null; then
        kill "$SNAKE_PID"
        wait "$SNAKE_PID" 2>/dev/null
    fi
    if [ -n "$CTLD_PID" ] && kill -0 "$CTLD_PID" 2>/dev/null; then
        scancel --full --user="$(id -un)" 2>/dev/null
    fi
    for pid in $SLURMD_PID $CTLD_PID; do
        kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    done
    if [ "$STARTED_MUNGE" = 1 ] && [ -f /run/munge/munged.pid ]; then
        kill "$(cat /run/munge/munged.pid)" 2>/dev/null
    fi
    for f in slurm.conf gres.conf; do
        grep -qsF "$MARK" "$CONF_DIR/$f" && rm -f "$CONF_DIR/$f"
    done
    if [ "$rc" = 0 ] && [ "${SAGC_CI_SLURM_KEEP:-0}" != 1 ]; then
        rm -rf "$S"
    else
        echo "slurm check: cluster stopped; its folder (configs, logs, results) is kept: $S" >&2
    fi
    say "cluster stopped"
}
trap stop_cluster EXIT

# --- 3. start munge, slurmctld, slurmd by hand -----------------------------------------------
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    [ -s /etc/munge/munge.key ] || mungekey -c
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    chown munge:munge /run/munge /var/log/munge /var/lib/munge
    runuser -u munge -- /usr/sbin/munged
    STARTED_MUNGE=1
    munge -n | unmunge >/dev/null || fail "munge does not answer"
fi
slurmctld -D -i >"$S/log/slurmctld.out" 2>&1 &
CTLD_PID=$!
for _ in $(seq 1 30); do
    scontrol ping 2>/dev/null | grep -q UP && break
    kill -0 "$CTLD_PID" 2>/dev/null || fail "slurmctld exited"
    sleep 1
done
scontrol ping 2>/dev/null | grep -q UP || fail "slurmctld does not answer after 30 s"
slurmd -D -N "$HOST" >"$S/log/slurmd.out" 2>&1 &
SLURMD_PID=$!
state=
for _ in $(seq 1 60); do
    state=$(sinfo -h -N -n "$HOST" -p cpu -o %t 2>/dev/null || true)
    [ "$state" = idle ] && break
    kill -0 "$SLURMD_PID" 2>/dev/null || fail "slurmd exited"
    sleep 1
done
[ "$state" = idle ] || fail "node $HOST is '${state:-not listed}' after 60 s, not idle (sinfo: $(sinfo 2>&1 | tr '\n' ' '))"
say "cluster up: node $HOST ($CPUS CPUs, $MEM_MB MB, 1 fake GPU), partitions cpu (default) and gpu"

# --- 4. the shipped profile, only the placeholders filled in ---------------------------------
P=$S/profile
cp -r "$REPO/profiles/slurm" "$P"
sed -i -e 's/<YOUR_ACCOUNT>/ci/g' -e 's/<YOUR_GPU_PARTITION>/gpu/g' -e 's/<YOUR_CPU_PARTITION>/cpu/g' "$P/config.yaml"
! grep -n '<YOUR_' "$P/config.yaml" || fail "a placeholder is left in the profile"
# A cluster without accounting (no slurmdbd): the plugin must ask squeue, not sacct, for the
# jobs' states. Status checks every second after a job ends, instead of 40 s (each check
# without news waits 10 s longer: the plugin's back-off).
SNAKEMAKE=(snakemake -s "$REPO/Snakefile" --profile "$P" --slurm-status-command squeue
    --slurm-init-seconds-before-status-checks 1)
cd "$S/work"
R=results/ci
# Set only in this shell: the jobs that draw figures (aggregate, simulate) create matplotlib's
# config folder where it points (the workflow keeps a value the user exported), so the folder
# shows that sbatch passed this shell's environment on to the jobs.
export MPLCONFIGDIR=$S/mpl-from-the-submit-shell

jobs_of() { { grep -oE 'SLURM jobid [0-9]+' "$1" || true; } | awk '{print $3}' | sort -un; }
field() { squeue --states=all -h -j "$1" -o "$2" 2>/dev/null | head -n 1; }

# --- 5. the ci grid ----------------------------------------------------------------------------
say "the ci grid through profiles/slurm"
T1=$(date +%s)
rc=0
timeout 480 "${SNAKEMAKE[@]}" --configfile "$REPO/configs/ci.yaml" >"$S/out/grid.txt" 2>&1 || rc=$?
[ "$rc" = 0 ] || { tail -n 60 "$S/out/grid.txt" >&2; fail "the ci grid did not finish (exit $rc; 124: timeout), output above"; }
GRID_S=$(($(date +%s) - T1))
mapfile -t IDS < <(jobs_of "$S/out/grid.txt")
expected=$(awk '/^total/ {print $2; exit}' "$S/out/grid.txt")
localjobs=$(grep -cE '^localrule ' "$S/out/grid.txt" || true)
[ "${#IDS[@]}" -gt 0 ] || fail "no sbatch submission in the output"
[ "${#IDS[@]}" = $((expected - localjobs)) ] ||
    fail "${#IDS[@]} sbatch jobs for $expected jobs in the DAG ($localjobs local)"
echo "  job       rule                             state      partition  memory  time limit"
bad=0
for id in "${IDS[@]}"; do
    line=$(field "$id" '%T|%P|%m|%l|%k')
    IFS='|' read -r st part mem limit comment <<<"$line"
    rule=${comment#rule_}
    rule=${rule%%_wildcards_*}
    printf '  %-9s %-32s %-10s %-10s %-7s %s\n' "$id" "$rule" "$st" "$part" "$mem" "$limit"
    [ "$st" = COMPLETED ] || bad=1
    [ "$part" = cpu ] || bad=1 # a CPU config: no job asks for a GPU
    case "$rule" in # the rule's own needs, not the profile's defaults or the paper's
    tiny_*) [[ "$mem" =~ ^[0-9]+M$ ]] && [ "${mem%M}" -le 3000 ] || bad=1 ;;
    train) [ "$mem" = 3000M ] && [ "$limit" = 30:00 ] || bad=1 ;;
    esac
done
[ "$bad" = 0 ] || fail "a job did not complete, ran on another partition or asked for other resources (table above)"
for t in headline efficiency downstream; do
    [ -s "$R/tables/$t.md" ] || fail "$R/tables/$t.md is missing"
done
[ -d "$MPLCONFIGDIR" ] || fail "no job created $MPLCONFIGDIR: the jobs did not get the submit shell's environment"
missing=$(python -c "import json; print(json.load(open('$R/tables/missing.json')))")
[ "$missing" = "{}" ] || fail "cells missing from the tables: $missing"
[ "$(grep -c ' trained tiny-llama/' "$R/logs/progress.log")" = 2 ] || fail "$R/logs/progress.log lacks a cell: $(cat "$R/logs/progress.log")"
kept=$(grep -l '^trained ' .snakemake/slurm_logs/rule_train/*/*.log | wc -l)
[ "$kept" = 2 ] || fail "$kept kept SLURM logs of train jobs with their 'trained' line, not 2"
say "ci grid: ${#IDS[@]} sbatch jobs, all COMPLETED on partition cpu, tables complete (missing.json {}), the submit shell's environment reached the jobs, $GRID_S s"
sed 's/^/  /' "$R/logs/progress.log"

# --- 6. a training job stopped twice, resumed each time by the profile's retries --------------
# Another cell of the same world (seed 1, g4; the world is reused), long enough to stop:
#   attempt 1: SIGUSR1 to its job steps (scancel --signal=USR1, what the profile's
#              --signal=USR1@600 sends before the time limit): the trainer finishes the running
#              step, checkpoints and exits 75; the job FAILED, Snakemake submits it again;
#   attempt 2: resumes from that checkpoint; cancelled (scancel) once it has saved a newer one;
#   attempt 3: resumes from the newest complete checkpoint and finishes.
python - "$REPO/configs/ci.yaml" "$S/ci-long.yaml" <<'EOF'
import sys, yaml
config = yaml.safe_load(open(sys.argv[1]))
config.update(sizings=["g4"], seeds=[1])
config["train"].update(steps=80, save_steps=10)
yaml.safe_dump(config, open(sys.argv[2], "w"))
EOF
CELL=$R/train/tiny-llama/grpo/g4/seed1
STEPLOG=$R/logs/train/tiny-llama/grpo/g4/seed1.log
OUT2=$S/out/resume.txt
newest() { # the newest complete checkpoint's step (sagc_state.json is written last), 0 for none
    local n=0 f k
    for f in "$CELL"/checkpoints/checkpoint-*/sagc_state.json; do
        [ -e "$f" ] || continue
        k=${f%/sagc_state.json}
        k=${k##*checkpoint-}
        [ "$k" -gt "$n" ] && n=$k
    done
    echo "$n"
}
nth_job() { jobs_of "$OUT2" | sed -n "${1}p"; }
await() { # await SECONDS DESCRIPTION COMMAND...: poll COMMAND every 0.2 s while the run lives
    local limit=$(($1 * 5)) what=$2
    shift 2
    for _ in $(seq 1 "$limit"); do
        "$@" && return 0
        kill -0 "$SNAKE_PID" 2>/dev/null || { tail -n 40 "$OUT2" >&2; fail "the run ended before $what"; }
        sleep 0.2
    done
    fail "no $what after ${limit}x0.2 s"
}
job_known() { [ -n "$(nth_job "$1")" ]; }
checkpoint_after() { [ "$(newest)" -gt "$1" ]; }
first_step_of_attempt() { # the first step line after the attempt's header
    awk -v n="$1" '/^=== .*attempt started/ {a++} a == n && match($0, /step [0-9]+\/80 G=/) {
        s = substr($0, RSTART + 5); sub(/\/.*/, "", s); print s; exit }' "$STEPLOG"
}
say "stop a training job twice ($CELL, 80 steps)"
T2=$(date +%s)
timeout 360 "${SNAKEMAKE[@]}" "$CELL/done.json" --configfile "$S/ci-long.yaml" >"$OUT2" 2>&1 &
SNAKE_PID=$!
await 180 "a first checkpoint" checkpoint_after 0
j1=$(nth_job 1)
scancel --signal=USR1 "$j1"
say "attempt 1 (job $j1): SIGUSR1 after checkpoint-$(newest)"
await 120 "a second submission (the retry)" job_known 2
j2=$(nth_job 2)
stop1=$(newest)
await 120 "a checkpoint of attempt 2" checkpoint_after "$stop1"
at_cancel=$(newest)
scancel "$j2"
say "attempt 2 (job $j2): resumed, scancel after checkpoint-$at_cancel"
rc=0
wait "$SNAKE_PID" || rc=$?
SNAKE_PID=
[ "$rc" = 0 ] || { tail -n 60 "$OUT2" >&2; fail "the run with the stopped jobs failed (exit $rc)"; }
RESUME_S=$(($(date +%s) - T2))
mapfile -t RIDS < <(jobs_of "$OUT2")
states=$(for id in "${RIDS[@]}"; do field "$id" %T; done | tr '\n' ' ')
[ "${#RIDS[@]}" = 3 ] && [ "$states" = "FAILED CANCELLED COMPLETED " ] ||
    fail "jobs ${RIDS[*]}: $states(expected FAILED, CANCELLED, COMPLETED: the stopped job, the cancelled retry, the last retry)"
grep -q "stopped tiny-llama/grpo/g4/seed1: exit 75 .*SLURM job $j1;" "$R/logs/progress.log" ||
    fail "attempt 1 did not stop with exit 75 (checkpointed) on SIGUSR1: $(grep seed1 "$R/logs/progress.log")"
[ "$stop1" -gt 10 ] || fail "attempt 1 left checkpoint-$stop1, not one of its own at the stop"
[ "$(first_step_of_attempt 2)" = $((stop1 + 1)) ] ||
    fail "attempt 2 started at step $(first_step_of_attempt 2), not $((stop1 + 1)) (after checkpoint-$stop1)"
resumed=$(python -c "import json; d = json.load(open('$CELL/done.json')); assert d['steps'] == 80, d['steps']; print(d['resumed_from'] or '')")
[[ "$resumed" == */checkpoint-* ]] || fail "$CELL/done.json: resumed_from is '${resumed}', not a checkpoint"
k3=${resumed##*checkpoint-}
[ "$k3" -ge "$at_cancel" ] && [ "$(first_step_of_attempt 3)" = $((k3 + 1)) ] ||
    fail "attempt 3 resumed from checkpoint-$k3 at step $(first_step_of_attempt 3) (cancelled after checkpoint-$at_cancel)"
[ "$(grep -c '^=== .*attempt started' "$STEPLOG")" = 3 ] || fail "$STEPLOG does not hold the 3 attempts"
grep -q 'step 1/80 G=' "$STEPLOG" && grep -q 'step 80/80 G=' "$STEPLOG" ||
    fail "$STEPLOG lacks the first attempt's first step or the last step"
say "jobs $j1 FAILED (SIGUSR1: exit 75 at checkpoint-$stop1), $j2 CANCELLED (after checkpoint-$at_cancel), ${RIDS[2]} COMPLETED (resumed_from checkpoint-$k3); the per-step log keeps all 3 attempts ($RESUME_S s)"
grep -E ' (trained|stopped) tiny-llama/grpo/g4/seed1' "$R/logs/progress.log" | sed 's/^/  /' || true

say "passed: grid ${GRID_S} s, stops and resumes ${RESUME_S} s, $(($(date +%s) - T0)) s in all"

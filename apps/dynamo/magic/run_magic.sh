#!/usr/bin/env bash
# Time MagIC on the Christensen et al. (2001) benchmark inputs of this folder.
#
#   run_magic.sh BUILD_DIR NP CASE STEPS
#
#   BUILD_DIR  folder holding magic.exe (from build_magic.sh, e.g.
#              target/magic/build-native or target/magic/build-shtns)
#   NP         MPI ranks (mpirun -np NP)
#   CASE       0 or 1 (input_case0.nml / input_case1.nml beside this script)
#   STEPS      number of time steps (overrides n_time_steps in the input)
#
# Prints one line:
#   magic case=C np=NP steps=S seconds_per_step=X pure_seconds_per_step=Y
# X is MagIC's own "Mean wall time for one time step" from its log.TAG
# (MPI_Wtime around each step of the time loop, averaged over steps and
# ranks; initialisation is not included). Y is its "one pure time step"
# (steps without matrix rebuild or output). Env KEEP=1 keeps the run folder.
#
# MagIC: https://github.com/magic-sph/magic (GPL-3.0), built beside this
# repository for timing only, never vendored; snapshot commit
# 0d408831fd38ac72c52d53dd091a3ccaabce5207.
set -euo pipefail

if [ $# -ne 4 ]; then
    sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2
    exit 2
fi
BUILD_DIR=$(cd "$1" && pwd)
NP=$2
CASE=$3
STEPS=$4
HERE=$(cd "$(dirname "$0")" && pwd)
EXE="$BUILD_DIR/magic.exe"
INPUT="$HERE/input_case${CASE}.nml"
[ -x "$EXE" ] || { echo "run_magic.sh: no $EXE" >&2; exit 1; }
[ -f "$INPUT" ] || { echo "run_magic.sh: no $INPUT" >&2; exit 1; }

RUN=$(mktemp -d "${TMPDIR:-/tmp}/magic-run.XXXXXX")
if [ "${KEEP:-0}" != 1 ]; then trap 'rm -rf "$RUN"' EXIT; fi
sed -e "s/^ *n_time_steps *=.*/ n_time_steps=${STEPS},/" "$INPUT" > "$RUN/input.nml"

# One thread per rank: no OpenMP in this build, and OpenBLAS must not
# spawn its own threads beside the MPI ranks.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
MPIRUN_ARGS=(-np "$NP")
if [ "$(id -u)" = 0 ]; then
    MPIRUN_ARGS+=(--allow-run-as-root)
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
if [ "$NP" -gt "$(nproc)" ]; then MPIRUN_ARGS+=(--oversubscribe); fi

(cd "$RUN" && mpirun "${MPIRUN_ARGS[@]}" "$EXE" input.nml > stdout.txt 2>&1) || {
    echo "run_magic.sh: MagIC failed, last lines of its output:" >&2
    tail -20 "$RUN/stdout.txt" >&2
    exit 1
}

LOG=$(ls "$RUN"/log.* | head -1)
# Lines look like " ! Mean wall time for one time step          :  0.226 seconds"
# or "... :  8.740E-02 seconds" (MagIC's formatTime; runs of >= 60 s per step
# would print minutes and are not parsed).
grab() {
    grep -F "$1" "$LOG" | tail -1 | sed -E 's/.*:[[:space:]]*([0-9.Ee+-]+) seconds.*/\1/'
}
TOT=$(grab "Mean wall time for one time step")
PURE=$(grab "Mean wall time for one pure time step")
[ -n "$TOT" ] || { echo "run_magic.sh: no per-step time in $LOG" >&2; exit 1; }
printf 'magic case=%s np=%s steps=%s seconds_per_step=%.6g pure_seconds_per_step=%.6g\n' \
    "$CASE" "$NP" "$STEPS" "$TOT" "${PURE:-nan}"

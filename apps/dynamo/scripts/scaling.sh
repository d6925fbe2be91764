#!/usr/bin/env bash
# Strong scaling of the dynamo at the benchmark resolution (nr 33, lmax 64,
# ntheta 96, nphi 192, CNAB2, dt = 1e-4): cases 0 and 1, the 1d
# distribution (pi_theta = 1) and the 2d one (pi_theta = 2, 4), under
# mpirun.
#
#   cargo build --release -p dynamo --features mpi
#   apps/dynamo/scripts/scaling.sh target/release/dynamo OUTDIR "1 2 4 8 16" 100
#
# Writes one JSON report per run into OUTDIR and prints a table (needs
# python3 for the table only).
set -u
BIN=${1:?dynamo binary}
OUT=${2:?output directory}
RANKS=${3:-"1 2 4 8 16"}
STEPS=${4:-100}
HERE=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
for case in 0 1; do
  for p in $RANKS; do
    for pt in 1 2 4; do
      [ $((p % pt)) -eq 0 ] || continue
      [ "$pt" -le "$p" ] || continue
      [ "$pt" -eq 1 ] || [ "$p" -ge 2 ] || continue
      mpirun -np "$p" --bind-to core --map-by core "$BIN" --config "$HERE/examples/case$case.toml" \
        --steps "$STEPS" --diag-every "$STEPS" --pi-theta "$pt" --no-vtk --quiet \
        --json "$OUT/case${case}_${p}_${pt}.json" > /dev/null \
        || echo "failed: case $case p=$p pi_theta=$pt" >&2
    done
  done
done
python3 - "$OUT" <<'PY'
import json, os, sys
d = sys.argv[1]
rows = []
for f in sorted(os.listdir(d)):
    if not (f.startswith('case') and f.endswith('.json')):
        continue
    c, p, pt = f[4:-5].split('_')
    rows.append((int(c), int(p), int(pt), json.load(open(os.path.join(d, f)))))
rows.sort()
print(f"{'case':>4} {'P':>3} {'grid':>6} {'s/step':>8} {'speedup':>8} {'transf.':>8} {'prod.':>7} {'transp.':>8} {'radial':>7} {'implicit':>8}  theta/l protocols")
base = {}
for c, p, pt, r in rows:
    s = r['seconds_per_step']
    if p == 1:
        base[c] = s
    ph, n = r['phases'], max(r['steps'], 1)
    print(f"{c:>4} {p:>3} {r['grid'][0]:>3}x{r['grid'][1]:<2} {s:>8.4f} {base.get(c, s) / s:>8.2f} "
          f"{ph['transforms'] / n:>8.4f} {ph['products'] / n:>7.4f} {ph['transpositions'] / n:>8.4f} "
          f"{ph['radial'] / n:>7.4f} {ph['implicit'] / n:>8.4f}  {r['protocols'][0]}/{r['protocols'][1]}")
PY

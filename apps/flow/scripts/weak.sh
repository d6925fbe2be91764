#!/usr/bin/env bash
# Weak scaling of the flow app under mpirun: about 256k cells per rank
# (n = 64, 80, 96, 128, 160 for 1, 2, 4, 8, 16 ranks), SC array c = 0.125,
# cut cells, 10 Stokes steps from rest, communication avoidance on and off.
#
#   cargo build --release -p flow --features mpi
#   apps/flow/scripts/weak.sh target/release/flow OUTDIR "1 2 4 8 16"
#
# Writes one JSON report per run into OUTDIR and prints a table (python3).
set -u
BIN=${1:?flow binary}
OUT=${2:?output directory}
RANKS=${3:-"1 2 4 8 16"}
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
size() { case $1 in 1) echo 64;; 2) echo 80;; 4) echo 96;; 8) echo 128;; 16) echo 160;; *) echo 0;; esac; }
for p in $RANKS; do
  n=$(size "$p")
  [ "$n" -gt 0 ] || { echo "no size for $p ranks" >&2; continue; }
  for ca in true false; do
    mpirun -np "$p" --bind-to core --map-by core "$BIN" --n "$n" --steps 10 --steady-tol 0 \
      --comm-avoiding "$ca" --no-vtk --quiet --json "$OUT/weak_${p}_${ca}.json" > /dev/null \
      || echo "failed: p=$p ca=$ca" >&2
  done
done
python3 - "$OUT" <<'PY'
import json, os, sys
d = sys.argv[1]
rows = []
for f in sorted(os.listdir(d)):
    if f.startswith('weak_') and f.endswith('.json'):
        _, p, ca = f[:-5].split('_')
        rows.append((int(p), ca, json.load(open(os.path.join(d, f)))))
rows.sort(key=lambda r: (r[1], r[0]))
print(f"{'P':>3} {'n':>4} {'CA':>5} {'s/step':>8} {'Mcell/s/rank':>12} {'eff':>6} {'momentum':>9} {'projection':>10} {'halo':>7} {'its m/p':>10}")
base = {}
for p, ca, r in rows:
    s = r['seconds_per_step']; m = r['mcells_per_rank']
    if p == 1: base[ca] = m
    ph = r['phases']; it = r['iterations']
    print(f"{p:>3} {r['config']['n']:>4} {ca:>5} {s:>8.3f} {m:>12.3f} {m / base.get(ca, m):>6.2f} {ph['momentum']:>9.3f} {ph['projection']:>10.3f} {ph['halo']:>7.3f} {it[0]:>5.1f}/{it[1]:<4.1f}")
PY

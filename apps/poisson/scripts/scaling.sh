#!/usr/bin/env bash
# Strong scaling of the poisson app on one node: in-process ranks and MPI
# ranks, communication-avoiding smoothing on and off, MG-PCG to 1e-10.
#
#   cargo build --release -p poisson --features mpi
#   apps/poisson/scripts/scaling.sh target/release/poisson OUTDIR "128 256" "1 2 4 8 16"
#
# Writes one JSON report per run into OUTDIR and prints a table (needs
# python3 for the table only).
set -u
BIN=${1:?poisson binary}
OUT=${2:?output directory}
SIZES=${3:-"128 256"}
RANKS=${4:-"1 2 4 8 16"}
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
for n in $SIZES; do
  for p in $RANKS; do
    for ca in on off; do
      "$BIN" --n "$n" --ranks "$p" --ca "$ca" --repeat 3 --quiet --json "$OUT/inproc_${n}_${p}_${ca}.json" \
        || echo "failed: in-process n=$n p=$p ca=$ca" >&2
      if command -v mpirun >/dev/null; then
        mpirun -np "$p" --bind-to core --map-by core "$BIN" --n "$n" --ca "$ca" --repeat 3 --quiet \
          --json "$OUT/mpi_${n}_${p}_${ca}.json" || echo "failed: mpi n=$n p=$p ca=$ca" >&2
      fi
    done
  done
done
python3 - "$OUT" <<'PY'
import json, os, sys
d = sys.argv[1]
rows = []
for f in sorted(os.listdir(d)):
    if not f.endswith('.json'):
        continue
    kind, n, p, ca = f[:-5].split('_')
    r = json.load(open(os.path.join(d, f)))
    rows.append((kind, int(n), int(p), ca, r))
rows.sort(key=lambda t: (t[0], t[1], t[3], t[2]))
print(f"{'backend':8} {'n':>4} {'P':>3} {'CA':>3} {'its':>4} {'solve s':>9} {'MDOF/s':>8} {'speedup':>8} {'halo/V':>7} {'fine halo s':>11} hash")
base = {}
for kind, n, p, ca, r in rows:
    key = (kind, n, ca)
    if p == 1:
        base[key] = r['solve_s']
    sp = base.get(key, float('nan')) / r['solve_s']
    fine = r['levels'][0]['halo_s'] if r.get('levels') else float('nan')
    print(f"{kind:8} {n:>4} {p:>3} {ca:>3} {r['iterations']:>4} {r['solve_s']:>9.3f} {r['dof_per_s']/1e6:>8.2f} {sp:>8.2f} {r['halo_events_per_vcycle']:>7.1f} {fine:>11.3f} {r['hash_hex']}")
PY

#!/usr/bin/env bash
# Build HeFFTe's speed3d benchmarks with its FFTW backend beside this
# repository, as the reference for `cargo xtask bench fft-dist`. Nothing of
# HeFFTe is vendored here.
#
#   build_heffte.sh HEFFTE_SRC [OUT_DIR]
#
# HEFFTE_SRC  HeFFTe sources: a bare git directory (e.g. the snapshot that the
#             `fetch` tool gives for github:icl-utk-edu/heffte, something like
#             /work/.mirror/icl-utk-edu+heffte/repo; tag v2.4.1 is checked out
#             from it) or an unpacked tree with CMakeLists.txt at its top.
# OUT_DIR     where everything goes; default <repo>/target/heffte (ignored by
#             git). The benchmarks land in OUT_DIR/build/benchmarks/.
#
# Needs cmake, a C++ compiler, OpenMPI (mpicxx) and FFTW 3 (libfftw3-dev).
# HeFFTe 2.4.1 (BSD-3-Clause, https://github.com/icl-utk-edu/heffte), Release,
# -O3 -march=native, Heffte_ENABLE_FFTW and Heffte_ENABLE_AVX on.
set -euo pipefail
src=${1:?usage: build_heffte.sh HEFFTE_SRC [OUT_DIR]}
here=$(cd "$(dirname "$0")/../.." && pwd)
out=${2:-$here/target/heffte}
mkdir -p "$out"
if [ -f "$src/CMakeLists.txt" ]; then
  tree=$src
else
  tree=$out/src
  rm -rf "$tree" && mkdir -p "$tree"
  git --git-dir="$src" archive v2.4.1 | tar -x -C "$tree"
fi
for tool in cmake mpicxx; do
  command -v "$tool" >/dev/null || { echo "build_heffte.sh: $tool is missing (apt-get install cmake libopenmpi-dev)" >&2; exit 1; }
done
[ -f /usr/include/fftw3.h ] || { echo "build_heffte.sh: FFTW headers are missing (apt-get install libfftw3-dev)" >&2; exit 1; }
cmake -S "$tree" -B "$out/build" -DCMAKE_BUILD_TYPE=Release -DHeffte_ENABLE_FFTW=ON \
  -DHeffte_ENABLE_AVX=ON -DHeffte_ENABLE_TESTING=ON -DCMAKE_CXX_FLAGS="-O3 -march=native" >/dev/null
cmake --build "$out/build" -j "$(nproc)" --target speed3d_c2c speed3d_r2c >/dev/null
echo "$out/build/benchmarks/speed3d_c2c"
echo "$out/build/benchmarks/speed3d_r2c"

#!/usr/bin/env bash
# Build MagIC (and optionally SHTns) beside this repository, as a performance
# reference for apps/dynamo. Nothing of MagIC or SHTns is vendored here.
#
#   build_magic.sh MAGIC_SRC [SHTNS_SRC|none] [OUT_DIR]
#
# MAGIC_SRC  MagIC sources: either a bare git directory (e.g. the snapshot
#            that the `fetch` tool gives for github:magic-sph/magic, something
#            like /work/.mirror/magic-sph+magic/repo) or an already unpacked
#            tree (with CMakeLists.txt, cmake/ and src/ at its top).
# SHTNS_SRC  SHTns sources (optional; `none` or absent skips the SHTns build):
#            an unpacked tree with ./configure at its top, or a tarball
#            shtns-X.Y.Z.tar.gz (the PyPI source distribution works, see below).
# OUT_DIR    where everything goes; default: <repo>/target/magic (git-ignored).
#
# Expected layout on another machine, e.g.:
#   somewhere/magic/            bare git dir or unpacked MagIC tree
#   somewhere/shtns-3.7.5.tar.gz
#   ./build_magic.sh somewhere/magic somewhere/shtns-3.7.5.tar.gz
#
# Result:
#   OUT_DIR/src-magic/                MagIC sources (unpacked)
#   OUT_DIR/build-native/magic.exe    MagIC, its built-in Legendre transforms
#   OUT_DIR/src-shtns/, OUT_DIR/shtns-home/local/{lib,include}  SHTns (serial)
#   OUT_DIR/build-shtns/magic.exe     MagIC with SHTns
# then: apps/dynamo/magic/run_magic.sh OUT_DIR/build-native NP CASE STEPS
#
# Both MagIC builds: MPI on (mpif90 / mpicc from OpenMPI), OpenMP off,
# gfortran -O3 -march=native (MagIC's CMake Release flags), FFTW3 for FFTs and
# DCTs, LAPACK from OpenBLAS.
#
# Tested with: MagIC https://github.com/magic-sph/magic (GPL-3.0) commit
# 0d408831fd38ac72c52d53dd091a3ccaabce5207 (v6.3-165-g0d408831); SHTns 3.7.5
# (CeCILL-2.1, https://bitbucket.org/nschaeff/shtns), from the PyPI source
# distribution shtns-3.7.5.tar.gz, sha256
# 94f608f3a01df892b67cf9b209b110df6b067f5fe68e3319719ab95ccc6c2a03, fetched with
#   python3 -m venv v && v/bin/pip install numpy setuptools wheel &&
#   v/bin/pip download shtns==3.7.5 --no-deps --no-binary :all: --no-build-isolation
# (numpy in the venv only lets pip read the package metadata; without
# --no-build-isolation pip builds numpy from source first). Debian 12,
# gfortran 12.2, OpenMPI 4.1, CMake 3.25.
#
# System packages (Debian/Ubuntu): gfortran cmake make libfftw3-dev
# liblapack-dev libopenblas-dev openmpi-bin libopenmpi-dev. INSTALL_DEPS=1
# makes this script apt-get install them. JOBS (default 2) sets make -j.
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 3 ]; then
    sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2
    exit 2
fi
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
MAGIC_SRC=$1
SHTNS_SRC=${2:-none}
OUT=${3:-$REPO/target/magic}
JOBS=${JOBS:-2}

if [ "${INSTALL_DEPS:-0}" = 1 ]; then
    apt-get update
    apt-get install -y gfortran cmake make libfftw3-dev liblapack-dev \
        libopenblas-dev openmpi-bin libopenmpi-dev
fi
for t in gfortran mpif90 mpicc cmake make; do
    command -v "$t" > /dev/null || { echo "build_magic.sh: $t not found (INSTALL_DEPS=1?)" >&2; exit 1; }
done

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

# ---- MagIC sources -------------------------------------------------------
rm -rf "$OUT/src-magic"
mkdir -p "$OUT/src-magic"
if [ -f "$MAGIC_SRC/CMakeLists.txt" ] && [ -d "$MAGIC_SRC/src" ]; then
    cp -a "$MAGIC_SRC/CMakeLists.txt" "$MAGIC_SRC/cmake" "$MAGIC_SRC/src" "$OUT/src-magic/"
    [ -d "$MAGIC_SRC/license" ] && cp -a "$MAGIC_SRC/license" "$OUT/src-magic/"
elif git --git-dir="$MAGIC_SRC" rev-parse --verify -q HEAD > /dev/null; then
    # Only the paths the build needs: a snapshot may lack some large sample
    # files, which makes a whole-tree `git archive HEAD` fail. (git may still
    # print "invalid object ... for 'samples/...'" here; it is harmless.)
    git --git-dir="$MAGIC_SRC" archive HEAD -- CMakeLists.txt cmake src license \
        samples/dynamo_benchmark | tar -x -C "$OUT/src-magic"
    git --git-dir="$MAGIC_SRC" rev-parse HEAD > "$OUT/src-magic/COMMIT"
    echo "MagIC commit: $(cat "$OUT/src-magic/COMMIT")"
else
    echo "build_magic.sh: $MAGIC_SRC is neither a MagIC tree nor a git dir" >&2
    exit 1
fi

# Common CMake options. MagIC's CMake finds LAPACK (FindLAPACK) but links
# ${LAPACK95_LIBRARIES}, which nothing sets: give it OpenBLAS explicitly, or
# the link fails on dgetrf_/dgetrs_.
CMAKE_OPTS=(
    -DCMAKE_BUILD_TYPE=Release
    -DUSE_MPI=yes -DUSE_OMP=no
    -DUSE_FFTLIB=FFTW -DUSE_LAPACKLIB=LAPACK
    -DBLA_VENDOR=OpenBLAS -DLAPACK95_LIBRARIES=openblas
)

# ---- Step 1: MagIC with its built-in transforms ---------------------------
rm -rf "$OUT/build-native"
mkdir -p "$OUT/build-native"
(cd "$OUT/build-native" &&
    CC=mpicc FC=mpif90 cmake "$OUT/src-magic" "${CMAKE_OPTS[@]}" -DUSE_SHTNS=no > cmake.log 2>&1 &&
    make -j"$JOBS" > make.log 2>&1) || {
    echo "build_magic.sh: native build failed, see $OUT/build-native/{cmake,make}.log" >&2
    exit 1
}
echo "built $OUT/build-native/magic.exe"

# ---- Step 2: SHTns (serial) and MagIC with SHTns --------------------------
if [ "$SHTNS_SRC" = none ]; then
    exit 0
fi
rm -rf "$OUT/src-shtns" "$OUT/shtns-home"
mkdir -p "$OUT/src-shtns"
if [ -f "$SHTNS_SRC/configure" ]; then
    cp -a "$SHTNS_SRC/." "$OUT/src-shtns/"
else
    tar -xzf "$SHTNS_SRC" -C "$OUT/src-shtns" --strip-components=1
fi
PREFIX="$OUT/shtns-home/local"
(cd "$OUT/src-shtns" &&
    ./configure --prefix="$PREFIX" --disable-openmp > configure.log 2>&1 &&
    make -j"$JOBS" libshtns.a > make.log 2>&1) || {
    echo "build_magic.sh: SHTns build failed, see $OUT/src-shtns/{configure,make}.log" >&2
    exit 1
}
# `make install` also copies shtns_cuda.h, which the PyPI sdist leaves out:
# install by hand what MagIC needs.
mkdir -p "$PREFIX/lib" "$PREFIX/include"
cp "$OUT/src-shtns/libshtns.a" "$PREFIX/lib/"
cp "$OUT/src-shtns/shtns.h" "$OUT/src-shtns/shtns.f" "$OUT/src-shtns/shtns.f03" "$PREFIX/include/"

# MagIC's CMake looks for SHTns (library and shtns.f03) under $HOME/local
# only, so HOME points at our prefix's parent for the configure step.
rm -rf "$OUT/build-shtns"
mkdir -p "$OUT/build-shtns"
(cd "$OUT/build-shtns" &&
    HOME="$OUT/shtns-home" CC=mpicc FC=mpif90 cmake "$OUT/src-magic" "${CMAKE_OPTS[@]}" \
        -DUSE_SHTNS=yes > cmake.log 2>&1 &&
    grep -q "SHTNS: $PREFIX/lib/libshtns.a" cmake.log &&
    make -j"$JOBS" > make.log 2>&1) || {
    echo "build_magic.sh: SHTns build of MagIC failed, see $OUT/build-shtns/{cmake,make}.log" >&2
    exit 1
}
echo "built $OUT/build-shtns/magic.exe"

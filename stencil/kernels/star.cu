// Star-stencil sweeps on a padded field (one component, last axis fastest):
// out = c u + sum_d sum_m w[d][m-1] (u(+m e_d) + u(-m e_d)).
// RADIUS (the stencil radius, order / 2) is replaced before compilation.
//
// Every kernel performs the host sweep's operations in the host sweep's
// order, and the module is compiled with --fmad=false, so each cell gets
// the bits the host computes (stencil/src/lib.rs, simd.rs).

#define R RADIUS

// The fused update out = c u + sum_d sum_m w[d][m-1] (u(+m e_d) + u(-m e_d)).
struct Coef {
    double c;
    double w[3][10];
};

// `Box3` and `cell` come from halo's region.cuh, which precedes this
// source (`halo::DeviceRegion::SOURCE`).

// The stencils' `_wrap` entry points (the host launches them for one rank
// that is its own periodic neighbour on every axis, with the region the
// whole owned box and n >= R along every axis): a neighbour across a face
// is read at its periodic image inside the owned cells instead of in the
// ghost layer, so the sweep reads no ghost and the field needs no
// exchange.
//
// The offset, in cells along an axis of n cells, from cell c to the cell
// d away (c + d in [-n, 2n)): d, or d -+ n past a face when the axis wraps
// (W).
template <bool W>
__device__ __forceinline__ int nb(int c, int d, int n) {
    if (!W) return d;
    const int t = c + d;
    return t < 0 ? d + n : (t >= n ? d - n : d);
}

// Several regions of one sweep in one launch (the overlap's shell, up to
// six slabs): region r has a gx[r] x gy[r] x (its chunks along axis 0)
// grid of blocks, blocks first[r] .. first[r + 1] of a one-dimensional
// grid, and its own chunk. Each `NAME_many` entry runs `NAME_at` for the
// block's region and its block coordinates there: the same threads, the
// same cells, the same bits as one launch per region (never wrapping: the
// shell is not the owned box).
struct Regions {
    Box3 b[6];
    int chunk[6];
    int gx[6];
    int gy[6];
    int first[7];
    int count;
};
// The host's `Regions` (stencil/src/device.rs) asserts the same size.
static_assert(sizeof(Regions) == 248, "struct Regions differs from the host's");

__device__ __forceinline__ int region_of(const Regions& rs, int blk, int& bx, int& by,
                                         int& bz) {
    int r = 0;
    while (r + 1 < rs.count && blk >= rs.first[r + 1]) ++r;
    const int local = blk - rs.first[r];
    bx = local % rs.gx[r];
    by = (local / rs.gx[r]) % rs.gy[r];
    bz = local / (rs.gx[r] * rs.gy[r]);
    return r;
}

// The three entry points of stencil NAME (its body is `NAME_at`): `NAME`,
// one region with the launch's own block coordinates; `NAME_wrap`, the
// same reading across the faces at the periodic images (`W`); and
// `NAME_many`. Separate entries, so that the periodic variant's registers
// do not raise the plain one's (one kernel holding both ran both about 8 %
// slower at 512^3 on an H200).
#define ENTRY(NAME, ENTRY_NAME, BOUNDS, W)                                                   \
    extern "C" __global__ void __launch_bounds__(BOUNDS)                                     \
        ENTRY_NAME(const double* __restrict__ u, double* __restrict__ out, const Coef cf,    \
                   const Box3 b, long s0, long s1, int chunk, int step,                      \
                   int* __restrict__ bad) {                                                  \
        NAME##_at<W>(u, out, cf, b, s0, s1, chunk, step, bad, blockIdx.x, blockIdx.y,        \
                     blockIdx.z);                                                            \
    }
#define ENTRIES(NAME, BOUNDS)                                                                \
    ENTRY(NAME, NAME, BOUNDS, false)                                                         \
    ENTRY(NAME, NAME##_wrap, BOUNDS, true)                                                   \
    extern "C" __global__ void __launch_bounds__(BOUNDS)                                     \
        NAME##_many(const double* __restrict__ u, double* __restrict__ out, const Coef cf,   \
                    const Regions rs, long s0, long s1, int step, int* __restrict__ bad) {   \
        int bx, by, bz;                                                                      \
        const int r = region_of(rs, blockIdx.x, bx, by, bz);                                 \
        NAME##_at<false>(u, out, cf, rs.b[r], s0, s1, rs.chunk[r], step, bad, bx, by, bz);   \
    }

// One thread per (j, k) column of the region, marching `chunk` cells along
// axis 0 (the slowest) with the 2R + 1 values of that axis in registers:
// each value of u is loaded once per column for axis 0, and the axis 1 and
// 2 neighbours come through the caches. `bad` receives the smallest step
// that wrote a non-finite value.
template <bool W>
__device__ __forceinline__ void
fd_sweep_at(const double* __restrict__ u, double* __restrict__ out, const Coef cf, const Box3 b,
            long s0, long s1, int chunk, int step, int* __restrict__ bad, int bx, int by,
            int bz) {
    const int k = bx * blockDim.x + threadIdx.x;
    const int j = by * blockDim.y + threadIdx.y;
    if (k >= b.n2 || j >= b.n1) return;
    const int i0 = bz * chunk;
    const int i1 = min(i0 + chunk, b.n0);
    if (i0 >= i1) return;
    long q = (long)(b.lo0 + i0) * s0 + (long)(b.lo1 + j) * s1 + b.lo2 + k;
    double x[2 * R + 1];
#pragma unroll
    for (int m = 0; m < 2 * R; ++m) x[m] = u[q + (long)nb<W>(i0, m - R, b.n0) * s0];
    bool finite = true;
#pragma unroll 4
    for (int i = i0; i < i1; ++i, q += s0) {
        x[2 * R] = u[q + (long)nb<W>(i, R, b.n0) * s0];
        double v = cf.c * x[R];
#pragma unroll
        for (int m = 1; m <= R; ++m) v += cf.w[0][m - 1] * (x[R + m] + x[R - m]);
#pragma unroll
        for (int m = 1; m <= R; ++m)
            v += cf.w[1][m - 1] *
                 (u[q + (long)nb<W>(j, m, b.n1) * s1] + u[q + (long)nb<W>(j, -m, b.n1) * s1]);
#pragma unroll
        for (int m = 1; m <= R; ++m)
            v += cf.w[2][m - 1] * (u[q + nb<W>(k, m, b.n2)] + u[q + nb<W>(k, -m, b.n2)]);
        out[q] = v;
        finite &= isfinite(v);
#pragma unroll
        for (int m = 0; m < 2 * R; ++m) x[m] = x[m + 1];
    }
    if (!finite) atomicMin(bad, step);
}

ENTRIES(fd_sweep, 256)

// Two cells a thread along axis 2: the pair (P, P + 1) starts at an even
// padded index, so with rows and planes of even length (the host checks)
// the axis-0 register queue, the axis-1 neighbours and the store move 16
// bytes at once, and the axis-2 neighbours are 2R scalar loads a pair
// instead of 4R. Each cell's operands and their order are fd_sweep's, so
// are the bits. A pair half outside the region (an odd first or last
// column) is computed and not stored; its values outside the ghosts are
// never loaded.
template <bool W>
__device__ __forceinline__ void
fd_pairs_at(const double* __restrict__ u, double* __restrict__ out, const Coef cf, const Box3 b,
            long s0, long s1, int chunk, int step, int* __restrict__ bad, int bx, int by,
            int bz) {
    const int P = (b.lo2 & ~1) + 2 * (bx * blockDim.x + threadIdx.x);
    const int j = by * blockDim.y + threadIdx.y;
    if (P >= b.lo2 + b.n2 || j >= b.n1) return;
    const int i0 = bz * chunk;
    const int i1 = min(i0 + chunk, b.n0);
    if (i0 >= i1) return;
    const bool w0 = P >= b.lo2, w1 = P + 1 < b.lo2 + b.n2;
    // The pair's first cell along axis 2 in region coordinates. With `W`
    // the host guarantees lo2 and n2 even, so no pair straddles a face.
    const int c = P - b.lo2;
    long q = (long)(b.lo0 + i0) * s0 + (long)(b.lo1 + j) * s1 + P;
    double2 x[2 * R + 1];
#pragma unroll
    for (int m = 0; m < 2 * R; ++m)
        x[m] = *reinterpret_cast<const double2*>(u + q + (long)nb<W>(i0, m - R, b.n0) * s0);
    bool finite = true;
#pragma unroll 2
    for (int i = i0; i < i1; ++i, q += s0) {
        x[2 * R] = *reinterpret_cast<const double2*>(u + q + (long)nb<W>(i, R, b.n0) * s0);
        // kk[R + d] = u(P + d), d from -R to R + 1.
        double kk[2 * R + 2];
        kk[R] = x[R].x;
        kk[R + 1] = x[R].y;
#pragma unroll
        for (int m = 1; m < R; ++m) {
            kk[R - m] = u[q + nb<W>(c, -m, b.n2)];
            kk[R + 1 + m] = u[q + 1 + nb<W>(c + 1, m, b.n2)];
        }
        kk[0] = w0 ? u[q + nb<W>(c, -R, b.n2)] : 0.0;
        kk[2 * R + 1] = w1 ? u[q + 1 + nb<W>(c + 1, R, b.n2)] : 0.0;
        double2 yp[R], ym[R];
#pragma unroll
        for (int m = 1; m <= R; ++m) {
            yp[m - 1] =
                *reinterpret_cast<const double2*>(u + q + (long)nb<W>(j, m, b.n1) * s1);
            ym[m - 1] =
                *reinterpret_cast<const double2*>(u + q + (long)nb<W>(j, -m, b.n1) * s1);
        }
        double v0 = cf.c * x[R].x, v1 = cf.c * x[R].y;
#pragma unroll
        for (int m = 1; m <= R; ++m) {
            v0 += cf.w[0][m - 1] * (x[R + m].x + x[R - m].x);
            v1 += cf.w[0][m - 1] * (x[R + m].y + x[R - m].y);
        }
#pragma unroll
        for (int m = 1; m <= R; ++m) {
            v0 += cf.w[1][m - 1] * (yp[m - 1].x + ym[m - 1].x);
            v1 += cf.w[1][m - 1] * (yp[m - 1].y + ym[m - 1].y);
        }
#pragma unroll
        for (int m = 1; m <= R; ++m) {
            v0 += cf.w[2][m - 1] * (kk[R + m] + kk[R - m]);
            v1 += cf.w[2][m - 1] * (kk[R + 1 + m] + kk[R + 1 - m]);
        }
        if (w0 && w1) {
            *reinterpret_cast<double2*>(out + q) = make_double2(v0, v1);
            finite &= isfinite(v0) && isfinite(v1);
        } else if (w0) {
            out[q] = v0;
            finite &= isfinite(v0);
        } else {
            out[q + 1] = v1;
            finite &= isfinite(v1);
        }
#pragma unroll
        for (int m = 0; m < 2 * R; ++m) x[m] = x[m + 1];
    }
    if (!finite) atomicMin(bad, step);
}

ENTRIES(fd_pairs, 256)

// A value of the lane m places further along (row_down) or back (row_up)
// in the same row of 32 lanes; a lane with no such lane gets its own value.
// On AMD GPUs (hipcc defines the first macro, hiprtc only the second) a
// 64-lane wavefront holds two rows of the block; width 32 keeps each
// shuffle within its row, as a CUDA warp does.
__device__ __forceinline__ double row_down(double v, int m) {
#if defined(__HIP_PLATFORM_AMD__) || defined(__AMDGCN__)
    return __shfl_down(v, m, 32);
#else
    return __shfl_down_sync(0xffffffffu, v, m);
#endif
}
__device__ __forceinline__ double row_up(double v, int m) {
#if defined(__HIP_PLATFORM_AMD__) || defined(__AMDGCN__)
    return __shfl_up(v, m, 32);
#else
    return __shfl_up_sync(0xffffffffu, v, m);
#endif
}

// One warp across axis 2 (blocks of 32 x 8): the axis-2 neighbours come
// from the other lanes by shuffles instead of 2R loads each, the edge lanes
// loading the ones past the warp; axis 0 in registers, axis 1 through the
// caches. Lanes past the region load the ghost cells that follow it (their
// values feed the shuffles) and, beyond those, a clamped cell that no
// stored value uses; the warp stays whole for the shuffles. Same operands
// in the same order as fd_sweep. On AMD GPUs (64-lane wavefronts, two rows
// each) the shuffles have width 32, so a row is still one group of 32
// lanes: an early return of the other row leaves it whole.
template <bool W>
__device__ __forceinline__ void
fd_shuffle_at(const double* __restrict__ u, double* __restrict__ out, const Coef cf, const Box3 b,
              long s0, long s1, int chunk, int step, int* __restrict__ bad, int bx, int by,
              int bz) {
    const int lane = threadIdx.x;
    const int k = bx * 32 + lane;
    const int j = by * blockDim.y + threadIdx.y;
    if (j >= b.n1) return;  // the whole warp: a warp is one row
    const int i0 = bz * chunk;
    const int i1 = min(i0 + chunk, b.n0);
    if (i0 >= i1) return;
    const bool kin = k < b.n2;
    // With `W` a lane past the region holds the periodic image of the
    // cell it stands for (R <= n2, so one wrap).
    int kk = min(k, b.n2 - 1 + R);
    if (W && kk >= b.n2) kk -= b.n2;
    long q = (long)(b.lo0 + i0) * s0 + (long)(b.lo1 + j) * s1 + b.lo2 + kk;
    double x[2 * R + 1];
#pragma unroll
    for (int m = 0; m < 2 * R; ++m) x[m] = u[q + (long)nb<W>(i0, m - R, b.n0) * s0];
    bool finite = true;
    for (int i = i0; i < i1; ++i, q += s0) {
        x[2 * R] = u[q + (long)nb<W>(i, R, b.n0) * s0];
        double v = cf.c * x[R];
#pragma unroll
        for (int m = 1; m <= R; ++m) v += cf.w[0][m - 1] * (x[R + m] + x[R - m]);
#pragma unroll
        for (int m = 1; m <= R; ++m)
            v += cf.w[1][m - 1] *
                 (u[q + (long)nb<W>(j, m, b.n1) * s1] + u[q + (long)nb<W>(j, -m, b.n1) * s1]);
#pragma unroll
        for (int m = 1; m <= R; ++m) {
            double rt = row_down(x[R], m);
            double lf = row_up(x[R], m);
            if (kin && lane + m > 31) rt = u[q + nb<W>(k, m, b.n2)];
            if (kin && lane < m) lf = u[q + nb<W>(k, -m, b.n2)];
            v += cf.w[2][m - 1] * (rt + lf);
        }
        if (kin) {
            out[q] = v;
            finite &= isfinite(v);
        }
#pragma unroll
        for (int m = 0; m < 2 * R; ++m) x[m] = x[m + 1];
    }
    if (!finite) atomicMin(bad, step);
}

ENTRIES(fd_shuffle, 256)

// The same update with the (j, k) neighbours from shared memory: a block of
// TX x TY threads stages each plane of its tile, widened by R cells on each
// side along axes 1 and 2, once, and every thread reads its 4R neighbours
// there instead of through the caches; axis 0 stays in registers. The
// operands and their order are those of `fd_sweep`, so are the bits.
#define TX 32
#define TY 8
template <bool W>
__device__ __forceinline__ void
fd_tiled_at(const double* __restrict__ u, double* __restrict__ out, const Coef cf, const Box3 b,
            long s0, long s1, int chunk, int step, int* __restrict__ bad, int bx, int by,
            int bz) {
    __shared__ double t[TY + 2 * R][TX + 2 * R];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int k0 = bx * TX, j0 = by * TY;
    const int k = k0 + tx, j = j0 + ty;
    const bool inside = k < b.n2 && j < b.n1;
    const int i0 = bz * chunk;
    const int i1 = min(i0 + chunk, b.n0);
    // The tile's rows and columns that exist: the region plus R on each side.
    const int rows = min(TY, b.n1 - j0) + 2 * R;
    const int cols = min(TX, b.n2 - k0) + 2 * R;
    // The tile's cell (r, c) is the region's (j0 + r - R, k0 + c - R), or
    // with `W` its periodic image.
    long origin = (long)(b.lo0 + i0) * s0 + (long)(b.lo1 + j0) * s1 + b.lo2 + k0;
    long q = (long)(b.lo0 + i0) * s0 + (long)(b.lo1 + j) * s1 + b.lo2 + k;
    double x[2 * R + 1];
    if (inside) {
#pragma unroll
        for (int m = 0; m < 2 * R; ++m) x[m] = u[q + (long)nb<W>(i0, m - R, b.n0) * s0];
    }
    bool finite = true;
    for (int i = i0; i < i1; ++i, q += s0, origin += s0) {
        for (int r = ty; r < rows; r += TY)
            for (int c = tx; c < cols; c += TX)
                t[r][c] = u[origin + (long)nb<W>(j0, r - R, b.n1) * s1 + nb<W>(k0, c - R, b.n2)];
        __syncthreads();
        if (inside) {
            x[2 * R] = u[q + (long)nb<W>(i, R, b.n0) * s0];
            double v = cf.c * x[R];
#pragma unroll
            for (int m = 1; m <= R; ++m) v += cf.w[0][m - 1] * (x[R + m] + x[R - m]);
#pragma unroll
            for (int m = 1; m <= R; ++m)
                v += cf.w[1][m - 1] * (t[ty + R + m][tx + R] + t[ty + R - m][tx + R]);
#pragma unroll
            for (int m = 1; m <= R; ++m)
                v += cf.w[2][m - 1] * (t[ty + R][tx + R + m] + t[ty + R][tx + R - m]);
            out[q] = v;
            finite &= isfinite(v);
#pragma unroll
            for (int m = 0; m < 2 * R; ++m) x[m] = x[m + 1];
        }
        __syncthreads();
    }
    if (!finite) atomicMin(bad, step);
}

ENTRIES(fd_tiled, TX * TY)

// Two Euler steps in one pass (temporal blocking), for one rank that is
// its own periodic neighbour on every axis (as the `_wrap` entries; any
// n >= 1 along an axis, every index is taken modulo n): out = sweep(sweep(u)),
// the intermediate field never leaving the chip, so a step moves half the
// bytes of a one-step sweep.
//
// A block owns an extended tile of 32 columns (axis 2, one warp a row) by
// WY = RJ * BY rows (axis 1) and marches along axis 0 over `chunk` output
// planes. The first step ("mid") is computed on the tile less R cells of
// each side, the second on the tile less 2R, so the blocks' output tiles of
// (32 - 4R) x (WY - 4R) cells cover the box and the extended tiles overlap
// by 4R. Each thread owns RJ consecutive rows of one column, with register
// queues of 2R + 1 planes of input and of mid values: the axis-0
// neighbours and the axis-1 neighbours among its own rows are registers,
// the axis-2 neighbours come from the row's other lanes (shuffles), and
// only the R rows at each end of a thread's rows go through shared memory
// (rings of R + 2 input and R + 1 mid planes, one barrier a plane, each
// slot rewritten at least one barrier after its last read).
//
// Every value is fd_sweep's expression on fd_sweep's operands in its
// order, so both steps have the one-step kernels' bits. `bad` receives
// `step` if a mid value is not finite (every mid cell computed is the
// periodic image of an owned cell), else `step + 1` if an output is not.
__device__ __forceinline__ int pmod(int x, int n) {
    const int r = x % n;
    return r < 0 ? r + n : r;
}

// The update of the cell whose axis-0 queue is x (x[R] the cell), with its
// axis-1 neighbours jp[m - 1] = u(j + m), jm[m - 1] = u(j - m) and its
// axis-2 neighbours in the lanes of its row; every lane of the row calls it.
__device__ __forceinline__ double two_point(const Coef& cf, const double* x, const double* jp,
                                            const double* jm) {
    double v = cf.c * x[R];
#pragma unroll
    for (int m = 1; m <= R; ++m) v += cf.w[0][m - 1] * (x[R + m] + x[R - m]);
#pragma unroll
    for (int m = 1; m <= R; ++m) v += cf.w[1][m - 1] * (jp[m - 1] + jm[m - 1]);
#pragma unroll
    for (int m = 1; m <= R; ++m) v += cf.w[2][m - 1] * (row_down(x[R], m) + row_up(x[R], m));
    return v;
}

// The axis-1 neighbours jp[m - 1] = v(j + m) and jm[m - 1] = v(j - m) of
// row r of a thread's RJ rows, at queue position R: from the thread's own
// queue q, or past its rows from the boundary rows that the threads above
// and below left in `sh` (the next thread's row r at [ty + 1][r], the
// previous one's row RJ - R + r at [ty - 1][R + r]).
template <int RJ, int BY>
__device__ __forceinline__ void rows_around(const double (&q)[RJ][2 * R + 1],
                                            const double (&sh)[BY][2 * R][32], int r, int ty,
                                            int kk, double (&jp)[R], double (&jm)[R]) {
#pragma unroll
    for (int m = 1; m <= R; ++m) {
        jp[m - 1] = r + m < RJ ? q[r + m][R] : sh[ty + 1][r + m - RJ][kk];
        jm[m - 1] = r >= m ? q[r - m][R] : sh[ty - 1][2 * R + r - m][kk];
    }
}

// The block is 32 x BY threads; a grid of ceil(n2 / (32 - 4R)) x
// ceil(n1 / (RJ BY - 4R)) x ceil(n0 / chunk) blocks covers the box.
template <int RJ, int BY>
__device__ __forceinline__ void fd_two_at(const double* __restrict__ u, double* __restrict__ out,
                                          const Coef cf, const Box3 b, long s0, long s1,
                                          int chunk, int step, int* __restrict__ bad) {
    static_assert(RJ >= 2 * R, "a thread's rows must hold both boundary bands");
    constexpr int WY = RJ * BY, TK = 32 - 4 * R, TJ = WY - 4 * R;
    __shared__ double s_in[R + 2][BY][2 * R][32];
    __shared__ double s_mid[R + 1][BY][2 * R][32];
    const int kk = threadIdx.x, ty = threadIdx.y;
    const int k0 = blockIdx.x * TK, j0 = blockIdx.y * TJ, i0 = blockIdx.z * chunk;
    const int i1 = min(i0 + chunk, b.n0);
    if (i0 >= i1) return;  // the whole block
    const int kg = pmod(k0 - 2 * R + kk, b.n2);
    long roff[RJ];
#pragma unroll
    for (int r = 0; r < RJ; ++r)
        roff[r] = (long)(b.lo1 + pmod(j0 - 2 * R + ty * RJ + r, b.n1)) * s1 + b.lo2 + kg;
    // Iteration t loads input plane i0 - 2R + t (and prefetches the next),
    // computes mid at plane i0 - 3R + t (t >= 2R) and the output at plane
    // i0 - 4R + t (t >= 4R).
    const int T = (i1 - i0) + 4 * R;
    int pp = pmod(i0 - 2 * R, b.n0);
    double nxt[RJ];
#pragma unroll
    for (int r = 0; r < RJ; ++r) nxt[r] = u[(long)(b.lo0 + pp) * s0 + roff[r]];
    double qi[RJ][2 * R + 1], qm[RJ][2 * R + 1];
    bool fin_m = true, fin_o = true;
    const bool kmid = kk >= R && kk < 32 - R;
    const bool kout = kk >= 2 * R && kk < 2 * R + TK && k0 + kk - 2 * R < b.n2;
#pragma unroll 1
    for (int t = 0; t < T; ++t) {
#pragma unroll
        for (int r = 0; r < RJ; ++r) qi[r][2 * R] = nxt[r];
        if (t + 1 < T) {
            pp = pp + 1 == b.n0 ? 0 : pp + 1;
            const long base = (long)(b.lo0 + pp) * s0;
#pragma unroll
            for (int r = 0; r < RJ; ++r) nxt[r] = u[base + roff[r]];
        }
        const int si = t % (R + 2);
#pragma unroll
        for (int r = 0; r < R; ++r) {
            s_in[si][ty][r][kk] = qi[r][2 * R];
            s_in[si][ty][R + r][kk] = qi[RJ - R + r][2 * R];
        }
        if (t > 2 * R) {  // the mid plane of iteration t - 1
            const int sm = (t - 1) % (R + 1);
#pragma unroll
            for (int r = 0; r < R; ++r) {
                s_mid[sm][ty][r][kk] = qm[r][2 * R];
                s_mid[sm][ty][R + r][kk] = qm[RJ - R + r][2 * R];
            }
        }
        __syncthreads();
        if (t >= 2 * R) {
            const int sc = (t - R) % (R + 2);
#pragma unroll
            for (int r = 0; r < RJ; ++r)
#pragma unroll
                for (int m = 0; m < 2 * R; ++m) qm[r][m] = qm[r][m + 1];
#pragma unroll
            for (int r = 0; r < RJ; ++r) {
                const int jj = ty * RJ + r;
                if (jj >= R && jj < WY - R) {  // the same for the whole row
                    double jp[R], jm[R];
                    rows_around<RJ, BY>(qi, s_in[sc], r, ty, kk, jp, jm);
                    const double v = two_point(cf, qi[r], jp, jm);
                    qm[r][2 * R] = v;
                    fin_m &= !kmid || isfinite(v);
                }
            }
        }
        if (t >= 4 * R) {
            const int o = i0 - 4 * R + t;
            const int sc = (t - R) % (R + 1);
#pragma unroll
            for (int r = 0; r < RJ; ++r) {
                const int jj = ty * RJ + r;
                if (jj >= 2 * R && jj < WY - 2 * R && j0 + jj - 2 * R < b.n1) {
                    double jp[R], jm[R];
                    rows_around<RJ, BY>(qm, s_mid[sc], r, ty, kk, jp, jm);
                    const double v = two_point(cf, qm[r], jp, jm);
                    if (kout) {
                        out[(long)(b.lo0 + o) * s0 + (long)(b.lo1 + j0 + jj - 2 * R) * s1 +
                            b.lo2 + k0 + kk - 2 * R] = v;
                        fin_o &= isfinite(v);
                    }
                }
            }
        }
#pragma unroll
        for (int r = 0; r < RJ; ++r)
#pragma unroll
            for (int m = 0; m < 2 * R; ++m) qi[r][m] = qi[r][m + 1];
    }
    if (!fin_m) atomicMin(bad, step);
    else if (!fin_o) atomicMin(bad, step + 1);
}

// The host's launch shape (stencil/src/device.rs, `TWO_STEP`): rows a
// thread and rows of threads.
#define TWO_RJ 4
#define TWO_BY 8
#if R == 1
extern "C" __global__ void __launch_bounds__(32 * TWO_BY)
    fd_two(const double* __restrict__ u, double* __restrict__ out, const Coef cf, const Box3 b,
           long s0, long s1, int chunk, int step, int* __restrict__ bad) {
    fd_two_at<TWO_RJ, TWO_BY>(u, out, cf, b, s0, s1, chunk, step, bad);
}
#endif

// Stand-alone timing of the stencil crate's device kernels and candidate variants on one
// device, with nvcc (not part of the build; see NOTES.md beside this file).
//
//   nvcc -O3 -arch=sm_90 -fmad=false -DRADIUS=1 -o fd_tune1 fd_tune.cu
//   ./fd_tune1 512
//
// Every variant is checked bitwise against `fd_sweep` (the production
// kernel) on random data (on the device, every owned cell, output poisoned
// first); times are medians of event-timed launches.
//
//   ./fd_tune1 512 q   references, fd_pairs shapes and the candidates only
//   ./fd_tune1 512 p   one launch of each kernel of interest (for ncu)
//   ./fd_tune1 512 w   fd_pairs in blocks of up to 1024 threads (third round)
//   ./fd_tune1 512 t   two Euler steps a pass, one rank periodic (fourth round)
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cstring>
#include <string>
#include <cuda_runtime.h>

#ifndef GHOST
#define GHOST RADIUS
#endif
#include "../../halo/kernels/region.cuh"
#include "../kernels/star.cu"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1);} } while (0)

// Axis-0 terms only (the register queue): the floor of the marching loop.
extern "C" __global__ void __launch_bounds__(256)
fd_axis0(const double* __restrict__ u, double* __restrict__ out, const Coef cf, const Box3 b,
         long s0, long s1, int chunk) {
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    const int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (k >= b.n2 || j >= b.n1) return;
    const int i0 = blockIdx.z * chunk;
    const int i1 = min(i0 + chunk, b.n0);
    long q = (long)(b.lo0 + i0) * s0 + (long)(b.lo1 + j) * s1 + b.lo2 + k;
    double x[2 * R + 1];
#pragma unroll
    for (int m = 0; m < 2 * R; ++m) x[m] = u[q + (m - R) * s0];
#pragma unroll 4
    for (int i = i0; i < i1; ++i, q += s0) {
        x[2 * R] = u[q + R * s0];
        double v = cf.c * x[R];
#pragma unroll
        for (int m = 1; m <= R; ++m) v += cf.w[0][m - 1] * (x[R + m] + x[R - m]);
        out[q] = v;
#pragma unroll
        for (int m = 0; m < 2 * R; ++m) x[m] = x[m + 1];
    }
}

// J rows (axis 1) per thread, one warp across axis 2: the axis-0 queue of
// each row in registers, the axis-1 neighbours from the thread's own rows
// plus 2R halo rows, the axis-2 neighbours by warp shuffles (edge lanes
// load). Same operands in the same order as fd_sweep.
template <int J>
__global__ void __launch_bounds__(256)
fd_jreg(const double* __restrict__ u, double* __restrict__ out, const Coef cf, const Box3 b,
        long s0, long s1, int chunk, int step, int* __restrict__ bad) {
    const int lane = threadIdx.x;  // blockDim.x == 32
    const int k = blockIdx.x * 32 + lane;
    const int j0 = (blockIdx.y * blockDim.y + threadIdx.y) * J;
    if (j0 >= b.n1) return;  // uniform over the warp
    const int i0 = blockIdx.z * chunk;
    const int i1 = min(i0 + chunk, b.n0);
    if (i0 >= i1) return;
    // Lanes past the region keep loading (their values feed the shuffles)
    // but never past the ghosts; rows past the region likewise.
    const int kk = min(k, b.n2 - 1 + R);
    const bool kin = k < b.n2;
    long q = (long)(b.lo0 + i0) * s0 + (long)(b.lo1 + j0) * s1 + b.lo2 + kk;
    int rowlim = b.n1 - 1 + R - j0;  // last row offset that exists
    double x[J][2 * R + 1];
#pragma unroll
    for (int t = 0; t < J; ++t) {
        const int tt = min(t, rowlim);
#pragma unroll
        for (int m = 0; m < 2 * R; ++m) x[t][m] = u[q + tt * s1 + (m - R) * s0];
    }
    bool finite = true;
    for (int i = i0; i < i1; ++i, q += s0) {
        double h[2 * R];  // rows -R..-1 and J..J+R-1 of plane i
#pragma unroll
        for (int m = 0; m < R; ++m) h[m] = u[q + (m - R) * s1];
#pragma unroll
        for (int m = 0; m < R; ++m) h[R + m] = u[q + min(J + m, rowlim) * s1];
#pragma unroll
        for (int t = 0; t < J; ++t) x[t][2 * R] = u[q + min(t, rowlim) * s1 + R * s0];
#pragma unroll
        for (int t = 0; t < J; ++t) {
            double v = cf.c * x[t][R];
#pragma unroll
            for (int m = 1; m <= R; ++m) v += cf.w[0][m - 1] * (x[t][R + m] + x[t][R - m]);
#pragma unroll
            for (int m = 1; m <= R; ++m) {
                const double up = (t + m < J) ? x[(t + m) % J][R] : h[R + t + m - J];
                const double dn = (t - m >= 0) ? x[(t - m + J) % J][R] : h[R + t - m];
                v += cf.w[1][m - 1] * (up + dn);
            }
            const double c0 = x[t][R];
            const long qt = q + min(t, rowlim) * s1;
#pragma unroll
            for (int m = 1; m <= R; ++m) {
                double rt = __shfl_down_sync(0xffffffffu, c0, m);
                double lf = __shfl_up_sync(0xffffffffu, c0, m);
                if (kin && lane + m > 31) rt = u[qt + m];
                if (kin && lane < m) lf = u[qt - m];
                v += cf.w[2][m - 1] * (rt + lf);
            }
            if (kin && t <= b.n1 - 1 - j0) {
                out[qt] = v;
                finite &= isfinite(v);
            }
        }
#pragma unroll
        for (int t = 0; t < J; ++t)
#pragma unroll
            for (int m = 0; m < 2 * R; ++m) x[t][m] = x[t][m + 1];
    }
    if (!finite) atomicMin(bad, step);
}


// fd_sweep with the block index remapped so that the axis-0 chunks of one
// (j, k) tile are consecutive blocks: a chunk's 2R boundary planes, read by
// its neighbour chunk too, are then still in L2. Grid: gz * gx * gy blocks.
extern "C" __global__ void __launch_bounds__(256)
fd_zf(const double* __restrict__ u, double* __restrict__ out, const Coef cf, const Box3 b,
      long s0, long s1, int chunk, int step, int* __restrict__ bad, int gz, int gx, int axis0_only) {
    const int id = blockIdx.x;
    const int bz = id % gz, rest = id / gz;
    const int bx = rest % gx, by = rest / gx;
    const int k = bx * blockDim.x + threadIdx.x;
    const int j = by * blockDim.y + threadIdx.y;
    if (k >= b.n2 || j >= b.n1) return;
    const int i0 = bz * chunk;
    const int i1 = min(i0 + chunk, b.n0);
    if (i0 >= i1) return;
    long q = (long)(b.lo0 + i0) * s0 + (long)(b.lo1 + j) * s1 + b.lo2 + k;
    double x[2 * R + 1];
#pragma unroll
    for (int m = 0; m < 2 * R; ++m) x[m] = u[q + (m - R) * s0];
    bool finite = true;
#pragma unroll 4
    for (int i = i0; i < i1; ++i, q += s0) {
        x[2 * R] = u[q + R * s0];
        double v = cf.c * x[R];
#pragma unroll
        for (int m = 1; m <= R; ++m) v += cf.w[0][m - 1] * (x[R + m] + x[R - m]);
        if (!axis0_only) {
#pragma unroll
        for (int m = 1; m <= R; ++m) v += cf.w[1][m - 1] * (u[q + m * s1] + u[q - m * s1]);
#pragma unroll
        for (int m = 1; m <= R; ++m) v += cf.w[2][m - 1] * (u[q + m] + u[q - m]);
        }
        out[q] = v;
        finite &= isfinite(v);
#pragma unroll
        for (int m = 0; m < 2 * R; ++m) x[m] = x[m + 1];
    }
    if (!finite) atomicMin(bad, step);
}


// A copy with the marching structure (no neighbours): out = u on the region.
extern "C" __global__ void __launch_bounds__(256)
march_copy(const double* __restrict__ u, double* __restrict__ out, const Box3 b, long s0, long s1, int chunk) {
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    const int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (k >= b.n2 || j >= b.n1) return;
    const int i0 = blockIdx.z * chunk;
    const int i1 = min(i0 + chunk, b.n0);
    long q = (long)(b.lo0 + i0) * s0 + (long)(b.lo1 + j) * s1 + b.lo2 + k;
#pragma unroll 4
    for (int i = i0; i < i1; ++i, q += s0) out[q] = u[q];
}


// The six periodic face copies of one rank in one launch, no divisions:
// blockIdx.z = 2 * axis + side; each face walked as a 2D array of rows along
// its fastest axis (axis 2 faces: rows of R cells, one thread each).
extern "C" __global__ void copy_faces(double* f, int n0, int n1, int n2, int g, int r, long s0, long s1) {
    const int face = blockIdx.z, a = face >> 1, hi = face & 1;
    // destination ghost start and source start along the face's axis
    const int na = a == 0 ? n0 : (a == 1 ? n1 : n2);
    const int dst = hi ? g + na : g - r;
    const int src = hi ? g : g + na - r;
    if (a == 2) {
        // rows (i, j), r cells each
        for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < n1; j += gridDim.x * blockDim.x)
            for (int i = blockIdx.y * blockDim.y + threadIdx.y; i < n0; i += gridDim.y * blockDim.y) {
                long base = (long)(g + i) * s0 + (long)(g + j) * s1;
                for (int c = 0; c < r; ++c) f[base + dst + c] = f[base + src + c];
            }
    } else {
        // a == 0: rows (d, j) over k; a == 1: rows (i, d) over k
        const int m = a == 0 ? r * n1 : n0 * r;  // rows
        for (int row = blockIdx.y * blockDim.y + threadIdx.y; row < m; row += gridDim.y * blockDim.y) {
            int x0, x1;
            if (a == 0) { x0 = row / n1; x1 = row - x0 * n1; } else { x0 = row / r; x1 = row - x0 * r; }
            long sb, db;
            if (a == 0) { sb = (long)(src + x0) * s0 + (long)(g + x1) * s1; db = (long)(dst + x0) * s0 + (long)(g + x1) * s1; }
            else { sb = (long)(g + x0) * s0 + (long)(src + x1) * s1; db = (long)(g + x0) * s0 + (long)(dst + x1) * s1; }
            for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n2; k += gridDim.x * blockDim.x)
                f[db + g + k] = f[sb + g + k];
        }
    }
}

// 32-bit-index variant of halo_copy_many (6 faces).
struct Copies6 { Box3 src[26]; Box3 dst[26]; long start[27]; int count; };
__device__ __forceinline__ int cell32(const Box3 b, int q, int s0, int s1) {
    int k = q % b.n2; int r = q / b.n2; int j = r % b.n1; int i = r / b.n1;
    return (b.lo0 + i) * s0 + (b.lo1 + j) * s1 + b.lo2 + k;
}
extern "C" __global__ void copy_many64(double* field, const Copies6 c, long s0, long s1) {
    long n = c.start[c.count];
    for (long t = blockIdx.x * (long)blockDim.x + threadIdx.x; t < n; t += (long)gridDim.x * blockDim.x) {
        int p = 0; while (t >= c.start[p + 1]) ++p;
        long q = t - c.start[p];
        field[cell(c.dst[p], q, s0, s1)] = field[cell(c.src[p], q, s0, s1)];
    }
}
extern "C" __global__ void copy_many32(double* field, const Copies6 c, int s0, int s1) {
    int n = (int)c.start[c.count];
    for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < n; t += gridDim.x * blockDim.x) {
        int p = 0; while (t >= c.start[p + 1]) ++p;
        int q = t - (int)c.start[p];
        field[cell32(c.dst[p], q, s0, s1)] = field[cell32(c.src[p], q, s0, s1)];
    }
}

// ---------------------------------------------------------------------------
// Candidates (2026-12-02, second round): the fd_pairs arithmetic (two cells a
// thread along axis 2, 16-byte accesses, each cell's operands and order as
// fd_sweep's) with explicit software pipelining.

// Store of a pair (or its half inside the region), optionally evict-first.
template <bool CS>
__device__ __forceinline__ void store_pair(double* __restrict__ out, long q, double v0, double v1,
                                           bool w0, bool w1) {
    if (w0 && w1) {
        if (CS) __stcs(reinterpret_cast<double2*>(out + q), make_double2(v0, v1));
        else *reinterpret_cast<double2*>(out + q) = make_double2(v0, v1);
    } else if (w0) {
        out[q] = v0;
    } else {
        out[q + 1] = v1;
    }
}

// fd_pf: fd_pairs with the axis-0 queue loaded D planes ahead (D - 1 loads
// of the queue in flight per thread while a plane is computed) and the
// in-plane neighbours of plane i + 1 loaded while plane i is computed, so
// no load is consumed in the iteration that issues it. Any block shape
// (blockDim.x pairs along axis 2, blockDim.y rows).
// MINB > 1 caps the registers (__launch_bounds__(256, MINB)). Note that
// MINB = 1 is not the same as no minimum: with (512, 1) ptxas gave fd_pf 56
// registers, with a plain (512) 50; likewise fd_tile 76 against 56.
template <int D, bool CS, int MINB = 1>
__global__ void __launch_bounds__(MINB > 1 ? 256 : 512, MINB)
fd_pf(const double* __restrict__ u, double* __restrict__ out, const Coef cf, const Box3 b,
      long s0, long s1, int chunk, int step, int* __restrict__ bad) {
    const int P = (b.lo2 & ~1) + 2 * (blockIdx.x * blockDim.x + threadIdx.x);
    const int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (P >= b.lo2 + b.n2 || j >= b.n1) return;
    const int i0 = blockIdx.z * chunk;
    const int i1 = min(i0 + chunk, b.n0);
    if (i0 >= i1) return;
    const bool w0 = P >= b.lo2, w1 = P + 1 < b.lo2 + b.n2;
    long q = (long)(b.lo0 + i0) * s0 + (long)(b.lo1 + j) * s1 + P;
    // x[m] = plane i - R + m, m = 0 .. 2R + D - 2 (entries past 2R: in
    // flight); plane i + R + D - 1 is loaded during iteration i (D >= 2).
    double2 x[2 * R + D - 1];
#pragma unroll
    for (int m = 0; m < 2 * R + D - 1; ++m)
        if (i0 - R + m < i1 + R) x[m] = *reinterpret_cast<const double2*>(u + q + (m - R) * s0);
    // in-plane neighbours of the current plane: rows j +- m, cells P - m, P + 1 + m
    double2 yp[R], ym[R];
    double kl[R], kr[R];
#pragma unroll
    for (int m = 1; m <= R; ++m) {
        yp[m - 1] = *reinterpret_cast<const double2*>(u + q + m * s1);
        ym[m - 1] = *reinterpret_cast<const double2*>(u + q - m * s1);
        kl[m - 1] = (m < R || w0) ? u[q - m] : 0.0;
        kr[m - 1] = (m < R || w1) ? u[q + 1 + m] : 0.0;
    }
    bool finite = true;
    for (int i = i0; i < i1; ++i, q += s0) {
        double2 xn;
        if (i + D - 1 < i1) xn = *reinterpret_cast<const double2*>(u + q + (R + D - 1) * s0);
        double2 ypn[R], ymn[R];
        double kln[R], krn[R];
        if (i + 1 < i1) {
            const long qn = q + s0;
#pragma unroll
            for (int m = 1; m <= R; ++m) {
                ypn[m - 1] = *reinterpret_cast<const double2*>(u + qn + m * s1);
                ymn[m - 1] = *reinterpret_cast<const double2*>(u + qn - m * s1);
                kln[m - 1] = (m < R || w0) ? u[qn - m] : 0.0;
                krn[m - 1] = (m < R || w1) ? u[qn + 1 + m] : 0.0;
            }
        }
        double kk[2 * R + 2];
        kk[R] = x[R].x;
        kk[R + 1] = x[R].y;
#pragma unroll
        for (int m = 1; m <= R; ++m) {
            kk[R - m] = kl[m - 1];
            kk[R + 1 + m] = kr[m - 1];
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
        store_pair<CS>(out, q, v0, v1, w0, w1);
        finite &= (!w0 || isfinite(v0)) && (!w1 || isfinite(v1));
#pragma unroll
        for (int m = 0; m < 2 * R + D - 2; ++m) x[m] = x[m + 1];
        x[2 * R + D - 2] = xn;
#pragma unroll
        for (int m = 0; m < R; ++m) {
            yp[m] = ypn[m];
            ym[m] = ymn[m];
            kl[m] = kln[m];
            kr[m] = krn[m];
        }
    }
    if (!finite) atomicMin(bad, step);
}

// fd_tile: 2.5D blocking. A block of BX x BY threads (BX pairs = 2 BX cells
// along axis 2, BY rows along axis 1) marches along axis 0; each plane of
// its tile, widened by R rows and R cells, is staged in shared memory (two
// buffers, one barrier a plane) from values already in registers: a
// thread's own pair comes from its axis-0 queue (loaded 2 planes ahead), so
// each interior value is read from memory once per chunk; only the halo
// rows and columns are loaded besides (one plane ahead). Rows are read
// once per tile per plane instead of once per block row pair, so the
// axis-1 halo costs 2R / BY of the plane instead of 2R / 2.
// Threads whose pair lies past the region, or whose row lies in the ghost
// rows after it, still take part in the barriers (ghost rows within R are
// staged, since the last rows need them).
template <int BX, int BY, bool CS, int MINB = 1>
__global__ void __launch_bounds__(BX * BY, MINB)
fd_tile(const double* __restrict__ u, double* __restrict__ out, const Coef cf, const Box3 b,
        long s0, long s1, int chunk, int step, int* __restrict__ bad) {
    constexpr int H = (R + 1) & ~1;  // left margin, even so pairs stay 16-byte aligned
    constexpr int W = 2 * BX + 2 * H;
    constexpr int ROWS = BY + 2 * R;
    __shared__ __align__(16) double t[2][ROWS][W];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int end = b.lo2 + b.n2;
    const int P = (b.lo2 & ~1) + 2 * (blockIdx.x * BX + tx);
    const int j0 = blockIdx.y * BY, j = j0 + ty;
    const int i0 = blockIdx.z * chunk;
    const int i1 = min(i0 + chunk, b.n0);
    if (i0 >= i1) return;  // the whole block
    const bool act = P < end;
    const bool own = act && j < b.n1 + R;  // stages its pair
    const bool outp = act && j < b.n1;     // computes and stores
    const bool w0 = P >= b.lo2, w1 = P + 1 < end;
    // the halo row this thread stages (slot in the tile), if any
    int hslot = -1, hrow = 0;
    if (act && ty < R) {
        hslot = ty;
        hrow = j0 - R + ty;
    } else if (act && ty >= BY - R && j0 + BY + ty - (BY - R) < b.n1 + R) {
        hslot = BY + R + ty - (BY - R);
        hrow = j0 + BY + ty - (BY - R);
    }
    const bool left = outp && tx == 0;
    const bool right = outp && w1 && (tx == BX - 1 || P + 2 >= end);
    const long rowq = (long)(b.lo1 + j) * s1 + P;
    const long hq = (long)(b.lo1 + hrow) * s1 + P;
    long p0 = (long)(b.lo0 + i0) * s0;  // plane offset
    double2 x[2 * R + 2];
    if (own) {
#pragma unroll
        for (int m = 0; m < 2 * R + 2; ++m)
            if (i0 - R + m < i1 + R) x[m] = *reinterpret_cast<const double2*>(u + p0 + rowq + (m - R) * s0);
    }
    // the halo values of one plane this thread stages: its halo row's pair,
    // R cells left of its pair (tx == 0), R cells right of it (last pair)
    struct Halo { double2 r; double l[R], h[R]; };
    auto load_halo = [&](long pl) {
        Halo e;
        if (hslot >= 0) e.r = *reinterpret_cast<const double2*>(u + pl + hq);
        if (left) {
#pragma unroll
            for (int m = 1; m <= R; ++m) e.l[m - 1] = (P - m >= b.lo2 - R) ? u[pl + rowq - m] : 0.0;
        }
        if (right) {
#pragma unroll
            for (int m = 1; m <= R; ++m) e.h[m - 1] = u[pl + rowq + 1 + m];
        }
        return e;
    };
    Halo hc = load_halo(p0);
    const int c0 = H + 2 * tx;
    bool finite = true;
    for (int i = i0; i < i1; ++i, p0 += s0) {
        const int buf = (i - i0) & 1;
        double2 xn;
        if (own && i + 2 < i1) xn = *reinterpret_cast<const double2*>(u + p0 + rowq + (R + 2) * s0);
        Halo hn;
        if (i + 1 < i1) hn = load_halo(p0 + s0);
        if (own) *reinterpret_cast<double2*>(&t[buf][ty + R][c0]) = x[R];
        if (hslot >= 0) *reinterpret_cast<double2*>(&t[buf][hslot][c0]) = hc.r;
        if (left) {
#pragma unroll
            for (int m = 1; m <= R; ++m) t[buf][ty + R][c0 - m] = hc.l[m - 1];
        }
        if (right) {
#pragma unroll
            for (int m = 1; m <= R; ++m) t[buf][ty + R][c0 + 1 + m] = hc.h[m - 1];
        }
        __syncthreads();
        if (outp) {
            double v0 = cf.c * x[R].x, v1 = cf.c * x[R].y;
#pragma unroll
            for (int m = 1; m <= R; ++m) {
                v0 += cf.w[0][m - 1] * (x[R + m].x + x[R - m].x);
                v1 += cf.w[0][m - 1] * (x[R + m].y + x[R - m].y);
            }
#pragma unroll
            for (int m = 1; m <= R; ++m) {
                const double2 a = *reinterpret_cast<const double2*>(&t[buf][ty + R + m][c0]);
                const double2 c = *reinterpret_cast<const double2*>(&t[buf][ty + R - m][c0]);
                v0 += cf.w[1][m - 1] * (a.x + c.x);
                v1 += cf.w[1][m - 1] * (a.y + c.y);
            }
            // kk[R + d] = u(P + d), d from -R to R + 1
            double kk[2 * R + 2];
            kk[R] = x[R].x;
            kk[R + 1] = x[R].y;
#pragma unroll
            for (int m = 1; m <= R; ++m) {
                kk[R - m] = t[buf][ty + R][c0 - m];
                kk[R + 1 + m] = t[buf][ty + R][c0 + 1 + m];
            }
#pragma unroll
            for (int m = 1; m <= R; ++m) {
                v0 += cf.w[2][m - 1] * (kk[R + m] + kk[R - m]);
                v1 += cf.w[2][m - 1] * (kk[R + 1 + m] + kk[R + 1 - m]);
            }
            store_pair<CS>(out, p0 + rowq, v0, v1, w0, w1);
            finite &= (!w0 || isfinite(v0)) && (!w1 || isfinite(v1));
        }
#pragma unroll
        for (int m = 0; m < 2 * R + 1; ++m) x[m] = x[m + 1];
        x[2 * R + 1] = xn;
        hc = hn;
    }
    if (!finite) atomicMin(bad, step);
}

#ifndef NO_RING
// Asynchronous copies (sm_80+): 16 bytes (L2 only) or 8 bytes into shared memory.
__device__ __forceinline__ void cpa16(void* s, const void* g) {
    const unsigned a = (unsigned)__cvta_generic_to_shared(s);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(a), "l"(g) : "memory");
}
__device__ __forceinline__ void cpa8(void* s, const void* g) {
    const unsigned a = (unsigned)__cvta_generic_to_shared(s);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(a), "l"(g) : "memory");
}
__device__ __forceinline__ void cpa_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void cpa_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// fd_ring: 2.5D blocking with every operand from shared memory. A block of
// BX x BY threads (2 BX cells along axis 2, BY rows) keeps a ring of
// NB = 2R + S + 1 planes of its tile (widened by R rows and R cells) in
// shared memory, filled by cp.async S planes ahead of the planes in use,
// so the bytes in flight cost no registers; one barrier a plane. A
// thread copies its own pair (16 bytes), its halo row's pair if any, and
// at the tile's sides the R cells beyond it (8 bytes each). Same operands
// in the same order as fd_sweep (the axis-0 neighbours come from the
// other planes of the ring instead of a register queue).
template <int BX, int BY, int S, bool CS, int MINB>
__global__ void __launch_bounds__(BX * BY, MINB)
fd_ring(const double* __restrict__ u, double* __restrict__ out, const Coef cf, const Box3 b,
        long s0, long s1, int chunk, int step, int* __restrict__ bad) {
    constexpr int H = (R + 1) & ~1;
    constexpr int W = 2 * BX + 2 * H;
    constexpr int ROWS = BY + 2 * R;
    constexpr int NB = 2 * R + S + 1;
    __shared__ __align__(16) double t[NB][ROWS][W];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int end = b.lo2 + b.n2;
    const int P = (b.lo2 & ~1) + 2 * (blockIdx.x * BX + tx);
    const int j0 = blockIdx.y * BY, j = j0 + ty;
    const int i0 = blockIdx.z * chunk;
    const int i1 = min(i0 + chunk, b.n0);
    if (i0 >= i1) return;  // the whole block
    const bool act = P < end;
    const bool own = act && j < b.n1 + R;
    const bool outp = act && j < b.n1;
    const bool w0 = P >= b.lo2, w1 = P + 1 < end;
    int hslot = -1, hrow = 0;
    if (act && ty < R) {
        hslot = ty;
        hrow = j0 - R + ty;
    } else if (act && ty >= BY - R && j0 + BY + ty - (BY - R) < b.n1 + R) {
        hslot = BY + R + ty - (BY - R);
        hrow = j0 + BY + ty - (BY - R);
    }
    const bool left = outp && tx == 0;
    const bool right = outp && w1 && (tx == BX - 1 || P + 2 >= end);
    const long rowq = (long)(b.lo1 + j) * s1 + P;
    const double* ur = u + rowq;                           // own row, plane 0
    const double* uh = u + (long)(b.lo1 + hrow) * s1 + P;  // halo row, plane 0
    const int c0 = H + 2 * tx;
    // plane p (region index) into slot sl; an empty group past the planes used
    auto issue = [&](int p, int sl) {
        if (p < i1 + R) {
            const long pl = (long)(b.lo0 + p) * s0;
            if (own) cpa16(&t[sl][ty + R][c0], ur + pl);
            if (hslot >= 0) cpa16(&t[sl][hslot][c0], uh + pl);
            if (left) {
#pragma unroll
                for (int m = 1; m <= R; ++m)
                    if (P - m >= b.lo2 - R) cpa8(&t[sl][ty + R][c0 - m], ur + pl - m);
            }
            if (right) {
#pragma unroll
                for (int m = 1; m <= R; ++m) cpa8(&t[sl][ty + R][c0 + 1 + m], ur + pl + 1 + m);
            }
        }
        cpa_commit();
    };
    // planes i0 - R .. i0 + R + S - 1 into slots 0 .. 2R + S - 1
#pragma unroll
    for (int m = 0; m < 2 * R + S; ++m) issue(i0 - R + m, m);
    int sc = R;  // slot of plane i
    bool finite = true;
    for (int i = i0; i < i1; ++i) {
        cpa_wait<S - 1>();  // plane i + R has landed (this thread's part)
        __syncthreads();    // everyone's part; everyone is done with plane i - R - 1
        {
            int sl = sc + R + S;
            if (sl >= NB) sl -= NB;
            issue(i + R + S, sl);
        }
        if (outp) {
            const double2 x0 = *reinterpret_cast<const double2*>(&t[sc][ty + R][c0]);
            double v0 = cf.c * x0.x, v1 = cf.c * x0.y;
#pragma unroll
            for (int m = 1; m <= R; ++m) {
                int sp = sc + m, sm = sc - m;
                if (sp >= NB) sp -= NB;
                if (sm < 0) sm += NB;
                const double2 a = *reinterpret_cast<const double2*>(&t[sp][ty + R][c0]);
                const double2 c = *reinterpret_cast<const double2*>(&t[sm][ty + R][c0]);
                v0 += cf.w[0][m - 1] * (a.x + c.x);
                v1 += cf.w[0][m - 1] * (a.y + c.y);
            }
#pragma unroll
            for (int m = 1; m <= R; ++m) {
                const double2 a = *reinterpret_cast<const double2*>(&t[sc][ty + R + m][c0]);
                const double2 c = *reinterpret_cast<const double2*>(&t[sc][ty + R - m][c0]);
                v0 += cf.w[1][m - 1] * (a.x + c.x);
                v1 += cf.w[1][m - 1] * (a.y + c.y);
            }
            double kk[2 * R + 2];
            kk[R] = x0.x;
            kk[R + 1] = x0.y;
#pragma unroll
            for (int m = 1; m <= R; ++m) {
                kk[R - m] = t[sc][ty + R][c0 - m];
                kk[R + 1 + m] = t[sc][ty + R][c0 + 1 + m];
            }
#pragma unroll
            for (int m = 1; m <= R; ++m) {
                v0 += cf.w[2][m - 1] * (kk[R + m] + kk[R - m]);
                v1 += cf.w[2][m - 1] * (kk[R + 1 + m] + kk[R + 1 - m]);
            }
            const long q = (long)(b.lo0 + i) * s0;
            store_pair<CS>(out, rowq + q, v0, v1, w0, w1);
            finite &= (!w0 || isfinite(v0)) && (!w1 || isfinite(v1));
        }
        if (++sc == NB) sc = 0;
    }
    cpa_wait<0>();
    if (!finite) atomicMin(bad, step);
}
#endif

// Bitwise comparison of two fields over the region on the device: counts
// the cells whose 8 bytes differ.
__global__ void cmp_bits(const double* __restrict__ a, const double* __restrict__ r, Box3 b, long s0,
                         long s1, unsigned long long* __restrict__ nd) {
    const long n = (long)b.n0 * b.n1 * b.n2;
    unsigned long long c = 0;
    for (long t = blockIdx.x * (long)blockDim.x + threadIdx.x; t < n; t += (long)gridDim.x * blockDim.x) {
        const long q = cell(b, t, s0, s1);
        c += __double_as_longlong(a[q]) != __double_as_longlong(r[q]);
    }
    if (c) atomicAdd(nd, c);
}


// Third round (2026-12-03): heat3d's fd_pairs body (both the ghost-reading
// and the periodic-reading variant) under launch bounds up to 1024 threads,
// for blocks wider than 256 threads.
template <int B, bool W, int MINB = 1>
__global__ void __launch_bounds__(B, MINB)
    fd_pairs_b(const double* __restrict__ u, double* __restrict__ out, const Coef cf, const Box3 b,
               long s0, long s1, int chunk, int step, int* __restrict__ bad) {
    fd_pairs_at<W>(u, out, cf, b, s0, s1, chunk, step, bad, blockIdx.x, blockIdx.y, blockIdx.z);
}

// Fourth round (2026-12-03): heat3d's two-step pass (`fd_two_at`) in other
// shapes and launch bounds.
template <int RJ, int BY, int MINB = 1>
__global__ void __launch_bounds__(32 * BY, MINB)
    fd_two_b(const double* __restrict__ u, double* __restrict__ out, const Coef cf, const Box3 b,
             long s0, long s1, int chunk, int step, int* __restrict__ bad) {
    fd_two_at<RJ, BY>(u, out, cf, b, s0, s1, chunk, step, bad);
}

#ifndef NO_RING
// The two-step pass with its input planes fetched by cp.async D planes
// ahead into a ring of S = D + R + 1 planes of the whole extended tile in
// shared memory (the bytes in flight cost no registers); a thread reads its
// own rows' values and its neighbour rows' from the ring. Otherwise as
// fd_two_at (same operands, same order).
template <int RJ, int BY, int D, int MINB = 1>
__global__ void __launch_bounds__(32 * BY, MINB)
    fd_two_ring(const double* __restrict__ u, double* __restrict__ out, const Coef cf,
                const Box3 b, long s0, long s1, int chunk, int step, int* __restrict__ bad) {
    static_assert(RJ >= 2 * R && D >= 1, "shape");
    constexpr int WY = RJ * BY, TK = 32 - 4 * R, TJ = WY - 4 * R, S = D + R + 1;
    __shared__ double s_pl[S][WY][32];
    __shared__ double s_mid[R + 1][BY][2 * R][32];
    const int kk = threadIdx.x, ty = threadIdx.y;
    const int k0 = blockIdx.x * TK, j0 = blockIdx.y * TJ, i0 = blockIdx.z * chunk;
    const int i1 = min(i0 + chunk, b.n0);
    if (i0 >= i1) return;
    const int kg = pmod(k0 - 2 * R + kk, b.n2);
    long roff[RJ];
#pragma unroll
    for (int r = 0; r < RJ; ++r)
        roff[r] = (long)(b.lo1 + pmod(j0 - 2 * R + ty * RJ + r, b.n1)) * s1 + b.lo2 + kg;
    const int T = (i1 - i0) + 4 * R;
    int pp = pmod(i0 - 2 * R, b.n0);
    auto issue = [&](int t) {
        if (t < T) {
            const long base = (long)(b.lo0 + pp) * s0;
#pragma unroll
            for (int r = 0; r < RJ; ++r) cpa8(&s_pl[t % S][ty * RJ + r][kk], u + base + roff[r]);
            pp = pp + 1 == b.n0 ? 0 : pp + 1;
        }
        cpa_commit();
    };
#pragma unroll
    for (int d = 0; d < D; ++d) issue(d);
    double qi[RJ][2 * R + 1], qm[RJ][2 * R + 1];
    bool fin_m = true, fin_o = true;
    const bool kmid = kk >= R && kk < 32 - R;
    const bool kout = kk >= 2 * R && kk < 2 * R + TK && k0 + kk - 2 * R < b.n2;
#pragma unroll 1
    for (int t = 0; t < T; ++t) {
        cpa_wait<D - 1>();
        if (t > 2 * R) {
            const int sm = (t - 1) % (R + 1);
#pragma unroll
            for (int r = 0; r < R; ++r) {
                s_mid[sm][ty][r][kk] = qm[r][2 * R];
                s_mid[sm][ty][R + r][kk] = qm[RJ - R + r][2 * R];
            }
        }
        __syncthreads();
        issue(t + D);
        const int sn = t % S;
#pragma unroll
        for (int r = 0; r < RJ; ++r) qi[r][2 * R] = s_pl[sn][ty * RJ + r][kk];
        if (t >= 2 * R) {
            const int sc = (t - R) % S;
#pragma unroll
            for (int r = 0; r < RJ; ++r)
#pragma unroll
                for (int m = 0; m < 2 * R; ++m) qm[r][m] = qm[r][m + 1];
#pragma unroll
            for (int r = 0; r < RJ; ++r) {
                const int jj = ty * RJ + r;
                if (jj >= R && jj < WY - R) {
                    double jp[R], jm[R];
#pragma unroll
                    for (int m = 1; m <= R; ++m) {
                        jp[m - 1] = r + m < RJ ? qi[r + m][R] : s_pl[sc][jj + m][kk];
                        jm[m - 1] = r >= m ? qi[r - m][R] : s_pl[sc][jj - m][kk];
                    }
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
                        out[(long)(b.lo0 + o) * s0 + (long)(b.lo1 + j0 + jj - 2 * R) * s1 + b.lo2 +
                            k0 + kk - 2 * R] = v;
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
    cpa_wait<0>();
    if (!fin_m) atomicMin(bad, step);
    else if (!fin_o) atomicMin(bad, step + 1);
}
#endif

static float median(std::vector<float> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

template <class F> static float timeit(F f, int reps = 30) {
    cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
    for (int w = 0; w < 3; ++w) f();
    std::vector<float> t;
    for (int r = 0; r < reps; ++r) {
        CK(cudaEventRecord(a)); f(); CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
        float ms; CK(cudaEventElapsedTime(&ms, a, b)); t.push_back(ms);
    }
    CK(cudaGetLastError());
    return median(t);
}

int main(int argc, char** argv) {
    const int n = argc > 1 ? atoi(argv[1]) : 256;
    // "quick": the references, fd_pairs and the candidates only.
    const bool quick = argc > 2 && argv[2][0] == 'q';
    const int p = n + 2 * GHOST;
    const long s1 = p, s0 = (long)p * p, len = (long)p * p * p;
    const double cells = (double)n * n * n;
    std::vector<double> h(len);
    unsigned long long st = 88172645463325252ull;
    for (long i = 0; i < len; ++i) { st ^= st << 13; st ^= st >> 7; st ^= st << 17; h[i] = (double)(st >> 11) * 0x1.0p-53 - 0.5; }
    double *u, *o, *ref, *big0, *big1; int* bad; unsigned long long* nd;
    CK(cudaMalloc(&nd, 8));
    CK(cudaMalloc(&u, len * 8)); CK(cudaMalloc(&o, len * 8)); CK(cudaMalloc(&ref, len * 8)); CK(cudaMalloc(&bad, 4));
    CK(cudaMemcpy(u, h.data(), len * 8, cudaMemcpyHostToDevice));
    int mx = 0x7fffffff; CK(cudaMemcpy(bad, &mx, 4, cudaMemcpyHostToDevice));
    const long bigb = 1l << 31;
    CK(cudaMalloc(&big0, bigb)); CK(cudaMalloc(&big1, bigb)); CK(cudaMemset(big0, 1, bigb));
    float tc = timeit([&] { CK(cudaMemcpyAsync(big1, big0, bigb, cudaMemcpyDeviceToDevice)); }, 10);
    const double bw = 2.0 * bigb / (tc * 1e-3);
    float tf = timeit([&] { CK(cudaMemcpyAsync(o, u, len * 8, cudaMemcpyDeviceToDevice)); });
    printf("R=%d n=%d copy 2GiB %.3f ms = %.3f TB/s; copy of the padded field %.4f ms (%.1f%%)\n", R, n, tc,
           bw / 1e12, tf, 100.0 * (2.0 * len * 8 / (tf * 1e-3)) / bw);
    Coef cf; cf.c = -6.0 * 0.1 + 1.0;
    for (int d = 0; d < 3; ++d) for (int m = 0; m < 10; ++m) cf.w[d][m] = (m < R) ? 0.1 / (m + 1) : 0.0;
    const int G = GHOST;
    Box3 box{G, G, G, n, n, n};
    const double ideal = 16.0 * cells / bw * 1e3;
    printf("ideal (16 B/cell at copy rate) %.4f ms\n", ideal);
    struct Res { std::string name; float ms; bool check, same; };
    std::vector<Res> results;
    auto report = [&](const char* name, float ms, bool check) {
        bool same = true;
        if (check) {  // every owned cell's bits against fd_sweep's, on the device
            CK(cudaMemset(nd, 0, 8));
            cmp_bits<<<1024, 256>>>(o, ref, box, s0, s1, nd);
            CK(cudaGetLastError());
            unsigned long long hd = 0;
            CK(cudaMemcpy(&hd, nd, 8, cudaMemcpyDeviceToHost));
            same = hd == 0;
            if (!same) printf("  %llu cells differ\n", hd);
        }
        printf("%-34s %8.4f ms  %5.1f%% of copy %s\n", name, ms, 100.0 * ideal / ms, check ? (same ? "bits=" : "BITS DIFFER") : "");
        results.push_back({std::string(name), ms, check, same});
    };
    if (argc > 2 && argv[2][0] == 'p') {  // "prof": one launch each, for ncu
        const int pairs = (G + n - 1) / 2 - G / 2 + 1;
        auto g3 = [&](int bx, int by, int chunk, int cols) { return dim3((cols + bx - 1) / bx, (n + by - 1) / by, (n + chunk - 1) / chunk); };
        march_copy<<<g3(128, 2, 8, n), dim3(128, 2)>>>(u, o, box, s0, s1, 8);
        fd_axis0<<<g3(128, 2, 8, n), dim3(128, 2)>>>(u, o, cf, box, s0, s1, 8);
        fd_sweep<<<g3(128, 2, 8, n), dim3(128, 2)>>>(u, o, cf, box, s0, s1, 8, 1, bad);
        fd_pairs<<<g3(128, 2, 4, pairs), dim3(128, 2)>>>(u, o, cf, box, s0, s1, 4, 1, bad);
        fd_pairs<<<g3(32, 8, 8, pairs), dim3(32, 8)>>>(u, o, cf, box, s0, s1, 8, 1, bad);
        fd_pf<3, false><<<g3(32, 8, 8, pairs), dim3(32, 8)>>>(u, o, cf, box, s0, s1, 8, 1, bad);
        fd_tile<32, 8, false><<<g3(32, 8, 8, pairs), dim3(32, 8)>>>(u, o, cf, box, s0, s1, 8, 1, bad);
#ifndef NO_RING
        CK(cudaFuncSetAttribute(fd_ring<32, 8, 2, false, 1>, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
        fd_ring<32, 8, 2, false, 1><<<g3(32, 8, 16, pairs), dim3(32, 8)>>>(u, o, cf, box, s0, s1, 16, 1, bad);
#endif
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        return 0;
    }
    if (argc > 2 && argv[2][0] == 't') {  // "two": two Euler steps in one pass
        const int pairs = (G + n - 1) / 2 - G / 2 + 1;
        double* mid; CK(cudaMalloc(&mid, len * 8));
        dim3 sg((n + 127) / 128, (n + 1) / 2, (n + 7) / 8);
        fd_sweep_wrap<<<sg, dim3(128, 2)>>>(u, mid, cf, box, s0, s1, 8, 1, bad);
        fd_sweep_wrap<<<sg, dim3(128, 2)>>>(mid, ref, cf, box, s0, s1, 8, 2, bad);
        CK(cudaDeviceSynchronize());
        const double ideal2 = 2 * ideal;  // two steps' bytes
        auto rep2 = [&](const char* name, float ms, bool check) {
            // as report(), with the percentage of two steps' bytes
            bool same = true;
            if (check) {
                CK(cudaMemset(nd, 0, 8));
                cmp_bits<<<1024, 256>>>(o, ref, box, s0, s1, nd);
                CK(cudaGetLastError());
                unsigned long long hd = 0;
                CK(cudaMemcpy(&hd, nd, 8, cudaMemcpyDeviceToHost));
                same = hd == 0;
                if (!same) printf("  %llu cells differ\n", hd);
            }
            printf("%-34s %8.4f ms / 2 steps = %.4f ms a step  %5.1f%% %s\n", name, ms, ms / 2, 100.0 * ideal2 / ms,
                   check ? (same ? "bits=" : "BITS DIFFER") : "");
            results.push_back({std::string(name), ms, check, same});
        };
        {
            dim3 grd((pairs + 31) / 32, (n + 7) / 8, (n + 7) / 8);
            CK(cudaMemset(o, 0xff, len * 8));
            float t = timeit([&] {
                fd_pairs_wrap<<<grd, dim3(32, 8)>>>(u, mid, cf, box, s0, s1, 8, 1, bad);
                fd_pairs_wrap<<<grd, dim3(32, 8)>>>(mid, o, cf, box, s0, s1, 8, 2, bad);
            });
            rep2("fd_pairs_wrap x2 32x8 c8", t, true);
        }
        auto two = [&](auto kern, int RJ, int BY, int chunk, const char* tag) {
            const int TK = 32 - 4 * R, TJ = RJ * BY - 4 * R;
            dim3 grd((n + TK - 1) / TK, (n + TJ - 1) / TJ, (n + chunk - 1) / chunk);
            CK(cudaMemset(o, 0xff, len * 8));
            float t = timeit([&] { kern<<<grd, dim3(32, BY)>>>(u, o, cf, box, s0, s1, chunk, 1, bad); });
            char nm[64]; snprintf(nm, 64, "fd_two%s RJ%d 32x%d c%d", tag, RJ, BY, chunk); rep2(nm, t, true);
        };
#ifndef NO_RING
        for (int chunk : {32, 64}) {
            two(fd_two_ring<4, 8, 2>, 4, 8, chunk, " ring D2");
            two(fd_two_ring<4, 8, 3>, 4, 8, chunk, " ring D3");
            two(fd_two_ring<2, 16, 2>, 2, 16, chunk, " ring D2");
            two(fd_two_ring<2, 16, 2, 2>, 2, 16, chunk, " ring D2 minb2");
            two(fd_two_ring<4, 4, 3>, 4, 4, chunk, " ring D3");
            two(fd_two_ring<4, 4, 6>, 4, 4, chunk, " ring D6");
            two(fd_two_ring<2, 8, 6>, 2, 8, chunk, " ring D6");
        }
#endif
        for (int chunk : {16, 32, 64}) {
            two(fd_two_b<4, 8>, 4, 8, chunk, "");
            two(fd_two_b<4, 9>, 4, 9, chunk, "");
            two(fd_two_b<6, 6>, 6, 6, chunk, "");
            two(fd_two_b<8, 4>, 8, 4, chunk, "");
            two(fd_two_b<4, 8, 3>, 4, 8, chunk, " minb3");
#if R == 1
            two(fd_two_b<2, 16>, 2, 16, chunk, "");
            two(fd_two_b<2, 16, 2>, 2, 16, chunk, " minb2");
            two(fd_two_b<3, 12>, 3, 12, chunk, "");
#endif
        }
        {
            int hb = 0x7fffffff; CK(cudaMemcpy(&hb, bad, 4, cudaMemcpyDeviceToHost));
            printf("bad step %d (none: %d)\n", hb, 0x7fffffff);
        }
        std::vector<Res> r2(results);
        std::stable_sort(r2.begin(), r2.end(), [](const Res& a, const Res& b) { return a.ms < b.ms; });
        printf("--- fastest two-step (R=%d GHOST=%d n=%d) ---\n", R, GHOST, n);
        for (size_t i = 0; i < r2.size() && i < 10; ++i)
            printf("%-34s %8.4f ms a step  %5.1f%% %s\n", r2[i].name.c_str(), r2[i].ms / 2, 100.0 * ideal2 / r2[i].ms,
                   r2[i].check ? (r2[i].same ? "bits=" : "BITS DIFFER") : "");
        CK(cudaDeviceSynchronize());
        return 0;
    }
    if (argc > 2 && argv[2][0] == 'w') {  // "wide": fd_pairs in blocks of up to 1024 threads
        float t = timeit([&] { march_copy<<<dim3((n + 127) / 128, (n + 1) / 2, (n + 7) / 8), dim3(128, 2)>>>(u, o, box, s0, s1, 8); });
        report("march_copy 128x2 c8", t, false);
        const int pairs = (G + n - 1) / 2 - G / 2 + 1;
        auto run = [&](auto kern, const char* tag, int bx, int by, int chunk) {
            dim3 grd((pairs + bx - 1) / bx, (n + by - 1) / by, (n + chunk - 1) / chunk);
            CK(cudaMemset(o, 0xff, len * 8));
            float t = timeit([&] { kern<<<grd, dim3(bx, by)>>>(u, o, cf, box, s0, s1, chunk, 1, bad); });
            char nm[64]; snprintf(nm, 64, "%s %dx%d c%d", tag, bx, by, chunk); report(nm, t, true);
        };
        // the ghost-reading reference, then the periodic reads against the
        // periodic-reading fd_sweep
        {
            int chunk = 8, bx = 128; dim3 blk(bx, 2), grd((n + bx - 1) / bx, (n + 1) / 2, (n + chunk - 1) / chunk);
            fd_sweep<<<grd, blk>>>(u, ref, cf, box, s0, s1, chunk, 1, bad);
        }
        run(fd_pairs_b<256, false>, "fd_pairs", 32, 8, 8);
        for (int chunk : {8, 16}) {
            run(fd_pairs_b<512, false>, "fd_pairs", 32, 16, chunk);
            run(fd_pairs_b<512, false>, "fd_pairs", 64, 8, chunk);
            run(fd_pairs_b<1024, false>, "fd_pairs", 64, 16, chunk);
            run(fd_pairs_b<1024, false>, "fd_pairs", 32, 32, chunk);
            run(fd_pairs_b<512, false>, "fd_pairs", 128, 4, chunk);
            run(fd_pairs_b<1024, false>, "fd_pairs", 128, 8, chunk);
        }
        run(fd_pairs_b<256, false>, "again fd_pairs", 32, 8, 8);
        {
            int chunk = 8, bx = 128; dim3 blk(bx, 2), grd((n + bx - 1) / bx, (n + 1) / 2, (n + chunk - 1) / chunk);
            fd_sweep_wrap<<<grd, blk>>>(u, ref, cf, box, s0, s1, chunk, 1, bad);
        }
        run(fd_pairs_b<256, true>, "periodic fd_pairs", 32, 8, 8);
        run(fd_pairs_b<256, true>, "periodic fd_pairs", 128, 2, 4);
        run(fd_pairs_b<512, true>, "periodic fd_pairs", 32, 16, 8);
        run(fd_pairs_b<512, true>, "periodic fd_pairs", 64, 8, 8);
        run(fd_pairs_b<256, true, 5>, "periodic fd_pairs minb5", 32, 8, 8);
        run(fd_pairs_b<256, true, 5>, "periodic fd_pairs minb5", 128, 2, 4);
        run(fd_pairs_wrap, "periodic heat3d fd_pairs_wrap", 32, 8, 8);
        run(fd_pairs_wrap, "periodic heat3d fd_pairs_wrap", 128, 2, 4);
        run(fd_pairs_b<512, true, 2>, "periodic fd_pairs minb2", 64, 8, 8);
        run(fd_pairs_b<512, true, 2>, "periodic fd_pairs minb2", 128, 4, 8);
        run(fd_pairs_b<256, true>, "periodic fd_pairs", 64, 4, 8);
        run(fd_pairs_b<256, true>, "periodic fd_pairs", 128, 2, 8);
        run(fd_pairs_b<256, true>, "periodic fd_pairs", 32, 8, 12);
        run(fd_pairs_b<256, true>, "periodic fd_pairs", 32, 8, 16);
        {
            int chunk = 8, bx = 128; dim3 blk(bx, 2), grd((n + bx - 1) / bx, (n + 1) / 2, (n + chunk - 1) / chunk);
            fd_sweep<<<grd, blk>>>(u, ref, cf, box, s0, s1, chunk, 1, bad);
        }
        run(fd_pairs_b<512, false, 2>, "fd_pairs minb2", 64, 8, 8);
        run(fd_pairs_b<512, false>, "again fd_pairs", 64, 8, 8);
        run(fd_pairs_b<256, false>, "fd_pairs", 64, 4, 8);
        run(fd_pairs_b<256, false>, "fd_pairs", 128, 2, 8);
        std::vector<Res> r2(results);
        std::stable_sort(r2.begin(), r2.end(), [](const Res& a, const Res& b) { return a.ms < b.ms; });
        printf("--- fastest (R=%d GHOST=%d n=%d) ---\n", R, GHOST, n);
        for (size_t i = 0; i < r2.size() && i < 10; ++i)
            printf("%-34s %8.4f ms  %5.1f%% %s\n", r2[i].name.c_str(), r2[i].ms, 100.0 * ideal / r2[i].ms,
                   r2[i].check ? (r2[i].same ? "bits=" : "BITS DIFFER") : "");
        CK(cudaDeviceSynchronize());
        return 0;
    }
    // reference: the production kernel and default shape
    {
        int chunk = 8, bx = 128; dim3 blk(bx, 256 / bx), grd((n + bx - 1) / bx, (n + blk.y - 1) / blk.y, (n + chunk - 1) / chunk);
        float t = timeit([&] { fd_sweep<<<grd, blk>>>(u, ref, cf, box, s0, s1, chunk, 1, bad); });
        report("fd_sweep 128x2 c8 (current)", t, false);
    }
    if (!quick) for (int chunk : {4, 8, 16, 32}) for (int bx : {32, 64, 128}) {
        dim3 blk(bx, 256 / bx), grd((n + bx - 1) / bx, (n + blk.y - 1) / blk.y, (n + chunk - 1) / chunk);
        CK(cudaMemset(o, 0, len * 8));
        float t = timeit([&] { fd_sweep<<<grd, blk>>>(u, o, cf, box, s0, s1, chunk, 1, bad); });
        char nm[64]; snprintf(nm, 64, "fd_sweep %dx%d c%d", bx, 256 / bx, chunk); report(nm, t, true);
    }

    for (int chunk : {1, 8}) {
        dim3 blk(128, 2), grd((n + 127) / 128, (n + 1) / 2, (n + chunk - 1) / chunk);
        float t = timeit([&] { march_copy<<<grd, blk>>>(u, o, box, s0, s1, chunk); });
        char nm[64]; snprintf(nm, 64, "march_copy 128x2 c%d", chunk); report(nm, t, false);
    }
    if (!quick) for (int a0 : {0}) for (int chunk : {8}) for (int bx : {128}) {
        int by = 256 / bx, gx = (n + bx - 1) / bx, gy = (n + by - 1) / by, gz = (n + chunk - 1) / chunk;
        CK(cudaMemset(o, 0, len * 8));
        float t = timeit([&] { fd_zf<<<gz * gx * gy, dim3(bx, by)>>>(u, o, cf, box, s0, s1, chunk, 1, bad, gz, gx, a0); });
        char nm[64]; snprintf(nm, 64, "%s %dx%d c%d", a0 ? "zf axis0 only" : "fd_zf", bx, by, chunk); report(nm, t, !a0);
    }

    for (int chunk : {4, 8, 16}) for (int bx : {32, 64, 128}) {
        // heat3d's fd_pairs: one thread a pair of cells from the even
        // padded index at or below the region's first column.
        int by = 256 / bx, pairs = (G + n - 1) / 2 - G / 2 + 1;
        dim3 grd((pairs + bx - 1) / bx, (n + by - 1) / by, (n + chunk - 1) / chunk);
        CK(cudaMemset(o, 0, len * 8));
        float t = timeit([&] { fd_pairs<<<grd, dim3(bx, by)>>>(u, o, cf, box, s0, s1, chunk, 1, bad); });
        char nm[64]; snprintf(nm, 64, "fd_pairs %dx%d c%d", bx, by, chunk); report(nm, t, true);
    }
    for (int chunk : {8, 32}) {
        dim3 blk(128, 2), grd((n + 127) / 128, (n + 1) / 2, (n + chunk - 1) / chunk);
        float t = timeit([&] { fd_axis0<<<grd, blk>>>(u, o, cf, box, s0, s1, chunk); });
        char nm[64]; snprintf(nm, 64, "axis0 only 128x2 c%d", chunk); report(nm, t, false);
    }
    auto jreg = [&](auto kern, int J, int by, int chunk) {
        dim3 blk(32, by), grd((n + 31) / 32, (n + by * J - 1) / (by * J), (n + chunk - 1) / chunk);
        CK(cudaMemset(o, 0, len * 8));
        float t = timeit([&] { kern<<<grd, blk>>>(u, o, cf, box, s0, s1, chunk, 1, bad); });
        char nm[64]; snprintf(nm, 64, "fd_jreg J%d 32x%d c%d", J, by, chunk); report(nm, t, true);
    };
    if (!quick) for (int chunk : {8}) for (int by : {8}) {
        jreg(fd_jreg<1>, 1, by, chunk);
        jreg(fd_jreg<2>, 2, by, chunk);
        if (R <= 4) jreg(fd_jreg<4>, 4, by, chunk);
    }
    // Candidates: fd_pf (prefetching fd_pairs) and fd_tile (2.5D shared tile).
    const int pairs = (G + n - 1) / 2 - G / 2 + 1;
    auto pf = [&](auto kern, const char* tag, int bx, int by, int chunk) {
        dim3 grd((pairs + bx - 1) / bx, (n + by - 1) / by, (n + chunk - 1) / chunk);
        CK(cudaMemset(o, 0xff, len * 8));
        float t = timeit([&] { kern<<<grd, dim3(bx, by)>>>(u, o, cf, box, s0, s1, chunk, 1, bad); });
        char nm[64]; snprintf(nm, 64, "%s %dx%d c%d", tag, bx, by, chunk); report(nm, t, true);
    };
    // fd_pairs (heat3d's kernel, unchanged) at more launch shapes
    for (int chunk : {6, 8, 10, 12}) for (auto sh : {std::make_pair(16, 16), std::make_pair(16, 8), std::make_pair(32, 4), std::make_pair(32, 8), std::make_pair(64, 4)}) {
        if (chunk == 8 && (sh.first == 32 || sh.first == 64) && sh.second * sh.first == 256) continue;  // timed above
        dim3 grd((pairs + sh.first - 1) / sh.first, (n + sh.second - 1) / sh.second, (n + chunk - 1) / chunk);
        CK(cudaMemset(o, 0xff, len * 8));
        float t = timeit([&] { fd_pairs<<<grd, dim3(sh.first, sh.second)>>>(u, o, cf, box, s0, s1, chunk, 1, bad); });
        char nm[64]; snprintf(nm, 64, "fd_pairs %dx%d c%d", sh.first, sh.second, chunk); report(nm, t, true);
    }
    for (int chunk : {8, 16}) {
        pf(fd_pf<3, false>, "fd_pf D3", 32, 8, chunk);
        pf(fd_pf<3, false>, "fd_pf D3", 64, 4, chunk);
        pf(fd_pf<3, false, 6>, "fd_pf D3 minb6", 32, 8, chunk);
        pf(fd_pf<2, false, 6>, "fd_pf D2 minb6", 32, 8, chunk);
    }
    if (R <= 2) for (int chunk : {8, 16}) {
        pf(fd_tile<32, 8, false>, "fd_tile", 32, 8, chunk);
        pf(fd_tile<64, 4, false>, "fd_tile", 64, 4, chunk);
        pf(fd_tile<32, 8, false, 6>, "fd_tile minb6", 32, 8, chunk);
        pf(fd_tile<64, 4, false, 6>, "fd_tile minb6", 64, 4, chunk);
    }
#ifndef NO_RING
    auto ring = [&](auto kern, const char* tag, int bx, int by, int chunk) {
        CK(cudaFuncSetAttribute(kern, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
        pf(kern, tag, bx, by, chunk);
    };
    if (R <= 2) for (int chunk : {8, 16, 32, 64}) {
        ring(fd_ring<32, 8, 1, false, 1>, "fd_ring S1", 32, 8, chunk);
        ring(fd_ring<32, 8, 2, false, 1>, "fd_ring S2", 32, 8, chunk);
        ring(fd_ring<32, 8, 3, false, 1>, "fd_ring S3", 32, 8, chunk);
        ring(fd_ring<32, 8, 2, true, 1>, "fd_ring S2 cs", 32, 8, chunk);
        ring(fd_ring<32, 8, 2, false, 8>, "fd_ring S2 minb8", 32, 8, chunk);
        ring(fd_ring<64, 4, 2, false, 1>, "fd_ring S2", 64, 4, chunk);
        ring(fd_ring<64, 4, 1, false, 1>, "fd_ring S1", 64, 4, chunk);
        ring(fd_ring<32, 16, 1, false, 1>, "fd_ring S1", 32, 16, chunk);
        ring(fd_ring<16, 16, 2, false, 1>, "fd_ring S2", 16, 16, chunk);
    }
#endif
    // the same again, for the spread between two timings of one variant
    if (quick) {
#ifndef NO_RING
        pf(fd_ring<32, 8, 2, false, 1>, "again fd_ring S2", 32, 8, 16);
#endif
        {
            dim3 grd((pairs + 31) / 32, n / 8, (n + 7) / 8);
            CK(cudaMemset(o, 0xff, len * 8));
            float t = timeit([&] { fd_pairs<<<grd, dim3(32, 8)>>>(u, o, cf, box, s0, s1, 8, 1, bad); });
            report("again fd_pairs 32x8 c8", t, true);
        }
        dim3 grd((pairs + 127) / 128, n / 2, (n + 3) / 4);
        CK(cudaMemset(o, 0xff, len * 8));
        float t = timeit([&] { fd_pairs<<<grd, dim3(128, 2)>>>(u, o, cf, box, s0, s1, 4, 1, bad); });
        report("again fd_pairs 128x2 c4", t, true);
    }
    {
        std::vector<Res> r2(results);
        std::stable_sort(r2.begin(), r2.end(), [](const Res& a, const Res& b) { return a.ms < b.ms; });
        printf("--- fastest (R=%d GHOST=%d n=%d) ---\n", R, GHOST, n);
        for (size_t i = 0; i < r2.size() && i < 12; ++i)
            printf("%-34s %8.4f ms  %5.1f%% %s\n", r2[i].name.c_str(), r2[i].ms, 100.0 * ideal / r2[i].ms,
                   r2[i].check ? (r2[i].same ? "bits=" : "BITS DIFFER") : "");
        for (auto& e : results) if (e.check && !e.same) printf("DIFFERS: %s\n", e.name.c_str());
    }
    if (quick) { CK(cudaDeviceSynchronize()); return 0; }
    // The periodic self-copies of one rank: six faces of depth R.
    Copies6 c{}; int cnt = 0; long acc = 0;
    auto add = [&](Box3 s, Box3 d) { c.src[cnt] = s; c.dst[cnt] = d; c.start[cnt] = acc; acc += (long)s.n0 * s.n1 * s.n2; ++cnt; c.start[cnt] = acc; };
    for (int a = 0; a < 3; ++a) {
        int lo[3] = {G, G, G}, nn[3] = {n, n, n};
        nn[a] = R;
        int s[3], d[3];
        for (int e = 0; e < 3; ++e) { s[e] = lo[e]; d[e] = lo[e]; }
        s[a] = G + n - R; d[a] = G - R;
        add({s[0], s[1], s[2], nn[0], nn[1], nn[2]}, {d[0], d[1], d[2], nn[0], nn[1], nn[2]});
        s[a] = G; d[a] = G + n;
        add({s[0], s[1], s[2], nn[0], nn[1], nn[2]}, {d[0], d[1], d[2], nn[0], nn[1], nn[2]});
    }
    c.count = cnt;
    long nc = acc; int blocks = (int)std::min<long>((nc + 255) / 256, 1 << 12);
    float t64 = timeit([&] { copy_many64<<<blocks, 256>>>(o, c, s0, s1); });
    float t32 = timeit([&] { copy_many32<<<blocks, 256>>>(o, c, (int)s0, (int)s1); });
    float tfc = timeit([&] { copy_faces<<<dim3(4, 64, 6), dim3(128, 2)>>>(o, n, n, n, G, R, s0, s1); });
    float tfd = timeit([&] { copy_faces<<<dim3(2, 256, 6), dim3(128, 2)>>>(o, n, n, n, G, R, s0, s1); });
    printf("halo self-copies (6 faces, %ld cells): 64-bit index %.4f ms, 32-bit %.4f ms, copy_faces %.4f / %.4f ms\n", nc, t64, t32, tfc, tfd);
    {   // copy_faces == copy_many64 on random data
        CK(cudaMemcpy(o, u, len * 8, cudaMemcpyDeviceToDevice));
        CK(cudaMemcpy(ref, u, len * 8, cudaMemcpyDeviceToDevice));
        copy_many64<<<blocks, 256>>>(ref, c, s0, s1);
        copy_faces<<<dim3(4, 64, 6), dim3(128, 2)>>>(o, n, n, n, G, R, s0, s1);
        std::vector<double> a(len), r2(len);
        CK(cudaMemcpy(a.data(), o, len * 8, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(r2.data(), ref, len * 8, cudaMemcpyDeviceToHost));
        printf("copy_faces %s copy_many\n", memcmp(a.data(), r2.data(), len * 8) ? "DIFFERS FROM" : "equals");
    }
    // A step as the app issues it (copies + sweep), host-launched back to back.
    {
        dim3 blk(128, 2), grd((n + 127) / 128, (n + 1) / 2, (n + 7) / 8);
        float t = timeit([&] { copy_many64<<<blocks, 256>>>(u, c, s0, s1); fd_sweep<<<grd, blk>>>(u, o, cf, box, s0, s1, 8, 1, bad); });
        report("step: copies64 + fd_sweep c8", t, false);
    }
    CK(cudaDeviceSynchronize());
    return 0;
}

// Stand-alone timing of heat3d's FD kernels and candidate variants on one
// device, with nvcc (not part of the build; see NOTES.md beside this file).
//
//   nvcc -O3 -arch=sm_90 -fmad=false -DRADIUS=1 -o fd_tune1 fd_tune.cu
//   ./fd_tune1 512
//
// Every variant is checked bitwise against `fd_sweep` (the production
// kernel) on random data; times are medians of event-timed launches.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cstring>
#include <cuda_runtime.h>

#ifndef GHOST
#define GHOST RADIUS
#endif
#include "../../../halo/kernels/region.cuh"
#include "../kernels/heat3d.cu"

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
    const int p = n + 2 * GHOST;
    const long s1 = p, s0 = (long)p * p, len = (long)p * p * p;
    const double cells = (double)n * n * n;
    std::vector<double> h(len);
    unsigned long long st = 88172645463325252ull;
    for (long i = 0; i < len; ++i) { st ^= st << 13; st ^= st >> 7; st ^= st << 17; h[i] = (double)(st >> 11) * 0x1.0p-53 - 0.5; }
    double *u, *o, *ref, *big0, *big1; int* bad;
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
    auto report = [&](const char* name, float ms, bool check) {
        bool same = true;
        if (check) {
            std::vector<double> a(len), r(len);
            CK(cudaMemcpy(a.data(), o, len * 8, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(r.data(), ref, len * 8, cudaMemcpyDeviceToHost));
            for (int i = 0; i < n && same; ++i) for (int j = 0; j < n && same; ++j) for (int k = 0; k < n; ++k) {
                long q = (long)(i + GHOST) * s0 + (long)(j + GHOST) * s1 + k + GHOST;
                if (memcmp(&a[q], &r[q], 8) != 0) { same = false; printf("  mismatch at %d %d %d\n", i, j, k); break; }
            }
        }
        printf("%-34s %8.4f ms  %5.1f%% of copy %s\n", name, ms, 100.0 * ideal / ms, check ? (same ? "bits=" : "BITS DIFFER") : "");
    };
    // reference: the production kernel and default shape
    {
        int chunk = 8, bx = 128; dim3 blk(bx, 256 / bx), grd((n + bx - 1) / bx, (n + blk.y - 1) / blk.y, (n + chunk - 1) / chunk);
        float t = timeit([&] { fd_sweep<<<grd, blk>>>(u, ref, cf, box, s0, s1, chunk, 1, bad, 0); });
        report("fd_sweep 128x2 c8 (current)", t, false);
    }
    for (int chunk : {4, 8, 16, 32}) for (int bx : {32, 64, 128}) {
        dim3 blk(bx, 256 / bx), grd((n + bx - 1) / bx, (n + blk.y - 1) / blk.y, (n + chunk - 1) / chunk);
        CK(cudaMemset(o, 0, len * 8));
        float t = timeit([&] { fd_sweep<<<grd, blk>>>(u, o, cf, box, s0, s1, chunk, 1, bad, 0); });
        char nm[64]; snprintf(nm, 64, "fd_sweep %dx%d c%d", bx, 256 / bx, chunk); report(nm, t, true);
    }

    for (int chunk : {1, 8}) {
        dim3 blk(128, 2), grd((n + 127) / 128, (n + 1) / 2, (n + chunk - 1) / chunk);
        float t = timeit([&] { march_copy<<<grd, blk>>>(u, o, box, s0, s1, chunk); });
        char nm[64]; snprintf(nm, 64, "march_copy 128x2 c%d", chunk); report(nm, t, false);
    }
    for (int a0 : {0}) for (int chunk : {8}) for (int bx : {128}) {
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
        float t = timeit([&] { fd_pairs<<<grd, dim3(bx, by)>>>(u, o, cf, box, s0, s1, chunk, 1, bad, 0); });
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
    for (int chunk : {8}) for (int by : {8}) {
        jreg(fd_jreg<1>, 1, by, chunk);
        jreg(fd_jreg<2>, 2, by, chunk);
        if (R <= 4) jreg(fd_jreg<4>, 4, by, chunk);
    }
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
        float t = timeit([&] { copy_many64<<<blocks, 256>>>(u, c, s0, s1); fd_sweep<<<grd, blk>>>(u, o, cf, box, s0, s1, 8, 1, bad, 0); });
        report("step: copies64 + fd_sweep c8", t, false);
    }
    CK(cudaDeviceSynchronize());
    return 0;
}

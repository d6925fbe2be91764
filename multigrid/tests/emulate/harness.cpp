// Runs the device kernels of kernels/mg.cu on the host, one thread doing
// every grid-stride iteration, on deterministic data, and prints each
// result array as hexadecimal bit patterns (one line per case). The test
// `kernels_on_the_host` builds the same data in Rust, runs the host code and
// compares bit for bit. Compiled with -ffp-contract=off, like NVRTC with
// --fmad=false.
#include <cstdio>
#include <cstring>
#include <cmath>
#include <vector>
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)
struct Dim { unsigned x, y, z; };
static Dim blockIdx = {0, 0, 0}, threadIdx = {0, 0, 0}, blockDim = {1, 1, 1}, gridDim = {1, 1, 1};
static inline unsigned long long atomicAdd(unsigned long long *a, unsigned long long v) {
    unsigned long long o = *a;
    *a += v;
    return o;
}
static inline long long __double_as_longlong(double d) {
    long long x;
    std::memcpy(&x, &d, 8);
    return x;
}
static inline void __syncthreads() {}
using std::max;
using std::min;
// Small sweep tiles (interior 6 x 2 columns), so that the little boxes
// below span several tiles along j and k.
#define MG_EMULATE
#define SWEEP_TK 8
#define SWEEP_TJ 4
#include <algorithm>
#include "region.cuh"
#include "mg.cu"

static unsigned long long mix(unsigned long long x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
// A value in [-1, 1] on a grid of 1/1000, times 2^e for a wide range when
// `wide`.
static double val(unsigned long long i, unsigned long long seed, bool wide) {
    unsigned long long h = mix(i * 1000003ull + seed);
    double v = (double)(long long)((h >> 11) % 2001) / 1000.0 - 1.0;
    if (wide) v = std::ldexp(v, (int)((h >> 40) % 1201) - 600);
    return v;
}
static std::vector<double> arr(size_t n, unsigned long long seed, bool wide = false) {
    std::vector<double> a(n);
    for (size_t i = 0; i < n; i++) a[i] = val(i, seed, wide);
    return a;
}
static void print(const char *name, const std::vector<double> &a) {
    std::printf("%s", name);
    for (double v : a) {
        unsigned long long b;
        std::memcpy(&b, &v, 8);
        std::printf(" %llx", b);
    }
    std::printf("\n");
}
struct Lay {
    int o[3], g;
    long p(int d) const { return o[d] + 2 * g; }
    long s0() const { return p(1) * p(2); }
    long s1() const { return p(2); }
    size_t len() const { return (size_t)(p(0) * p(1) * p(2)); }
    Box3 owned() const { return Box3{g, g, g, o[0], o[1], o[2]}; }
};
// Variable-stencil arrays: non-negative weights and a diagonal, every 11th
// cell inactive (diagonal 0).
struct VarArrays {
    std::vector<double> w0, w1, w2, diag;
    explicit VarArrays(size_t n) : w0(arr(n, 3)), w1(arr(n, 4)), w2(arr(n, 5)), diag(arr(n, 6)) {
        for (size_t i = 0; i < n; i++) {
            w0[i] = std::fabs(w0[i]);
            w1[i] = std::fabs(w1[i]);
            w2[i] = std::fabs(w2[i]);
            diag[i] = i % 11 == 0 ? 0.0 : std::fabs(diag[i]) + 6.0;
        }
    }
};
// Wall terms of a padded axis of n cells with ghost width g: non-zero only
// at the first and last owned cells (the cells next to a wall).
static std::vector<double> walls(long n, unsigned long long seed, int g) {
    std::vector<double> w = arr((size_t)n, seed);
    for (long i = 0; i < n; i++)
        if (i != g && i != n - g - 1) w[i] = 0.0;
    return w;
}

// The one-pass sweep (variable or constant stencil) over the owned box
// `own` of L into ub: the first colour over `grown`, on blocks of several
// tiles and chunks of 3 planes; every block's threads run step by step,
// as between the kernel's barriers (within a step no thread writes what
// another reads). Shared memory starts as NaN, so that a value read
// before it is written shows in the result.
template <bool VAR>
static void emulate_sweep(const Lay &L, Box3 own, Box3 grown, const VarArrays &V,
                          const std::vector<double> &c0, const std::vector<double> &c1,
                          const std::vector<double> &c2, std::vector<double> &ub) {
    const double IH[3] = {1.5, 2.25, 0.75};
    const int chunk = 3, TK = SWEEP_TK, TJ = SWEEP_TJ;
    size_t n = L.len();
    int gx = (L.o[2] + 2 + TK - 3) / (TK - 2), gy = (L.o[1] + 2 + TJ - 3) / (TJ - 2);
    int gz = (L.o[0] + 2 + chunk - 1) / chunk;
    int first = VAR ? 0 : 1;
    std::vector<double> ua = arr(n, 1), f = arr(n, 2);
    SweepGrid g{own, grown, (int)L.p(0), (int)L.p(1), (int)L.p(2), L.s0(), L.s1(), 3, first, chunk, 1.15};
    SweepVar sv{V.w0.data(), V.w1.data(), V.w2.data(), V.diag.data()};
    SweepConst sc = sweep_const_stencil(IH[0], IH[1], IH[2], c0.data(), c1.data(), c2.data());
    for (int bz = 0; bz < gz; bz++)
        for (int by = 0; by < gy; by++)
            for (int bx = 0; bx < gx; bx++) {
                SweepShared<TK, TJ> sh;
                for (double &x : sh.old[0]) x = NAN;
                for (double &x : sh.old[1]) x = NAN;
                for (int q = 0; q < 3; q++)
                    for (double &x : sh.first[q]) x = NAN;
                std::vector<SweepThread> th(TK * TJ);
                for (int ty = 0; ty < TJ; ty++)
                    for (int tx = 0; tx < TK; tx++)
                        th[ty * TK + tx] = sweep_begin<TK, TJ>(g, &sh, ua.data(), f.data(), bx, by, bz, tx, ty);
                for (int i = th[0].a - 1; i <= th[0].b; i++) {
                    for (SweepThread &t : th) {
                        if (VAR) sweep_first<TK, TJ>(t, &sh, ua.data(), f.data(), sv, g, i);
                        else sweep_first<TK, TJ>(t, &sh, ua.data(), f.data(), sc, g, i);
                    }
                    for (SweepThread &t : th) {
                        if (VAR) sweep_second<TK, TJ>(t, &sh, ub.data(), sv, g, i);
                        else sweep_second<TK, TJ>(t, &sh, ub.data(), sc, g, i);
                    }
                }
            }
}

int main() {
    const double IH[3] = {1.5, 2.25, 0.75};
    // Smoothing on a 6 x 5 x 7 box, ghost width 2.
    Lay L{{6, 5, 7}, 2};
    size_t n = L.len();
    Box3 own = L.owned();
    long half = (long)L.o[0] * L.o[1] * ((L.o[2] + 1) / 2);
    VarArrays V(n);
    std::vector<double> c0 = walls(L.p(0), 7, L.g), c1 = walls(L.p(1), 8, L.g), c2 = walls(L.p(2), 9, L.g);
    for (int variable = 1; variable >= 0; variable--) {
        std::vector<double> u = arr(n, 1), f = arr(n, 2);
        for (int pass = 0; pass < 3; pass++) {
            double omega = pass == 2 ? 1.0 : 1.15;
            int colour = pass % 2;
            if (variable)
                mg_smooth_var(u.data(), f.data(), V.w0.data(), V.w1.data(), V.w2.data(), V.diag.data(), own, L.s0(), L.s1(), 3, colour, omega, half);
            else
                mg_smooth_const(u.data(), f.data(), IH[0], IH[1], IH[2], c0.data(), c1.data(),
                                c2.data(), own, L.s0(), L.s1(), 3, colour, omega, half);
        }
        print(variable ? "smooth_var" : "smooth_const", u);
    }
    // The one-pass sweep: the first colour over `grown` (the owned box
    // grown by 1 along axes 0 and 2, and on the high side of axis 1), the
    // second over the owned box (see emulate_sweep). ub starts as other
    // values: the cells outside R (owned grown by 1) must keep them.
    {
        Box3 grown{L.g - 1, L.g, L.g - 1, L.o[0] + 2, L.o[1] + 1, L.o[2] + 2};
        for (int variable = 1; variable >= 0; variable--) {
            std::vector<double> ub = arr(n, 99);
            if (variable)
                emulate_sweep<true>(L, own, grown, V, c0, c1, c2, ub);
            else
                emulate_sweep<false>(L, own, grown, V, c0, c1, c2, ub);
            print(variable ? "sweep_var" : "sweep_const", ub);
        }
    }
    // Restriction: fine 6 x 4 x 8 (ghost 2) to coarse 3 x 2 x 4 (ghost 1).
    Lay F{{6, 4, 8}, 2}, C{{3, 2, 4}, 1};
    VarArrays FV(F.len());
    std::vector<double> f0 = walls(F.p(0), 7, F.g), f1 = walls(F.p(1), 8, F.g), f2 = walls(F.p(2), 9, F.g);
    for (int variable = 1; variable >= 0; variable--) {
        std::vector<double> u = arr(F.len(), 11), f = arr(F.len(), 12), cf(C.len(), 0.0);
        if (variable)
            mg_restrict_var(cf.data(), u.data(), f.data(), FV.w0.data(), FV.w1.data(), FV.w2.data(),
                            FV.diag.data(), C.o[0], C.o[1], C.o[2], F.g, F.s0(), F.s1(),
                            C.g, C.s0(), C.s1());
        else
            mg_restrict_const(cf.data(), u.data(), f.data(), IH[0], IH[1], IH[2], f0.data(), f1.data(),
                              f2.data(), C.o[0], C.o[1], C.o[2], F.g, F.s0(), F.s1(), C.g, C.s0(),
                              C.s1());
        print(variable ? "restrict_var" : "restrict_const", cf);
    }
    // Prolongation: coarse 3 x 2 x 4 (ghost 1, every value set) into fine
    // 6 x 4 x 8 (ghost 2).
    {
        std::vector<double> cu = arr(C.len(), 13), fu = arr(F.len(), 14);
        mg_prolong_add(fu.data(), cu.data(), F.o[0], F.o[1], F.o[2], F.g, F.s0(), F.s1(), C.g, C.s0(),
                       C.s1());
        print("prolong", fu);
        // Reflections on the coarse box: axis 1 low (odd), axis 2 high (even).
        mg_reflect(cu.data(), 1, 0, 1, -1.0, (int)C.p(0), (int)C.p(1), (int)C.p(2), C.s0(), C.s1());
        mg_reflect(cu.data(), 2, (int)C.p(2) - 1, (int)C.p(2) - 2, 1.0, (int)C.p(0), (int)C.p(1),
                   (int)C.p(2), C.s0(), C.s1());
        print("reflect", cu);
    }
    // Vector operations over the owned box of L.
    for (int mode = 0; mode < 4; mode++) {
        std::vector<double> x = arr(n, 21), p = arr(n, 22), z = arr(n, 23);
        mg_axpy(mode, x.data(), p.data(), z.data(), 0.37, -1.25, own, L.s0(), L.s1());
        char name[16];
        std::snprintf(name, sizeof name, "axpy%d_x", mode);
        print(name, x);
        std::snprintf(name, sizeof name, "axpy%d_p", mode);
        print(name, p);
    }
    // Exact sums over the owned box of L: products of wide-range values,
    // the values, their magnitudes; then with a NaN, an infinity and -0.0.
    for (int mode = 0; mode < 4; mode++) {
        std::vector<double> a = arr(n, 31, true), b = arr(n, 32, true);
        if (mode == 3) {
            long x = 2 * L.s0() + 3 * L.s1() + 4;
            a[x] = NAN;
            a[x + 1] = -INFINITY;
            a[x + 2] = -0.0;
        }
        std::vector<unsigned long long> out(WORDS, 0);
        mg_exact_sum(out.data(), a.data(), b.data(), mode == 3 ? 1 : mode, own, L.s0(), L.s1());
        std::printf("exact%d", mode);
        for (unsigned long long w : out) std::printf(" %llx", w);
        std::printf("\n");
    }
    // The fused passes with their exact sums: two products sharing a; the
    // operator and the residual with their dots; r = o - alpha p with r r.
    {
        std::vector<double> a = arr(n, 41, true), b = arr(n, 42, true), c = arr(n, 43, true);
        std::vector<unsigned long long> out(2 * WORDS, 0);
        mg_exact_sum2(out.data(), a.data(), b.data(), c.data(), own, L.s0(), L.s1());
        std::printf("sum2");
        for (unsigned long long w : out) std::printf(" %llx", w);
        std::printf("\n");
    }
    for (int variable = 1; variable >= 0; variable--)
        for (int with_f = 1; with_f >= 0; with_f--) {
            std::vector<double> u = arr(n, 51), f = arr(n, 52), out(n, 0.0);
            std::vector<unsigned long long> dot(WORDS, 0);
            const double *fp = with_f ? f.data() : nullptr;
            if (variable)
                mg_residual_dot_var(out.data(), u.data(), fp, V.w0.data(), V.w1.data(), V.w2.data(),
                                    V.diag.data(), own, L.s0(), L.s1(), dot.data());
            else
                mg_residual_dot_const(out.data(), u.data(), fp, IH[0], IH[1], IH[2], c0.data(), c1.data(),
                                      c2.data(), own, L.s0(), L.s1(), dot.data());
            char name[32];
            std::snprintf(name, sizeof name, "resdot_%s_%d", variable ? "var" : "const", with_f);
            print(name, out);
            std::printf("%s_sum", name);
            for (unsigned long long w : dot) std::printf(" %llx", w);
            std::printf("\n");
        }
    {
        std::vector<double> r = arr(n, 61), o = arr(n, 62), p = arr(n, 63);
        std::vector<unsigned long long> dot(WORDS, 0);
        mg_update_dot(r.data(), o.data(), p.data(), 0.37, own, L.s0(), L.s1(), dot.data());
        print("update", r);
        std::printf("update_sum");
        for (unsigned long long w : dot) std::printf(" %llx", w);
        std::printf("\n");
    }
    return 0;
}

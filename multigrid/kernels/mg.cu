// Multigrid kernels of the device path (multigrid's `cuda` feature). Every
// kernel does, for each cell, the IEEE operations of the host code in the
// same order (compiled without contraction into fused multiply-adds), so
// the device and the host give the same bits. Fields are padded arrays,
// last axis fastest, with strides s0, s1 (and 1); regions are `Box3`s.

// The variable stencil (level.rs, `Stencil::Var`): the weights of the
// lower faces per axis and the diagonal, per padded cell. The inverse
// diagonal is the host's `inv_diag`, computed where it is needed by the
// host's expression (a correctly rounded division, so the same bits): 0
// for an inactive cell (a diagonal that is not positive, or infinite).
#define VAR_ARGS const double *w0, const double *w1, const double *w2, const double *diag

__device__ __forceinline__ double inv_of(double d) {
    return d > 0.0 ? 1.0 / d : 0.0;
}
// The constant stencil (`Stencil::Const`): 1/h^2 per axis and the wall
// terms per padded index of each axis.
#define CONST_ARGS double ih0, double ih1, double ih2, const double *wall0, \
    const double *wall1, const double *wall2

// The neighbour sum of padded cell x from its six neighbours' values
// (below and above along axes 0, 1, 2), in the host's order.
__device__ __forceinline__ double nb_var6(const double *w0, const double *w1, const double *w2,
                                          long x, long s0, long s1, double um0, double up0,
                                          double um1, double up1, double um2, double up2) {
    return (w0[x] * um0 + w0[x + s0] * up0) + (w1[x] * um1 + w1[x + s1] * up1)
        + (w2[x] * um2 + w2[x + 1] * up2);
}

__device__ __forceinline__ double nb_const6(double ih0, double ih1, double ih2, double um0,
                                            double up0, double um1, double up1, double um2,
                                            double up2) {
    return ih0 * (um0 + up0) + ih1 * (um1 + up1) + ih2 * (um2 + up2);
}

// The same from the field u.
__device__ __forceinline__ double nb_var(const double *w0, const double *w1, const double *w2,
                                         const double *u, long x, long s0, long s1) {
    return nb_var6(w0, w1, w2, x, s0, s1, u[x - s0], u[x + s0], u[x - s1], u[x + s1], u[x - 1],
                   u[x + 1]);
}

__device__ __forceinline__ double nb_const(double ih0, double ih1, double ih2, const double *u,
                                           long x, long s0, long s1) {
    return nb_const6(ih0, ih1, ih2, u[x - s0], u[x + s0], u[x - s1], u[x + s1], u[x - 1],
                     u[x + 1]);
}

// The diagonal of padded cell (i, j, k) of the constant stencil, in the
// host's order: ((2 (ih0 + ih1 + ih2) + wall0[i]) + wall1[j]) + wall2[k].
__device__ __forceinline__ double diag_const(double ih0, double ih1, double ih2,
                                             const double *wall0, const double *wall1,
                                             const double *wall2, int i, int j, int k) {
    double base = 2.0 * (ih0 + ih1 + ih2) + wall0[i];
    return (base + wall1[j]) + wall2[k];
}

// (A u)[x] of padded cell x = (i, j, k).
__device__ __forceinline__ double apply_var(const double *w0, const double *w1, const double *w2,
                                            const double *diag, const double *u, long x, long s0,
                                            long s1) {
    return diag[x] * u[x] - nb_var(w0, w1, w2, u, x, s0, s1);
}

__device__ __forceinline__ double apply_const(double ih0, double ih1, double ih2,
                                              const double *wall0, const double *wall1,
                                              const double *wall2, const double *u, int i, int j,
                                              int k, long x, long s0, long s1) {
    return diag_const(ih0, ih1, ih2, wall0, wall1, wall2, i, j, k) * u[x]
        - nb_const(ih0, ih1, ih2, u, x, s0, s1);
}

#define APPLY_VAR(u, i, j, k, x, s0, s1) apply_var(w0, w1, w2, diag, u, x, s0, s1)
#define APPLY_CONST(u, i, j, k, x, s0, s1) \
    apply_const(ih0, ih1, ih2, wall0, wall1, wall2, u, i, j, k, x, s0, s1)

// Thread q of a red-black pass over region b: its cell (padded indices),
// or false past the region. A row holds ceil(n2 / 2) threads; the first
// cell of the colour in row (i, j) is lo2 + (parity + i + j + lo2 +
// colour) % 2.
__device__ __forceinline__ bool rb_cell(const Box3 b, long q, int parity, int colour,
                                        int *pi, int *pj, int *pk) {
    long half = (b.n2 + 1) / 2;
    long kk = q % half;
    long r = q / half;
    int j = b.lo1 + (int)(r % b.n1);
    int i = b.lo0 + (int)(r / b.n1);
    int k0 = b.lo2 + (parity + i + j + b.lo2 + colour) % 2;
    int k = k0 + 2 * (int)kk;
    if (i >= b.lo0 + b.n0 || k >= b.lo2 + b.n2) return false;
    *pi = i; *pj = j; *pk = k;
    return true;
}

__device__ __forceinline__ double relax(double u, double gs, double omega) {
    return omega == 1.0 ? gs : u + omega * (gs - u);
}

// The relaxed Gauss-Seidel value of cell x (old value `old`, neighbour
// sum `nb`); an inactive cell (zero inverse diagonal) is held at 0.
__device__ __forceinline__ double gs_var(const double *f, const double *diag, long x,
                                         double old, double nb, double omega) {
    double inv = inv_of(diag[x]);
    double nv = relax(old, (f[x] + nb) * inv, omega);
    return inv == 0.0 ? 0.0 : nv;
}

__device__ __forceinline__ double gs_const(const double *f, CONST_ARGS, int i, int j, int k,
                                           long x, double old, double nb, double omega) {
    double inv = 1.0 / diag_const(ih0, ih1, ih2, wall0, wall1, wall2, i, j, k);
    return relax(old, (f[x] + nb) * inv, omega);
}

extern "C" __global__ void mg_smooth_var(double *u, const double *f, VAR_ARGS, const Box3 b,
                                         long s0, long s1, int parity, int colour, double omega,
                                         long threads) {
    for (long q = blockIdx.x * (long)blockDim.x + threadIdx.x; q < threads;
         q += (long)gridDim.x * blockDim.x) {
        int i, j, k;
        if (!rb_cell(b, q, parity, colour, &i, &j, &k)) continue;
        long x = i * s0 + j * s1 + k;
        u[x] = gs_var(f, diag, x, u[x], nb_var(w0, w1, w2, u, x, s0, s1), omega);
    }
}

extern "C" __global__ void mg_smooth_const(double *u, const double *f, CONST_ARGS, const Box3 b,
                                           long s0, long s1, int parity, int colour, double omega,
                                           long threads) {
    for (long q = blockIdx.x * (long)blockDim.x + threadIdx.x; q < threads;
         q += (long)gridDim.x * blockDim.x) {
        int i, j, k;
        if (!rb_cell(b, q, parity, colour, &i, &j, &k)) continue;
        long x = i * s0 + j * s1 + k;
        u[x] = gs_const(f, ih0, ih1, ih2, wall0, wall1, wall2, i, j, k, x, u[x],
                        nb_const(ih0, ih1, ih2, u, x, s0, s1), omega);
    }
}

// ---- One whole red-black sweep in one pass over memory --------------
//
// The communication-avoiding sweep (ghost width 2, `u` exchanged 2 deep
// and `f`'s first ghost layer current): the first colour over `grown`
// (the owned cells and the ghost ring on every side with a neighbour),
// then the second colour over `own`. Where the host runs two passes, the
// kernel reads `ua` and writes `ub` once: each block holds a tile of
// (SWEEP_TK - 2) x (SWEEP_TJ - 2) columns (k, j) of the box R = `own`
// grown by 1 on every side, with a 1-cell ring of threads around it, and
// marches along i through a chunk of R's planes. At plane i every thread
// takes its cell's first-colour value (updated where the cell is in
// `grown`, else the old value) into shared memory; then the tile's cells
// of plane i - 1 are final: second-colour cells of `own` are updated from
// the first-colour values of planes i - 2 (a register), i (a register) and
// i - 1 (shared memory, the four neighbours in the plane); every other
// cell keeps its value. Each cell of R is written to `ub` once, by the
// block whose tile holds it; cells outside R are not written. The values
// are those of the host's two passes, bit for bit: a first-colour cell
// reads only second-colour (old) values, a second-colour cell the
// first-colour values as updated, in the same operations and order (the
// ring's first-colour cells of neighbouring tiles and chunks are computed
// by each of them, from the same old values).

#ifndef SWEEP_TK
#define SWEEP_TK 32
#endif
#ifndef SWEEP_TJ
#define SWEEP_TJ 16
#endif

// The cell of thread (tx, ty) of block (bx, by) and the owned-plus-ring box
// R; `inner`: the thread's cell is in its tile (not in its thread ring) and
// in R; `pad`: the cell lies in the padded array.
struct SweepCell {
    int j, k;
    bool inner, pad;
};

__device__ __forceinline__ SweepCell sweep_cell(const Box3 own, int bx, int by, int tx, int ty,
                                                int p1, int p2) {
    SweepCell c;
    int rlo1 = own.lo1 - 1, rlo2 = own.lo2 - 1;
    c.j = rlo1 + by * (SWEEP_TJ - 2) - 1 + ty;
    c.k = rlo2 + bx * (SWEEP_TK - 2) - 1 + tx;
    c.pad = c.j >= 0 && c.k >= 0 && c.j < p1 && c.k < p2;
    c.inner = tx >= 1 && tx <= SWEEP_TK - 2 && ty >= 1 && ty <= SWEEP_TJ - 2
        && c.j < own.lo1 + own.n1 + 1 && c.k < own.lo2 + own.n2 + 1;
    return c;
}

// The chunk of R's planes [a, b) of block z.
__device__ __forceinline__ void sweep_chunk(const Box3 own, int bz, int chunk, int *a, int *b) {
    int lo = own.lo0 - 1, hi = own.lo0 + own.n0 + 1;
    *a = lo + bz * chunk;
    *b = min(*a + chunk, hi);
}

__device__ __forceinline__ bool in_box(const Box3 b, int i, int j, int k) {
    return i >= b.lo0 && i < b.lo0 + b.n0 && j >= b.lo1 && j < b.lo1 + b.n1 && k >= b.lo2
        && k < b.lo2 + b.n2;
}

#define NB_VAR(x, a, b, c, d, e, g) nb_var6(w0, w1, w2, x, s0, s1, a, b, c, d, e, g)
#define NB_CONST(x, a, b, c, d, e, g) nb_const6(ih0, ih1, ih2, a, b, c, d, e, g)
#define GS_VAR(i, j, k, x, old, nb) gs_var(f, diag, x, old, nb, omega)
#define GS_CONST(i, j, k, x, old, nb) \
    gs_const(f, ih0, ih1, ih2, wall0, wall1, wall2, i, j, k, x, old, nb, omega)

// Phase 1 at plane i: the cell's first-colour value (the old value for a
// second-colour cell or one outside `grown`; 0 outside the array).
#define SWEEP_FIRST(NAME, ARGS, NB, GS)                                                          \
    __device__ __forceinline__ double NAME(const double *ua, const double *f, ARGS,              \
                                           const Box3 grown, SweepCell c, int i, long s0,         \
                                           long s1, int parity, int first, double omega) {        \
        if (!c.pad) return 0.0;                                                                   \
        long x = i * s0 + (long)c.j * s1 + c.k;                                                   \
        double old = ua[x];                                                                       \
        if (((parity + i + c.j + c.k) & 1) != first || !in_box(grown, i, c.j, c.k)) return old;   \
        double nb = NB(x, ua[x - s0], ua[x + s0], ua[x - s1], ua[x + s1], ua[x - 1], ua[x + 1]);  \
        return GS(i, c.j, c.k, x, old, nb);                                                       \
    }
SWEEP_FIRST(sweep_first_var, VAR_ARGS, NB_VAR, GS_VAR)
SWEEP_FIRST(sweep_first_const, CONST_ARGS, NB_CONST, GS_CONST)

// Phase 2 at plane o = i - 1 (for a cell in its tile and in R): writes
// ub[x], the second colour updated over `own`. `pl` is plane o's shared
// values (row stride SWEEP_TK), `below` and `above` the cell's values at
// planes o - 1 and o + 1, `mine` its value at plane o.
#define SWEEP_SECOND(NAME, ARGS, NB, GS)                                                         \
    __device__ __forceinline__ void NAME(double *ub, const double *f, ARGS, const Box3 own,       \
                                         SweepCell c, int tx, int ty, const double *pl, int o,    \
                                         double below, double mine, double above, long s0,        \
                                         long s1, int parity, int first, double omega) {          \
        if (!c.inner || !c.pad) return;                                                           \
        long x = o * s0 + (long)c.j * s1 + c.k;                                                   \
        double v = mine;                                                                          \
        if (((parity + o + c.j + c.k) & 1) != first && in_box(own, o, c.j, c.k)) {               \
            int t = ty * SWEEP_TK + tx;                                                           \
            double nb = NB(x, below, above, pl[t - SWEEP_TK], pl[t + SWEEP_TK], pl[t - 1],        \
                           pl[t + 1]);                                                            \
            v = GS(o, c.j, c.k, x, mine, nb);                                                     \
        }                                                                                         \
        ub[x] = v;                                                                                \
    }
SWEEP_SECOND(sweep_second_var, VAR_ARGS, NB_VAR, GS_VAR)
SWEEP_SECOND(sweep_second_const, CONST_ARGS, NB_CONST, GS_CONST)

// The kernels: block (SWEEP_TK, SWEEP_TJ), grid (tiles along k, tiles
// along j, chunks of `chunk` planes); p1, p2 the padded extents of axes 1
// and 2.
#define SWEEP(NAME, ARGS, FIRST, SECOND, PASS)                                                    \
    extern "C" __global__ void NAME(double *ub, const double *ua, const double *f, ARGS,          \
                                    const Box3 own, const Box3 grown, int p1, int p2, long s0,    \
                                    long s1, int parity, int first, double omega, int chunk) {    \
        __shared__ double buf[3][SWEEP_TJ * SWEEP_TK];                                            \
        int tx = threadIdx.x, ty = threadIdx.y;                                                   \
        SweepCell c = sweep_cell(own, blockIdx.x, blockIdx.y, tx, ty, p1, p2);                    \
        int a, b;                                                                                 \
        sweep_chunk(own, blockIdx.z, chunk, &a, &b);                                              \
        double below = 0.0, mine = 0.0;                                                           \
        for (int i = a - 1; i <= b; i++) {                                                        \
            int slot = (i - a + 1) % 3;                                                           \
            double v = FIRST(ua, f, PASS, grown, c, i, s0, s1, parity, first, omega);             \
            buf[slot][ty * SWEEP_TK + tx] = v;                                                    \
            __syncthreads();                                                                      \
            if (i - 1 >= a)                                                                       \
                SECOND(ub, f, PASS, own, c, tx, ty, buf[(slot + 2) % 3], i - 1, below, mine, v,   \
                       s0, s1, parity, first, omega);                                             \
            below = mine;                                                                         \
            mine = v;                                                                             \
        }                                                                                         \
    }
#define VAR_PASS w0, w1, w2, diag
#define CONST_PASS ih0, ih1, ih2, wall0, wall1, wall2
SWEEP(mg_sweep_var, VAR_ARGS, sweep_first_var, sweep_second_var, VAR_PASS)
SWEEP(mg_sweep_const, CONST_ARGS, sweep_first_const, sweep_second_const, CONST_PASS)

// The 8-cell average of the fine residual f - A u into the owned coarse
// cells (n0, n1, n2 of them): fine ghost width gf and strides sf, coarse
// gc and sc. The host's order: rows (0, 0), (0, 1), (1, 0), (1, 1) of the
// fine pair of planes, two cells each, summed pairwise.
#define RESTRICT(NAME, ARGS, APPLY)                                                              \
    extern "C" __global__ void NAME(double *coarse_f, const double *u, const double *f, ARGS,     \
                                    int n0, int n1, int n2, int gf, long sf0, long sf1, int gc,   \
                                    long sc0, long sc1) {                                         \
        long n = (long)n0 * n1 * n2;                                                              \
        for (long q = blockIdx.x * (long)blockDim.x + threadIdx.x; q < n;                         \
             q += (long)gridDim.x * blockDim.x) {                                                 \
            int ck = (int)(q % n2);                                                               \
            long r = q / n2;                                                                      \
            int cj = (int)(r % n1), ci = (int)(r / n1);                                           \
            double rr[8];                                                                         \
            for (int t = 0; t < 8; t++) {                                                         \
                int i = 2 * ci + gf + (t >> 2), j = 2 * cj + gf + ((t >> 1) & 1);                 \
                int k = 2 * ck + gf + (t & 1);                                                    \
                long x = i * sf0 + j * sf1 + k;                                                   \
                rr[t] = f[x] - APPLY(u, i, j, k, x, sf0, sf1);                                    \
            }                                                                                     \
            double a = (rr[0] + rr[1]) + (rr[2] + rr[3]);                                         \
            double bb = (rr[4] + rr[5]) + (rr[6] + rr[7]);                                        \
            coarse_f[(ci + gc) * sc0 + (cj + gc) * sc1 + ck + gc] = 0.125 * (a + bb);             \
        }                                                                                         \
    }
RESTRICT(mg_restrict_var, VAR_ARGS, APPLY_VAR)
RESTRICT(mg_restrict_const, CONST_ARGS, APPLY_CONST)

// fine_u += trilinear interpolation of coarse_u (ghosts current) over the
// owned fine cells (n = owned fine extents, even).
extern "C" __global__ void mg_prolong_add(double *fine_u, const double *coarse_u, int n0, int n1,
                                          int n2, int gf, long sf0, long sf1, int gc, long sc0,
                                          long sc1) {
    const double W0 = 27.0 / 64.0, W1 = 9.0 / 64.0, W2 = 3.0 / 64.0, W3 = 1.0 / 64.0;
    long n = (long)n0 * n1 * n2;
    for (long q = blockIdx.x * (long)blockDim.x + threadIdx.x; q < n;
         q += (long)gridDim.x * blockDim.x) {
        int k = (int)(q % n2);
        long r = q / n2;
        int j = (int)(r % n1), i = (int)(r / n1);
        long di = (i % 2 == 0) ? -sc0 : sc0;
        long dj = (j % 2 == 0) ? -sc1 : sc1;
        long dk = (k % 2 == 0) ? -1 : 1;
        long x = (i / 2 + gc) * sc0 + (j / 2 + gc) * sc1 + (k / 2 + gc);
        const double *c = coarse_u;
        double v = W0 * c[x] + W1 * (c[x + di] + c[x + dj] + c[x + dk])
            + W2 * (c[x + di + dj] + c[x + di + dk] + c[x + dj + dk]) + W3 * c[x + di + dj + dk];
        long xf = (i + gf) * sf0 + (j + gf) * sf1 + k + gf;
        fine_u[xf] += v;
    }
}

// Ghost plane `ghost` along axis d = sign * plane `inner`, over the whole
// padded cross-section (p = padded extents).
extern "C" __global__ void mg_reflect(double *u, int d, int ghost, int inner, double sign, int p0,
                                      int p1, int p2, long s0, long s1) {
    int p[3] = {p0, p1, p2};
    int a = (d + 1) % 3, b = (d + 2) % 3;
    long n = (long)p[a] * p[b];
    long s[3] = {s0, s1, 1};
    for (long q = blockIdx.x * (long)blockDim.x + threadIdx.x; q < n;
         q += (long)gridDim.x * blockDim.x) {
        long ia = q / p[b], ib = q % p[b];
        long base = ia * s[a] + ib * s[b];
        u[base + ghost * s[d]] = sign * u[base + inner * s[d]];
    }
}

// dst's cells of region db = src's cells of region sb (same shape).
extern "C" __global__ void mg_copy(double *dst, const double *src, const Box3 db, long ds0,
                                   long ds1, const Box3 sb, long ss0, long ss1) {
    long n = (long)db.n0 * db.n1 * db.n2;
    for (long q = blockIdx.x * (long)blockDim.x + threadIdx.x; q < n;
         q += (long)gridDim.x * blockDim.x) {
        dst[cell(db, q, ds0, ds1)] = src[cell(sb, q, ss0, ss1)];
    }
}

// Over region b: mode 0: x += alpha p; mode 1: p = z + beta p; mode 2:
// x += alpha p then p = z + beta p; mode 3: x -= alpha (a constant).
extern "C" __global__ void mg_axpy(int mode, double *x, double *p, const double *z,
                                   double alpha, double beta, const Box3 b, long s0, long s1) {
    long n = (long)b.n0 * b.n1 * b.n2;
    for (long q = blockIdx.x * (long)blockDim.x + threadIdx.x; q < n;
         q += (long)gridDim.x * blockDim.x) {
        long i = cell(b, q, s0, s1);
        switch (mode) {
        case 0: x[i] += alpha * p[i]; break;
        case 1: p[i] = z[i] + beta * p[i]; break;
        case 2: x[i] += alpha * p[i]; p[i] = z[i] + beta * p[i]; break;
        case 3: x[i] -= alpha; break;
        }
    }
}

// Exact sums (comm::exact::ExactSum's fixed-point limbs): limb k holds a
// multiple of 2^(32 k - 1074). LIMBS limbs, then five counts: NaN, +inf,
// -inf, -0.0, anything else. Mode 0: a[x] * b[x] (rounded, as the host);
// mode 1: a[x]; mode 2: |a[x]|.
//
// A finite value is at most 2^53 times 2^sh (sh < 32) in units of limb k:
// three signed 32-bit chunks added to limbs k, k + 1, k + 2. Each thread
// adds its values into a window of four limbs in registers, starting at
// limb kb (a value fits where k is kb or kb + 1; values of one thread
// mostly share a limb, which spans 32 binary orders), and moves the window
// into the block's limbs in shared memory when a value falls outside it;
// then each block adds its limbs to `out`. Bounds: at most 2^30 values
// (the caller's MAX_SUM_CELLS), chunks below 2^32 in magnitude: every sum
// stays below 2^62.
#define LIMBS 67
#define WORDS (LIMBS + 5)

__device__ __forceinline__ void flush_window(unsigned long long *acc, int kb, long long w0,
                                             long long w1, long long w2, long long w3) {
    if (w0) atomicAdd(&acc[kb], (unsigned long long)w0);
    if (w1) atomicAdd(&acc[kb + 1], (unsigned long long)w1);
    if (w2) atomicAdd(&acc[kb + 2], (unsigned long long)w2);
    if (w3) atomicAdd(&acc[kb + 3], (unsigned long long)w3);
}

// One thread's part of an exact sum: the window of limbs kb .. kb + 3 (kb
// <= 63: the largest exponent's limb is 63, so kb + 3 < LIMBS) and the
// count of "anything else".
struct Exact {
    int kb;
    long long w0, w1, w2, w3;
    unsigned long long others;
};

__device__ __forceinline__ Exact exact_new() {
    Exact e;
    e.kb = 0;
    e.w0 = e.w1 = e.w2 = e.w3 = 0;
    e.others = 0;
    return e;
}

// Adds v to the thread's window (the block's limbs `acc` take what leaves
// it, and the counts of NaN, infinities and -0.0).
__device__ __forceinline__ void exact_add(Exact *e, unsigned long long *acc, double v) {
    unsigned long long bits = (unsigned long long)__double_as_longlong(v);
    unsigned long long ex = (bits >> 52) & 0x7ff;
    if (ex == 0x7ff) {
        int w = (bits & 0xfffffffffffffull) ? 0 : ((bits >> 63) ? 2 : 1);
        atomicAdd(&acc[LIMBS + w], 1ull);
        e->others++;
        return;
    }
    if (bits == 0x8000000000000000ull) {
        atomicAdd(&acc[LIMBS + 3], 1ull);
        return;
    }
    e->others++;
    unsigned long long normal = ex != 0;
    unsigned long long m = (bits & 0xfffffffffffffull) | (normal << 52);
    if (m == 0) return;  // +0.0
    unsigned long long pos = ex - normal;
    int k = (int)(pos >> 5);
    int sh = (int)(pos & 31);
    // m << sh as three 32-bit chunks (m < 2^53, sh < 32: below 2^85).
    unsigned long long lo64 = m << sh;
    unsigned long long hi64 = sh ? (m >> (64 - sh)) : 0;
    long long c0 = (long long)(lo64 & 0xffffffffull);
    long long c1 = (long long)(lo64 >> 32);
    long long c2 = (long long)(hi64 & 0xffffffffull);
    if (bits >> 63) { c0 = -c0; c1 = -c1; c2 = -c2; }
    if (k != e->kb && k != e->kb + 1) {
        flush_window(acc, e->kb, e->w0, e->w1, e->w2, e->w3);
        e->w0 = e->w1 = e->w2 = e->w3 = 0;
        e->kb = k;
    }
    if (k == e->kb) {
        e->w0 += c0; e->w1 += c1; e->w2 += c2;
    } else {
        e->w1 += c0; e->w2 += c1; e->w3 += c2;
    }
}

// The thread's window into the block's limbs.
__device__ __forceinline__ void exact_flush(Exact *e, unsigned long long *acc) {
    flush_window(acc, e->kb, e->w0, e->w1, e->w2, e->w3);
    if (e->others) atomicAdd(&acc[LIMBS + 4], e->others);
}

// The block's limbs: zeroed before any thread adds (every thread calls
// both, around its grid-stride loop), added to `out` after.
__device__ __forceinline__ void exact_block_begin(unsigned long long *acc) {
    for (int t = threadIdx.x; t < WORDS; t += blockDim.x) acc[t] = 0;
    __syncthreads();
}

__device__ __forceinline__ void exact_block_end(unsigned long long *acc, unsigned long long *out) {
    __syncthreads();
    for (int t = threadIdx.x; t < WORDS; t += blockDim.x)
        if (acc[t]) atomicAdd(&out[t], acc[t]);
}

extern "C" __global__ void mg_exact_sum(unsigned long long *out, const double *a, const double *b,
                                        int mode, const Box3 box, long s0, long s1) {
    __shared__ unsigned long long acc[WORDS];
    exact_block_begin(acc);
    long n = (long)box.n0 * box.n1 * box.n2;
    Exact e = exact_new();
    for (long q = blockIdx.x * (long)blockDim.x + threadIdx.x; q < n;
         q += (long)gridDim.x * blockDim.x) {
        long i = cell(box, q, s0, s1);
        exact_add(&e, acc, mode == 0 ? a[i] * b[i] : (mode == 1 ? a[i] : fabs(a[i])));
    }
    exact_flush(&e, acc);
    exact_block_end(acc, out);
}

// Two exact sums in one pass: a b into out[0 .. WORDS), a c into
// out[WORDS .. 2 WORDS) (rounded products).
extern "C" __global__ void mg_exact_sum2(unsigned long long *out, const double *a, const double *b,
                                         const double *c, const Box3 box, long s0, long s1) {
    __shared__ unsigned long long acc[2][WORDS];
    exact_block_begin(acc[0]);
    exact_block_begin(acc[1]);
    long n = (long)box.n0 * box.n1 * box.n2;
    Exact e = exact_new(), g = exact_new();
    for (long q = blockIdx.x * (long)blockDim.x + threadIdx.x; q < n;
         q += (long)gridDim.x * blockDim.x) {
        long i = cell(box, q, s0, s1);
        double x = a[i];
        exact_add(&e, acc[0], x * b[i]);
        exact_add(&g, acc[1], x * c[i]);
    }
    exact_flush(&e, acc[0]);
    exact_flush(&g, acc[1]);
    exact_block_end(acc[0], out);
    exact_block_end(acc[1], out + WORDS);
}

// The operator with its dot product in one pass, over region b: with f,
// out = f - A u and the exact sum of out out (the residual's squared
// norm); without, out = A u and the exact sum of u out.
#define RESIDUAL_DOT(NAME, ARGS, APPLY)                                                          \
    extern "C" __global__ void NAME(double *out, const double *u, const double *f, ARGS,          \
                                    const Box3 b, long s0, long s1, unsigned long long *dot) {    \
        __shared__ unsigned long long acc[WORDS];                                                 \
        exact_block_begin(acc);                                                                   \
        Exact e = exact_new();                                                                    \
        long n = (long)b.n0 * b.n1 * b.n2;                                                        \
        for (long q = blockIdx.x * (long)blockDim.x + threadIdx.x; q < n;                         \
             q += (long)gridDim.x * blockDim.x) {                                                 \
            long kq = q % b.n2, r = q / b.n2;                                                     \
            int j = b.lo1 + (int)(r % b.n1), i = b.lo0 + (int)(r / b.n1);                         \
            int k = b.lo2 + (int)kq;                                                              \
            long x = i * s0 + j * s1 + k;                                                         \
            double au = APPLY(u, i, j, k, x, s0, s1);                                             \
            double o = f ? f[x] - au : au;                                                        \
            out[x] = o;                                                                           \
            exact_add(&e, acc, f ? o * o : u[x] * o);                                             \
        }                                                                                         \
        exact_flush(&e, acc);                                                                     \
        exact_block_end(acc, dot);                                                                \
    }
RESIDUAL_DOT(mg_residual_dot_var, VAR_ARGS, APPLY_VAR)
RESIDUAL_DOT(mg_residual_dot_const, CONST_ARGS, APPLY_CONST)

// r = o - alpha p over region b, and the exact sum of r r.
extern "C" __global__ void mg_update_dot(double *r, const double *o, const double *p, double alpha,
                                         const Box3 b, long s0, long s1, unsigned long long *dot) {
    __shared__ unsigned long long acc[WORDS];
    exact_block_begin(acc);
    Exact e = exact_new();
    long n = (long)b.n0 * b.n1 * b.n2;
    for (long q = blockIdx.x * (long)blockDim.x + threadIdx.x; q < n;
         q += (long)gridDim.x * blockDim.x) {
        long i = cell(b, q, s0, s1);
        double v = o[i] - alpha * p[i];
        r[i] = v;
        exact_add(&e, acc, v * v);
    }
    exact_flush(&e, acc);
    exact_block_end(acc, dot);
}

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
__device__ __forceinline__ double nb_var_w(double a0, double b0, double a1, double b1, double a2,
                                           double b2, double um0, double up0, double um1,
                                           double up1, double um2, double up2) {
    return (a0 * um0 + b0 * up0) + (a1 * um1 + b1 * up1) + (a2 * um2 + b2 * up2);
}

__device__ __forceinline__ double nb_var6(const double *w0, const double *w1, const double *w2,
                                          long x, long s0, long s1, double um0, double up0,
                                          double um1, double up1, double um2, double up2) {
    return nb_var_w(w0[x], w0[x + s0], w1[x], w1[x + s1], w2[x], w2[x + 1], um0, up0, um1, up1,
                    um2, up2);
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
    long ii, jj, kk;
    unflatten(q, b.n1, (b.n2 + 1) / 2, &ii, &jj, &kk);
    int j = b.lo1 + (int)jj;
    int i = b.lo0 + (int)ii;
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
// The same from the cell's right-hand side fx and diagonal d.
__device__ __forceinline__ double gs_var_d(double fx, double d, double old, double nb,
                                           double omega) {
    double inv = inv_of(d);
    double nv = relax(old, (fx + nb) * inv, omega);
    return inv == 0.0 ? 0.0 : nv;
}

__device__ __forceinline__ double gs_var(const double *f, const double *diag, long x,
                                         double old, double nb, double omega) {
    return gs_var_d(f[x], diag[x], old, nb, omega);
}

__device__ __forceinline__ double gs_const_v(double fx, CONST_ARGS, int i, int j, int k,
                                             double old, double nb, double omega) {
    double inv = 1.0 / diag_const(ih0, ih1, ih2, wall0, wall1, wall2, i, j, k);
    return relax(old, (fx + nb) * inv, omega);
}

__device__ __forceinline__ double gs_const(const double *f, CONST_ARGS, int i, int j, int k,
                                           long x, double old, double nb, double omega) {
    return gs_const_v(f[x], ih0, ih1, ih2, wall0, wall1, wall2, i, j, k, old, nb, omega);
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
// kernel reads `ua` and writes `ub` once. Each block of TK x TJ threads
// holds a tile of (TK - 2) x (TJ - 2) columns (k, j) of the box R = `own`
// grown by 1 on every side, with a 1-cell ring of threads around it, and
// marches along i through a chunk [a, b) of R's planes, one barrier a
// plane. At plane i a thread
//   1. starts loading its column's old value at plane i + 2 and `f` at
//      plane i + 1 (used one plane later, so that the loads are in flight
//      across the barrier), and puts its old value at plane i + 1 into
//      shared memory;
//   2. takes its cell's first-colour value: updated where the cell is in
//      `grown`, from its column's old values at planes i - 1 and i + 1
//      (registers) and its in-plane neighbours' at plane i (shared
//      memory, put there one plane earlier; a ring thread reads its
//      outward neighbour from `ua`); else the old value. It goes into
//      shared memory.
// After the barrier the tile's cells of plane i - 1 are final: a
// second-colour cell of `own` is updated from the first-colour values of
// planes i - 2 and i (registers) and of its in-plane neighbours at plane
// i - 1 (shared memory); every other cell keeps its value. Each cell of R
// is written to `ub` once, by the block whose tile holds it; cells
// outside R are not written. The values are those of the host's two
// passes, bit for bit: a first-colour cell reads only second-colour (old)
// values, a second-colour cell the first-colour values as updated, in the
// same operations and order (the ring's first-colour cells of
// neighbouring tiles and chunks are computed by each of them, from the
// same old values).
//
// Shared memory: two planes of old values (plane q in slot q & 1) and
// three of first-colour values (slots cycled with the planes). A slot is
// rewritten only after a barrier that follows its last read.
//
// The kernel is a per-thread state and three steps (`sweep_begin`, then
// per plane `sweep_first`, a barrier and `sweep_second`), so that the
// host emulation runs a block's threads step by step, as between the
// barriers. The work a thread does per plane is kept small (the column's
// offsets, colour and box tests are set once; the constant stencil
// divides only where its diagonal differs from the interior one): the
// sweep is bound by instructions as much as by memory.

#ifndef SWEEP_TK
#define SWEEP_TK 32
#endif
#ifndef SWEEP_TJ
#define SWEEP_TJ 8
#endif
// Blocks a multiprocessor should hold, with the variable and with the
// constant stencil (registers are limited to fit; the constant stencil
// needs fewer).
#ifndef SWEEP_MIN_BLOCKS_VAR
#define SWEEP_MIN_BLOCKS_VAR 4
#endif
#ifndef SWEEP_MIN_BLOCKS_CONST
#define SWEEP_MIN_BLOCKS_CONST 5
#endif

// The variable and the constant stencil as values for the sweep; `gs`
// takes the cell's right-hand side as a value.
struct SweepVar {
    const double *w0, *w1, *w2, *diag;
    __device__ __forceinline__ double nb(long x, long s0, long s1, double um0, double up0,
                                         double um1, double up1, double um2, double up2) const {
        return nb_var6(w0, w1, w2, x, s0, s1, um0, up0, um1, up1, um2, up2);
    }
    __device__ __forceinline__ double gs(double fx, int i, int j, int k, long x, double old,
                                         double nb, double omega) const {
        return gs_var_d(fx, diag[x], old, nb, omega);
    }
};

// The constant stencil's diagonal is 2 (ih0 + ih1 + ih2) plus the wall
// terms, which are 0 away from the walls: there the inverse is `inv_base`
// (the same division of the same value), elsewhere it is divided out.
struct SweepConst {
    double ih0, ih1, ih2;
    const double *wall0, *wall1, *wall2;
    double base, inv_base;
    __device__ __forceinline__ double nb(long x, long s0, long s1, double um0, double up0,
                                         double um1, double up1, double um2, double up2) const {
        return nb_const6(ih0, ih1, ih2, um0, up0, um1, up1, um2, up2);
    }
    __device__ __forceinline__ double gs(double fx, int i, int j, int k, long x, double old,
                                         double nb, double omega) const {
        double d = ((base + wall0[i]) + wall1[j]) + wall2[k];
        double inv = d == base ? inv_base : 1.0 / d;
        return relax(old, (fx + nb) * inv, omega);
    }
};

__device__ __forceinline__ SweepConst sweep_const_stencil(CONST_ARGS) {
    double base = 2.0 * (ih0 + ih1 + ih2);
    return SweepConst{ih0, ih1, ih2, wall0, wall1, wall2, base, 1.0 / base};
}

// A block's shared memory: old values of two planes, first-colour values
// of three.
template <int TK, int TJ> struct SweepShared {
    double old[2][TK * TJ];
    double first[3][TK * TJ];
};

// The sweep's geometry, the same for every thread; p0, p1, p2 the padded
// extents.
struct SweepGrid {
    Box3 own, grown;
    int p0, p1, p2;
    long s0, s1;
    int parity, first, chunk;
    double omega;
};

// One thread's registers: its slot t in the tile and column (j, k), the
// column's offset in the arrays, its colour parity, whether the column
// lies in `grown` and in `own` (axes 1 and 2), its chunk [a, b) of planes;
// at plane i: the first-colour slots of planes i and i - 1, old values at
// planes i - 1, i and i + 1, `f` at planes i - 1 and i, first-colour values
// at planes i - 2, i - 1 (and, between the steps, i); the loads in flight
// (old at i + 2, `f` at i + 1).
struct SweepThread {
    int t, tx, ty, j, k, a, b, cpar, fs, fsm;
    long col;
    bool pad, inner, gcol, ocol;
    double um, u0, up, fm, f0, below, mine, v, nu, nf;
};

// The column's value of `p` at plane i, 0 outside the padded array.
__device__ __forceinline__ double sweep_load(const double *p, const SweepGrid &g,
                                             const SweepThread &th, int i) {
    return th.pad && i >= 0 && i < g.p0 ? p[i * g.s0 + th.col] : 0.0;
}

// The thread (tx, ty) of block (bx, by, bz): its column and chunk, the
// first planes' values, and its old value at the chunk's first plane
// a - 1 into shared memory (a barrier must follow).
template <int TK, int TJ>
__device__ __forceinline__ SweepThread sweep_begin(const SweepGrid &g, SweepShared<TK, TJ> *sh,
                                                   const double *ua, const double *f, int bx,
                                                   int by, int bz, int tx, int ty) {
    SweepThread th;
    th.tx = tx;
    th.ty = ty;
    th.t = ty * TK + tx;
    th.j = g.own.lo1 - 2 + by * (TJ - 2) + ty;
    th.k = g.own.lo2 - 2 + bx * (TK - 2) + tx;
    th.col = (long)th.j * g.s1 + th.k;
    th.cpar = (g.parity + th.j + th.k + g.first) & 1;
    th.pad = th.j >= 0 && th.k >= 0 && th.j < g.p1 && th.k < g.p2;
    th.inner = tx >= 1 && tx <= TK - 2 && ty >= 1 && ty <= TJ - 2
        && th.j < g.own.lo1 + g.own.n1 + 1 && th.k < g.own.lo2 + g.own.n2 + 1;
    th.gcol = th.pad && th.j >= g.grown.lo1 && th.j < g.grown.lo1 + g.grown.n1
        && th.k >= g.grown.lo2 && th.k < g.grown.lo2 + g.grown.n2;
    th.ocol = th.j >= g.own.lo1 && th.j < g.own.lo1 + g.own.n1 && th.k >= g.own.lo2
        && th.k < g.own.lo2 + g.own.n2;
    int lo = g.own.lo0 - 1, hi = g.own.lo0 + g.own.n0 + 1;
    th.a = lo + bz * g.chunk;
    th.b = min(th.a + g.chunk, hi);
    th.um = sweep_load(ua, g, th, th.a - 2);
    th.u0 = sweep_load(ua, g, th, th.a - 1);
    th.up = sweep_load(ua, g, th, th.a);
    th.f0 = sweep_load(f, g, th, th.a - 1);
    th.fm = th.below = th.mine = th.v = th.nu = th.nf = 0.0;
    th.fs = 0;
    th.fsm = 2;
    sh->old[(th.a - 1) & 1][th.t] = th.u0;
    return th;
}

// Step 1 at plane i (after a barrier): the loads for the next plane, the
// old value of plane i + 1 into shared memory, the first-colour value of
// plane i into shared memory and th.v.
template <int TK, int TJ, class S>
__device__ __forceinline__ void sweep_first(SweepThread &th, SweepShared<TK, TJ> *sh,
                                            const double *ua, const double *f, const S &st,
                                            const SweepGrid &g, int i) {
    th.nu = sweep_load(ua, g, th, i + 2);
    th.nf = sweep_load(f, g, th, i + 1);
    sh->old[(i + 1) & 1][th.t] = th.up;
    double v = th.u0;
    if (th.gcol && ((i + th.cpar) & 1) == 0 && i >= g.grown.lo0
        && i < g.grown.lo0 + g.grown.n0) {
        const double *pl = sh->old[i & 1];
        long x = i * g.s0 + th.col;
        int t = th.t;
        double jm = th.ty > 0 ? pl[t - TK] : ua[x - g.s1];
        double jp = th.ty < TJ - 1 ? pl[t + TK] : ua[x + g.s1];
        double km = th.tx > 0 ? pl[t - 1] : ua[x - 1];
        double kp = th.tx < TK - 1 ? pl[t + 1] : ua[x + 1];
        v = st.gs(th.f0, i, th.j, th.k, x, th.u0,
                  st.nb(x, g.s0, g.s1, th.um, th.up, jm, jp, km, kp), g.omega);
    }
    sh->first[th.fs][th.t] = v;
    th.v = v;
}

// Step 2 at plane i (after the barrier): plane i - 1's cell into `ub`
// (a cell of the tile in R), then the registers move up one plane.
template <int TK, int TJ, class S>
__device__ __forceinline__ void sweep_second(SweepThread &th, const SweepShared<TK, TJ> *sh,
                                             double *ub, const S &st, const SweepGrid &g,
                                             int i) {
    int o = i - 1;
    if (o >= th.a && th.inner && th.pad) {
        long x = o * g.s0 + th.col;
        double w = th.mine;
        if (th.ocol && ((o + th.cpar) & 1) == 1 && o >= g.own.lo0
            && o < g.own.lo0 + g.own.n0) {
            const double *pl = sh->first[th.fsm];
            int t = th.t;
            double nb = st.nb(x, g.s0, g.s1, th.below, th.v, pl[t - TK], pl[t + TK], pl[t - 1],
                              pl[t + 1]);
            w = st.gs(th.fm, o, th.j, th.k, x, th.mine, nb, g.omega);
        }
        ub[x] = w;
    }
    th.below = th.mine;
    th.mine = th.v;
    th.um = th.u0;
    th.u0 = th.up;
    th.up = th.nu;
    th.fm = th.f0;
    th.f0 = th.nf;
    th.fsm = th.fs;
    th.fs = th.fs == 2 ? 0 : th.fs + 1;
}

// The whole sweep of one block: grid (tiles along k, tiles along j,
// chunks of planes), block (TK, TJ).
template <int TK, int TJ, class S>
__device__ __forceinline__ void sweep_block(double *ub, const double *ua, const double *f,
                                            const S &st, const SweepGrid &g) {
    __shared__ SweepShared<TK, TJ> sh;
    SweepThread th = sweep_begin<TK, TJ>(g, &sh, ua, f, blockIdx.x, blockIdx.y, blockIdx.z,
                                         threadIdx.x, threadIdx.y);
    __syncthreads();
    for (int i = th.a - 1; i <= th.b; i++) {
        sweep_first<TK, TJ, S>(th, &sh, ua, f, st, g, i);
        __syncthreads();
        sweep_second<TK, TJ, S>(th, &sh, ub, st, g, i);
    }
}

#define SWEEP_PARAMS                                                                              \
    const Box3 own, const Box3 grown, int p0, int p1, int p2, long s0, long s1, int parity,      \
        int first, double omega, int chunk
#define SWEEP_GRID SweepGrid{own, grown, p0, p1, p2, s0, s1, parity, first, chunk, omega}

extern "C" __global__ void __launch_bounds__(SWEEP_TK * SWEEP_TJ, SWEEP_MIN_BLOCKS_VAR)
    mg_sweep_var(double *ub, const double *ua, const double *f, VAR_ARGS, SWEEP_PARAMS) {
    sweep_block<SWEEP_TK, SWEEP_TJ>(ub, ua, f, SweepVar{w0, w1, w2, diag}, SWEEP_GRID);
}

extern "C" __global__ void __launch_bounds__(SWEEP_TK * SWEEP_TJ, SWEEP_MIN_BLOCKS_CONST)
    mg_sweep_const(double *ub, const double *ua, const double *f, CONST_ARGS, SWEEP_PARAMS) {
    sweep_block<SWEEP_TK, SWEEP_TJ>(
        ub, ua, f, sweep_const_stencil(ih0, ih1, ih2, wall0, wall1, wall2), SWEEP_GRID);
}

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
            long ci_, cj_, ck_;                                                                   \
            unflatten(q, n1, n2, &ci_, &cj_, &ck_);                                               \
            int ci = (int)ci_, cj = (int)cj_, ck = (int)ck_;                                      \
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
        long i_, j_, k_;
        unflatten(q, n1, n2, &i_, &j_, &k_);
        int i = (int)i_, j = (int)j_, k = (int)k_;
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
// keeps its values in an expansion in registers (`Exact`) and moves into
// the block's limbs in shared memory only what the expansion cannot hold
// exactly, and at its end the expansion (merged with the rest of its
// warp's); then each block adds its limbs to `out`. Bounds: every value
// deposits its chunks (each below 2^32 in magnitude) at most once, as
// itself or as the error it leaves, and each thread at most 24 more times
// (the errors left by five merges of four terms, and four terms at the
// end); with at most 2^30 values (the caller's MAX_SUM_CELLS) and fewer
// than 2^24 threads, every limb's sum stays below 2^63. Every block has a
// whole number of warps (the merge shuffles across all 32 lanes).
#define LIMBS 67
#define WORDS (LIMBS + 5)

// Adds the finite value v, exactly, to the block's limbs (its three
// chunks; nothing for +-0).
__device__ __forceinline__ void limbs_add(unsigned long long *acc, double v) {
    unsigned long long bits = (unsigned long long)__double_as_longlong(v);
    unsigned long long ex = (bits >> 52) & 0x7ff;
    unsigned long long normal = ex != 0;
    unsigned long long m = (bits & 0xfffffffffffffull) | (normal << 52);
    if (m == 0) return;
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
    if (c0) atomicAdd(&acc[k], (unsigned long long)c0);
    if (c1) atomicAdd(&acc[k + 1], (unsigned long long)c1);
    if (c2) atomicAdd(&acc[k + 2], (unsigned long long)c2);
}

// One thread's part of an exact sum: an expansion of four doubles whose
// exact sum is that of the values added so far (less what went to the
// block's limbs), and its counts of NaN, +inf, -inf, -0.0 and anything
// else. A value goes through the terms by error-free additions (Knuth's
// two-sum: s + e is exactly a + b, with no overflow), each term keeping
// the rounded sum and passing the error on; what is left after the last
// term, or a value whose addition would overflow, goes to the block's
// limbs. Values of a few widely separated magnitudes thus stay in
// registers.
struct Exact {
    double t0, t1, t2, t3;
    unsigned long long nan, pinf, ninf, nzero, others;
};

__device__ __forceinline__ Exact exact_new() {
    Exact e;
    e.t0 = e.t1 = e.t2 = e.t3 = 0.0;
    e.nan = e.pinf = e.ninf = e.nzero = e.others = 0;
    return e;
}

// x is finite (not an infinity or NaN).
__device__ __forceinline__ bool finite_value(double x) {
    return x - x == 0.0;
}

// t = the rounded t + x, x = the error; false (nothing changed) where the
// addition is not exact in two doubles (an overflow).
__device__ __forceinline__ bool two_sum(double *t, double *x) {
    double a = *t, b = *x;
    double s = a + b;
    double bb = s - a;
    double err = (a - (s - bb)) + (b - bb);
    if (!finite_value(s) || !finite_value(err)) return false;
    *t = s;
    *x = err;
    return true;
}

// Adds the finite value x to the expansion; what it cannot hold goes to
// the block's limbs.
__device__ __forceinline__ void exact_insert(Exact *e, unsigned long long *acc, double x) {
    if (x == 0.0) return;
    if (two_sum(&e->t0, &x) && (x == 0.0 || (two_sum(&e->t1, &x)
        && (x == 0.0 || (two_sum(&e->t2, &x) && (x == 0.0 || two_sum(&e->t3, &x)))))))
        if (x == 0.0) return;
    limbs_add(acc, x);
}

// Adds v to the thread's part.
__device__ __forceinline__ void exact_add(Exact *e, unsigned long long *acc, double v) {
    unsigned long long bits = (unsigned long long)__double_as_longlong(v);
    if (((bits >> 52) & 0x7ff) == 0x7ff) {
        if (bits & 0xfffffffffffffull) e->nan++;
        else if (bits >> 63) e->ninf++;
        else e->pinf++;
        e->others++;
        return;
    }
    if (bits == 0x8000000000000000ull) {
        e->nzero++;
        return;
    }
    e->others++;
    exact_insert(e, acc, v);
}

// The thread's part into the block's limbs. Every thread of the block
// calls it: the parts of a warp are first merged into its first lane's
// (term by term, exactly), which alone adds to the limbs, so that the
// block's limbs take few atomic additions.
__device__ __forceinline__ void exact_flush(Exact *e, unsigned long long *acc) {
#ifndef MG_EMULATE
    const unsigned full = 0xffffffffu;
    int lane = threadIdx.x & 31;
    for (int d = 16; d >= 1; d >>= 1) {
        double y0 = __shfl_down_sync(full, e->t0, d), y1 = __shfl_down_sync(full, e->t1, d);
        double y2 = __shfl_down_sync(full, e->t2, d), y3 = __shfl_down_sync(full, e->t3, d);
        unsigned long long c0 = __shfl_down_sync(full, e->nan, d);
        unsigned long long c1 = __shfl_down_sync(full, e->pinf, d);
        unsigned long long c2 = __shfl_down_sync(full, e->ninf, d);
        unsigned long long c3 = __shfl_down_sync(full, e->nzero, d);
        unsigned long long c4 = __shfl_down_sync(full, e->others, d);
        if (lane < d) {
            exact_insert(e, acc, y0);
            exact_insert(e, acc, y1);
            exact_insert(e, acc, y2);
            exact_insert(e, acc, y3);
            e->nan += c0;
            e->pinf += c1;
            e->ninf += c2;
            e->nzero += c3;
            e->others += c4;
        }
    }
    if (lane != 0) return;
#endif
    limbs_add(acc, e->t0);
    limbs_add(acc, e->t1);
    limbs_add(acc, e->t2);
    limbs_add(acc, e->t3);
    if (e->nan) atomicAdd(&acc[LIMBS], e->nan);
    if (e->pinf) atomicAdd(&acc[LIMBS + 1], e->pinf);
    if (e->ninf) atomicAdd(&acc[LIMBS + 2], e->ninf);
    if (e->nzero) atomicAdd(&acc[LIMBS + 3], e->nzero);
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
            long iq, jq, kq;                                                                      \
            unflatten(q, b.n1, b.n2, &iq, &jq, &kq);                                              \
            int i = b.lo0 + (int)iq, j = b.lo1 + (int)jq, k = b.lo2 + (int)kq;                    \
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

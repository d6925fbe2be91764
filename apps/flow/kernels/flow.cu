// The flow step's own kernels (flow's `cuda` feature; the solves are
// multigrid's). Each does, per point, the IEEE operations of the host code
// in `src/solver.rs` in the same order (compiled without contraction into
// fused multiply-adds), so the device and the host give the same bits.
//
// Fields are padded arrays (last axis fastest, ghost width g per axis,
// strides s0, s1, 1); the geometry arrays cover the block and one ghost
// layer (strides gs0, gs1, 1). Thread q handles owned point q, row-major.

struct Span {
    int n0, n1, n2;  // owned extent
    int g0, g1, g2;  // ghost width of the fields
    long s0, s1;     // field strides
    long gs0, gs1;   // geometry strides
};

// The field and geometry offsets of owned point q.
__device__ __forceinline__ void point(const Span sp, long q, long *x, long *gi) {
    long k = q % sp.n2;
    long r = q / sp.n2;
    long j = r % sp.n1;
    long i = r / sp.n1;
    *x = (i + sp.g0) * sp.s0 + (j + sp.g1) * sp.s1 + k + sp.g2;
    *gi = (i + 1) * sp.gs0 + (j + 1) * sp.gs1 + k + 1;
}

#define FOR_POINTS(sp)                                                                  \
    long n_ = (long)(sp).n0 * (sp).n1 * (sp).n2;                                        \
    for (long q = blockIdx.x * (long)blockDim.x + threadIdx.x; q < n_;                  \
         q += (long)gridDim.x * blockDim.x)

// The centred advective term (u . grad) u_d at the fluid points of
// component d, 0 elsewhere (`Flow::advection`); ghosts of u current.
extern "C" __global__ void flow_advection(double *out, const double *u0, const double *u1,
                                          const double *u2, const unsigned char *fluid, int d,
                                          double ih2, const Span sp) {
    const double *u[3] = {u0, u1, u2};
    const long s[3] = {sp.s0, sp.s1, 1};
    const double *ud = u[d];
    FOR_POINTS(sp) {
        long x, gi;
        point(sp, q, &x, &gi);
        if (!fluid[gi]) {
            out[x] = 0.0;
            continue;
        }
        double n = 0.0;
        for (int e = 0; e < 3; e++) {
            const double *ue = u[e];
            double adv;
            if (e == d) {
                adv = ud[x];
            } else {
                adv = 0.25 * ((ue[x] + ue[x + s[e]]) + (ue[x - s[d]] + ue[x - s[d] + s[e]]));
            }
            n += adv * (ud[x + s[e]] - ud[x - s[e]]) * ih2;
        }
        out[x] = n;
    }
}

// The right-hand side of the momentum solve of component d: mode 0 Stokes,
// 1 forward Euler, 2 Adams-Bashforth 2 (`Flow::step`).
extern "C" __global__ void flow_momentum_rhs(double *r, const double *ud, const double *p,
                                             const double *nl, const double *no,
                                             const unsigned char *fluid, const double *weight,
                                             int d, int mode, double dt, double h, double f,
                                             const Span sp) {
    const long sd = d == 0 ? sp.s0 : (d == 1 ? sp.s1 : 1);
    FOR_POINTS(sp) {
        long x, gi;
        point(sp, q, &x, &gi);
        if (fluid[gi]) {
            double n = mode == 0 ? 0.0 : (mode == 2 ? 1.5 * nl[x] - 0.5 * no[x] : nl[x]);
            r[x] = ud[x] / dt - (p[x] - p[x - sd]) / h - n + f * weight[gi];
        } else {
            r[x] = 0.0;
        }
    }
}

// The projection's right-hand side -div(A u*) / (h dt) per cell; ghosts of
// u* current.
extern "C" __global__ void flow_divergence(double *r, const double *us0, const double *us1,
                                           const double *us2, const double *ap0,
                                           const double *ap1, const double *ap2, double scale,
                                           const Span sp) {
    const double *us[3] = {us0, us1, us2};
    const double *ap[3] = {ap0, ap1, ap2};
    const long s[3] = {sp.s0, sp.s1, 1};
    const long gs[3] = {sp.gs0, sp.gs1, 1};
    FOR_POINTS(sp) {
        long x, gi;
        point(sp, q, &x, &gi);
        double div = 0.0;
        for (int d = 0; d < 3; d++) {
            div += ap[d][gi + gs[d]] * us[d][x + s[d]] - ap[d][gi] * us[d][x];
        }
        r[x] = div * scale;
    }
}

// The block's maximum of v (>= 0, or NaN, which fmax drops as the host's
// f64::max does) into *out, as the bits of a non-negative double (ordered
// as integers).
__device__ __forceinline__ void block_max(double v, unsigned long long *out) {
    __shared__ double w[32];
    for (int o = 16; o > 0; o >>= 1) v = fmax(v, __shfl_down_sync(0xffffffffu, v, o));
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) w[warp] = v;
    __syncthreads();
    if (warp == 0) {
        int warps = (blockDim.x + 31) >> 5;
        v = lane < warps ? w[lane] : 0.0;
        for (int o = 16; o > 0; o >>= 1) v = fmax(v, __shfl_down_sync(0xffffffffu, v, o));
        if (lane == 0) atomicMax(out, (unsigned long long)__double_as_longlong(v));
    }
}

// u_d = u*_d - dt grad_d phi at the fluid points (0 elsewhere), and the
// maxima of |u_d^{n+1} - u_d^n| (out[0]) and |u_d^{n+1}| (out[1]); ghosts
// of phi current. Launched with a multiple of 32 threads a block.
extern "C" __global__ void flow_correct(double *un, const double *us, const double *ph,
                                        const unsigned char *fluid, int d, double dt, double h,
                                        unsigned long long *out, const Span sp) {
    const long sd = d == 0 ? sp.s0 : (d == 1 ? sp.s1 : 1);
    double change = 0.0, umax = 0.0;
    FOR_POINTS(sp) {
        long x, gi;
        point(sp, q, &x, &gi);
        double v = fluid[gi] ? us[x] - dt * (ph[x] - ph[x - sd]) / h : 0.0;
        change = fmax(change, fabs(v - un[x]));
        umax = fmax(umax, fabs(v));
        un[x] = v;
    }
    block_max(change, &out[0]);
    __syncthreads();
    block_max(umax, &out[1]);
}

// p += phi (+ c r with the rotational update) over the whole padded array.
extern "C" __global__ void flow_pressure(double *p, const double *phi, const double *r, double c,
                                         int rotational, long len) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < len;
         i += (long)gridDim.x * blockDim.x) {
        if (rotational) {
            p[i] += phi[i] + c * r[i];
        } else {
            p[i] += phi[i];
        }
    }
}

// heat3d's own device kernels on a padded field (one component, last axis
// fastest): the Runge-Kutta stage combinations and the spectral step's
// scaling. The stencil sweeps are the `stencil` crate's
// (stencil/kernels/star.cu). `Box3` and `cell` come from halo's
// region.cuh, which precedes this source (`halo::DeviceRegion::SOURCE`).
// Compiled with --fmad=false: each value gets the bits the host computes.

// The Runge-Kutta stage combinations on the owned cells:
// mode 0: a = u + h b, c = b
// mode 1: a = u + h b, c = c + g b
// mode 2: u = u + h (c + b)
extern "C" __global__ void rk_combine(int mode, double* __restrict__ u, double* __restrict__ a,
                                      const double* __restrict__ bb, double* __restrict__ c,
                                      double h, double g, const Box3 b, long s0, long s1,
                                      int step, int* __restrict__ bad) {
    long n = (long)b.n0 * b.n1 * b.n2;
    bool finite = true;
    for (long t = blockIdx.x * (long)blockDim.x + threadIdx.x; t < n;
         t += (long)gridDim.x * blockDim.x) {
        long q = cell(b, t, s0, s1);
        double v;
        if (mode == 0) {
            v = u[q] + h * bb[q];
            a[q] = v;
            c[q] = bb[q];
        } else if (mode == 1) {
            v = u[q] + h * bb[q];
            a[q] = v;
            c[q] += g * bb[q];
        } else {
            v = u[q] + h * (c[q] + bb[q]);
            u[q] = v;
            finite &= isfinite(v);
        }
    }
    if (!finite) atomicMin(bad, step);
}

// Spectral step: each mode times its factor (which includes 1/N). A
// non-finite value in the real field makes every mode of its transform
// non-finite, so the check of the modes read here flags a bad field at the
// forward transform of `step` (the field that step started from).
extern "C" __global__ void spectral_scale(double2* __restrict__ s, const double* __restrict__ f,
                                          long n, int step, int* __restrict__ bad) {
    bool finite = true;
    for (long t = blockIdx.x * (long)blockDim.x + threadIdx.x; t < n;
         t += (long)gridDim.x * blockDim.x) {
        double2 v = s[t];
        finite &= isfinite(v.x) && isfinite(v.y);
        double m = f[t];
        v.x *= m;
        v.y *= m;
        s[t] = v;
    }
    if (!finite) atomicMin(bad, step);
}

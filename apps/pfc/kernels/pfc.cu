// PFC kernels: the pointwise parts of the semi-implicit step on one GPU
// (apps/pfc/src/device.rs); the transforms are cuFFT's D2Z and Z2D of the
// whole row-major n0 x n1 x n2 grid, the spectrum cuFFT's half spectrum
// [n0][n1][n2 / 2 + 1].
//
// Each kernel performs the host code's operations in its order
// (apps/pfc/src/lib.rs, `Solver::step`), and the module is compiled with
// --fmad=false; the results still differ from the host's in the last bits
// because cuFFT and the host FFT round differently and the 1/N of the
// backward transform is folded into the update factor here.

// out = psi^3, computed as (psi * psi) * psi like the host.
extern "C" __global__ void cube(const double* __restrict__ psi, double* __restrict__ out,
                                long n) {
    for (long t = blockIdx.x * (long)blockDim.x + threadIdx.x; t < n;
         t += (long)gridDim.x * blockDim.x) {
        double p = psi[t];
        out[t] = p * p * p;
    }
}

// The semi-implicit update of each mode, in place:
//   nonlinear: s = (s - sn a) f,   linear only: s = s f,
// with a = dt k^2 and f = 1 / (1 + dt k^2 (r + (1 - k^2)^2)) / N (the 1/N
// that cuFFT's Z2D leaves out). At k = 0, a = 0 and f = 1 / N, so the mean
// is kept.
//
// Non-finite values: a non-finite value in a real field makes every mode of
// its transform non-finite. A non-finite mode read from `s` means the field
// this step started from (written by step - 1) was non-finite; a non-finite
// mode written means this step's field will be. `bad` receives the smallest
// such step.
extern "C" __global__ void update(double2* __restrict__ s, const double2* __restrict__ sn,
                                  const double* __restrict__ a, const double* __restrict__ f,
                                  long n, int nonlinear, unsigned long long step,
                                  unsigned long long* __restrict__ bad) {
    bool read_ok = true;
    bool wrote_ok = true;
    for (long t = blockIdx.x * (long)blockDim.x + threadIdx.x; t < n;
         t += (long)gridDim.x * blockDim.x) {
        double2 v = s[t];
        read_ok &= isfinite(v.x) && isfinite(v.y);
        double m = f[t];
        if (nonlinear) {
            double2 w = sn[t];
            double c = a[t];
            v.x = (v.x - w.x * c) * m;
            v.y = (v.y - w.y * c) * m;
        } else {
            v.x *= m;
            v.y *= m;
        }
        wrote_ok &= isfinite(v.x) && isfinite(v.y);
        s[t] = v;
    }
    if (!read_ok) {
        atomicMin(bad, step - 1);
    } else if (!wrote_ok) {
        atomicMin(bad, step);
    }
}

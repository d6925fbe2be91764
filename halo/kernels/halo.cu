// Halo transfers of one component of a padded field (last axis fastest).
// `REAL` is replaced by the element type before compilation. One thread per
// cell of the region; the region's cells are numbered row-major.

// `Box3` and `cell` come from region.cuh, which precedes this source.

// out[q] = field[region cell q]
extern "C" __global__ void halo_pack(const REAL* __restrict__ field, REAL* __restrict__ out,
                                     Box3 b, long s0, long s1) {
    long n = (long)b.n0 * b.n1 * b.n2;
    for (long q = blockIdx.x * (long)blockDim.x + threadIdx.x; q < n;
         q += (long)gridDim.x * blockDim.x) {
        out[q] = field[cell(b, q, s0, s1)];
    }
}

// field[region cell q] = in[q]
extern "C" __global__ void halo_unpack(REAL* __restrict__ field, const REAL* __restrict__ in,
                                       Box3 b, long s0, long s1) {
    long n = (long)b.n0 * b.n1 * b.n2;
    for (long q = blockIdx.x * (long)blockDim.x + threadIdx.x; q < n;
         q += (long)gridDim.x * blockDim.x) {
        field[cell(b, q, s0, s1)] = in[q];
    }
}

// field[dst cell q] = field[src cell q]; the two regions are disjoint.
extern "C" __global__ void halo_copy(REAL* field, Box3 src, Box3 dst, long s0, long s1) {
    long n = (long)src.n0 * src.n1 * src.n2;
    for (long q = blockIdx.x * (long)blockDim.x + threadIdx.x; q < n;
         q += (long)gridDim.x * blockDim.x) {
        field[cell(dst, q, s0, s1)] = field[cell(src, q, s0, s1)];
    }
}

// Up to 26 disjoint copies at once: field[dst[p] cell q] = field[src[p] cell q],
// pair p owning the threads from start[p] to start[p + 1].
struct Copies {
    Box3 src[26];
    Box3 dst[26];
    long start[27];
    int count;
};

extern "C" __global__ void halo_copy_many(REAL* field, const Copies c, long s0, long s1) {
    long n = c.start[c.count];
    for (long t = blockIdx.x * (long)blockDim.x + threadIdx.x; t < n;
         t += (long)gridDim.x * blockDim.x) {
        int p = 0;
        while (t >= c.start[p + 1]) ++p;
        long q = t - c.start[p];
        field[cell(c.dst[p], q, s0, s1)] = field[cell(c.src[p], q, s0, s1)];
    }
}

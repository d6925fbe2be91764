// Pack and unpack of the blocks a reshape moves (dfft::cuda::DeviceFft3d).
// A block is nested: counts n[0] (slowest) .. n[2] (fastest) with strides
// s[] in elements of `esize` doubles, starting at element `off`; in the
// message it is contiguous, starting at element `at`.

struct Block {
    long off;
    long n[3];
    long s[3];
    long at;
};

// The array element (in elements of `esize` doubles, times `esize`, plus
// the double within it) that message double `t` of block `b` belongs to.
__device__ long block_cell(const Block& b, long t, int esize) {
    long e = t % esize;
    long q = t / esize;
    long i2 = q % b.n[2];
    long r = q / b.n[2];
    long i1 = r % b.n[1];
    long i0 = r / b.n[1];
    return (b.off + i0 * b.s[0] + i1 * b.s[1] + i2 * b.s[2]) * esize + e;
}

extern "C" __global__ void dfft_pack(const double* __restrict__ src, double* __restrict__ msg,
                                     Block b, int esize) {
    long total = b.n[0] * b.n[1] * b.n[2] * esize;
    for (long t = blockIdx.x * (long)blockDim.x + threadIdx.x; t < total;
         t += (long)gridDim.x * blockDim.x) {
        msg[b.at * esize + t] = src[block_cell(b, t, esize)];
    }
}

extern "C" __global__ void dfft_unpack(const double* __restrict__ msg, double* __restrict__ dst,
                                       Block b, int esize) {
    long total = b.n[0] * b.n[1] * b.n[2] * esize;
    for (long t = blockIdx.x * (long)blockDim.x + threadIdx.x; t < total;
         t += (long)gridDim.x * blockDim.x) {
        dst[block_cell(b, t, esize)] = msg[b.at * esize + t];
    }
}

// A region of a padded field (last axis fastest) as kernels take it: the
// first padded index and the extent per axis (`halo::DeviceRegion`), and the
// offset of its cell number q (row-major over the region).

struct Box3 {
    int lo0, lo1, lo2;
    int n0, n1, n2;
};

__device__ __forceinline__ long cell(const Box3 b, long q, long s0, long s1) {
    long k = q % b.n2;
    long r = q / b.n2;
    long j = r % b.n1;
    long i = r / b.n1;
    return (b.lo0 + i) * s0 + (b.lo1 + j) * s1 + b.lo2 + k;
}

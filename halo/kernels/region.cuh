// A region of a padded field (last axis fastest) as kernels take it: the
// first padded index and the extent per axis (`halo::DeviceRegion`), and the
// offset of its cell number q (row-major over the region).

struct Box3 {
    int lo0, lo1, lo2;
    int n0, n1, n2;
};

// Cell number q of a box of n0 x n1 x n2 cells (row-major) as its indices
// (i, j, k); in 32-bit arithmetic where q fits (division is far cheaper
// there), else in 64-bit.
__device__ __forceinline__ void unflatten(long q, int n1, int n2, long *i, long *j, long *k) {
    if ((unsigned long long)q <= 0xffffffffull) {
        unsigned qq = (unsigned)q, m1 = (unsigned)n1, m2 = (unsigned)n2;
        unsigned r = qq / m2;
        *k = qq - r * m2;
        unsigned ii = r / m1;
        *j = r - ii * m1;
        *i = ii;
    } else {
        long r = q / n2;
        *k = q - r * n2;
        *i = r / n1;
        *j = r - *i * n1;
    }
}

__device__ __forceinline__ long cell(const Box3 b, long q, long s0, long s1) {
    long i, j, k;
    unflatten(q, b.n1, b.n2, &i, &j, &k);
    return (b.lo0 + i) * s0 + (b.lo1 + j) * s1 + b.lo2 + k;
}

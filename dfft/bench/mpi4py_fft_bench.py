"""mpi4py-fft's distributed 3D FFT, timed as HeFFTe's speed3d and dfft's
dist_bench time theirs: an N^3 grid over the MPI world (mpi4py-fft's default
decomposition and its FFTW backend), one warm-up forward + backward, then
REPS repeats of barrier, forward, backward, barrier; a repeat's time is the
slowest rank's, halved. Prints one JSON object on rank 0.

mpirun -np 2 python3 mpi4py_fft_bench.py N KIND REPS   (KIND c2c or r2c)
"""
import json
import sys
import time

import numpy as np
from mpi4py import MPI
from mpi4py_fft import PFFT, newDistArray


def main():
    n, kind, reps = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    comm = MPI.COMM_WORLD
    dtype = np.complex128 if kind == "c2c" else np.float64
    fft = PFFT(comm, (n, n, n), dtype=dtype, backend="fftw")
    u = newDistArray(fft, False)
    rng = np.random.default_rng(comm.rank)
    if kind == "c2c":
        u[:] = rng.random(u.shape) + 1j * rng.random(u.shape)
    else:
        u[:] = rng.random(u.shape)
    u0 = u.copy()
    u_hat = newDistArray(fft, True)
    u_hat = fft.forward(u, u_hat)
    u = fft.backward(u_hat, u)
    times = []
    for _ in range(reps):
        comm.Barrier()
        t = time.perf_counter()
        u_hat = fft.forward(u, u_hat)
        u = fft.backward(u_hat, u)
        comm.Barrier()
        times.append(comm.allreduce((time.perf_counter() - t) / 2.0, op=MPI.MAX))
    err = comm.allreduce(float(np.max(np.abs(u - u0))), op=MPI.MAX)
    if comm.rank == 0:
        times.sort()
        print(json.dumps({"kind": kind, "n": n, "ranks": comm.size,
                          "best_s": times[0], "median_s": times[len(times) // 2],
                          "round_trip_error": err}))


main()

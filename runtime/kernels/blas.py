"""The numpy kernels' BLAS threads (matrix products, convolutions, grouped convolutions).

numpy's OpenBLAS starts one thread per core and splits every product above a small size among
them, its threads spinning between calls. A server runs requests concurrently and onnxruntime
runs its own pools: on a busy two-core machine a 32 x 960 x 960 x 320 product took 31 ms split
this way and 0.3 ms on one thread. ``set_blas_threads`` sets the count for the whole process, as
TF's ``intra_op_parallelism_threads`` does for its kernels; ``model_server`` calls it at start.
"""

from __future__ import annotations


def set_blas_threads(threads: int) -> None:
    """Every BLAS library numpy loaded uses at most ``threads`` threads from now on."""
    from threadpoolctl import threadpool_limits  # (only a process that chooses pays its import)

    threadpool_limits(limits=max(1, threads), user_api="blas")

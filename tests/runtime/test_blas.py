"""``set_blas_threads``: the numpy kernels' BLAS pool has the size asked for, process-wide."""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from runtime.kernels.blas import set_blas_threads


def blas_threads() -> list[int]:
    return [info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"]


@pytest.mark.parametrize("threads", [1, 2])
def test_the_blas_pool_takes_the_count_asked_for(threads):
    np.ones((2, 2)) @ np.ones((2, 2))  # (numpy's BLAS is loaded)
    assert blas_threads(), "numpy's BLAS is not visible to threadpoolctl"
    with threadpool_limits(limits=None):  # restores the original counts on exit
        set_blas_threads(threads)
        assert set(blas_threads()) == {threads}
        set_blas_threads(0)  # at least one
        assert set(blas_threads()) == {1}

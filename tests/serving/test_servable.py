"""``serving/lifecycle/servable.py``'s thread rules, table-driven."""

from __future__ import annotations

import pytest

from serving.inference.bundles import blas_threads
from serving.options import ServerOptions


@pytest.mark.parametrize(
    ("intra", "session", "threads"),
    [(0, 0, 1), (4, 0, 4), (0, 2, 2), (3, 2, 3)],
)
def test_blas_threads_follow_tf_intra_op_parallelism_else_one(intra, session, threads):
    options = ServerOptions(tensorflow_intra_op_parallelism=intra, tensorflow_session_parallelism=session)
    assert blas_threads(options) == threads

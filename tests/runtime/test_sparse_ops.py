"""Sparse, feature-column and ragged ops (``sparse_ops``, ``sparse_cross_ops``, ``ragged_ops``)
against TensorFlow: SparseReshape, SparseFillEmptyRows, sparse segment reductions, SparseToDense,
SparseTensorDenseMatMul, SparseReorder, SparseReduceSum, the SparseCross family (TF's
FingerprintCat64 hashing) and the ragged conversions.

TF's side: ``tests/oracle/builders/breadth_records.py``; shared checks in ``test_parsing_ops``.
"""

from __future__ import annotations

import pytest

from tests.runtime.test_parsing_ops import check_record, check_record_through_session, records_of

SPARSE = records_of("sparse_ops", "sparse_cross_ops", "ragged_ops")


@pytest.mark.parametrize("record", SPARSE, ids=lambda r: r.name)
def test_sparse_record(record) -> None:
    check_record(record)


@pytest.mark.parametrize("record", SPARSE, ids=lambda r: r.name)
def test_sparse_record_through_session(record) -> None:
    check_record_through_session(record)


def test_sparse_records_cover_the_ops() -> None:
    ops = {r.op for r in SPARSE}
    wanted = {
        "SparseReshape", "SparseFillEmptyRows", "SparseSegmentSum", "SparseSegmentMean", "SparseSegmentSqrtN",
        "SparseSegmentSumWithNumSegments", "SparseSegmentMeanWithNumSegments",
        "SparseSegmentSqrtNWithNumSegments", "SparseToDense", "SparseTensorDenseMatMul", "SparseReorder",
        "SparseReduceSum", "SparseCross", "SparseCrossV2", "SparseCrossHashed", "RaggedTensorToTensor",
        "RaggedTensorToSparse", "RaggedRange", "RaggedBincount", "SparseBincount",
    }  # fmt: skip
    assert wanted <= ops, sorted(wanted - ops)

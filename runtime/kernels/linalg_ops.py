"""Linear-algebra kernels: MatMul, BatchMatMul (V1-V3), Einsum, band and diagonal ops, and the small
dense solvers (Cholesky, MatrixInverse, MatrixDeterminant, MatrixTriangularSolve).

Half and bfloat16 products accumulate in float32, as TF's CPU kernels do.
"""

from __future__ import annotations

import numpy as np

from runtime import dtypes
from runtime.kernels.math_ops import _low_precision, invalid, out, shape_str
from runtime.kernels.registry import kernel


def _acc(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32) if _low_precision(x.dtype) else x


@kernel("MatMul")
def mat_mul(a, b, *, transpose_a=False, transpose_b=False, grad_a=False, grad_b=False):
    if a.ndim != 2 or b.ndim != 2:
        raise invalid(f"In[0] and In[1] has different ndims: {shape_str(a.shape)} vs. {shape_str(b.shape)}")
    x = a.T if transpose_a else a
    y = b.T if transpose_b else b
    if x.shape[1] != y.shape[0]:
        raise invalid(f"Matrix size-incompatible: In[0]: {shape_str(a.shape)}, In[1]: {shape_str(b.shape)}")
    # No np.errstate of its own (1 us a call): Session runs every non-quiet plan under one.
    result = np.matmul(_acc(x), _acc(y))
    return result if result.dtype == a.dtype else out(result, a.dtype)


def _batch_mat_mul(x, y, adj_x, adj_y, out_dtype, broadcast_batch):
    if x.ndim < 2 or y.ndim < 2:
        raise invalid(f"In[0] and In[1] ndims must be >= 2: {x.ndim} vs. {y.ndim}")
    if adj_x:
        x = np.conj(np.swapaxes(x, -1, -2))
    if adj_y:
        y = np.conj(np.swapaxes(y, -1, -2))
    if x.shape[-1] != y.shape[-2]:
        raise invalid(f"Matrix size-incompatible: In[0]: {shape_str(x.shape)}, In[1]: {shape_str(y.shape)}")
    if not broadcast_batch and x.shape[:-2] != y.shape[:-2]:
        raise invalid(
            f"In[0].dim(0) and In[1].dim(0) must be the same: {shape_str(x.shape)} vs {shape_str(y.shape)}"
        )
    try:
        np.broadcast_shapes(x.shape[:-2], y.shape[:-2])
    except ValueError:
        raise invalid(
            f"In[0] and In[1] must have compatible batch dimensions: {shape_str(x.shape)} vs. {shape_str(y.shape)}"
        ) from None
    work = np.dtype(np.float32) if _low_precision(out_dtype) else out_dtype
    with np.errstate(all="ignore"):
        return out(np.matmul(x.astype(work, copy=False), y.astype(work, copy=False)), out_dtype)


@kernel("BatchMatMul")
def batch_mat_mul(x, y, *, adj_x=False, adj_y=False):
    return _batch_mat_mul(x, y, adj_x, adj_y, x.dtype, False)


@kernel("BatchMatMulV2")
def batch_mat_mul_v2(x, y, *, adj_x=False, adj_y=False):
    return _batch_mat_mul(x, y, adj_x, adj_y, x.dtype, True)


@kernel("BatchMatMulV3")
def batch_mat_mul_v3(x, y, *, Tout=None, adj_x=False, adj_y=False):
    dtype = dtypes.as_numpy_dtype(Tout) if Tout is not None else x.dtype
    return _batch_mat_mul(x, y, adj_x, adj_y, dtype, True)


@kernel("Einsum")
def einsum(inputs, *, equation):
    try:
        with np.errstate(all="ignore"):
            # optimize: products as BLAS calls (numpy's own einsum loop is ~10x slower on them)
            result = np.einsum(equation, *[_acc(v) for v in inputs], optimize=True)
    except ValueError as e:
        raise invalid(f"Einsum: {e}") from None
    return out(result, inputs[0].dtype)


# --------------------------------------------------------------------------- band and diagonals


@kernel("MatrixBandPart", const_inputs=(1, 2))
def matrix_band_part(input, num_lower, num_upper):  # noqa: A002
    lower, upper = int(np.asarray(num_lower)), int(np.asarray(num_upper))
    m, n = input.shape[-2:]
    if lower > m:
        raise invalid(f"num_lower must be negative or less or equal to number of rows ({m}) got: {lower}")
    if upper > n:
        raise invalid(f"num_upper must be negative or less or equal to number of columns ({n}) got: {upper}")
    i = np.arange(m)[:, None]
    j = np.arange(n)[None, :]
    keep = ((lower < 0) | (i - j <= lower)) & ((upper < 0) | (j - i <= upper))
    return np.where(keep, input, np.zeros((), input.dtype))


def _diag_range(k):
    ks = [int(v) for v in np.asarray(k).reshape(-1)]
    lo, hi = (ks[0], ks[0]) if len(ks) == 1 else (ks[0], ks[1])
    if lo > hi:
        raise invalid(
            f"lower_diag_index must not be greater than upper_diag_index, received lower: {lo}, upper: {hi}"
        )
    return lo, hi


def _offset(d, rows, cols, max_len, align):
    length = min(rows + min(0, d), cols - max(0, d))
    sup, sub = align.split("_")
    left = sup == "LEFT" if d >= 0 else sub == "LEFT"
    return 0 if left else max_len - length


def _diag_coords(d, rows, cols):
    length = max(min(rows + min(0, d), cols - max(0, d)), 0)
    t = np.arange(length)
    return (t - min(d, 0), t + max(d, 0), t)  # row, col, position in the diagonal


def _matrix_diag(diagonal, k, num_rows, num_cols, padding_value, align):
    lo, hi = _diag_range(k)
    single = lo == hi
    diag = diagonal[..., None, :] if single else diagonal
    max_len = diag.shape[-1]
    min_rows, min_cols = max_len - min(hi, 0), max_len + max(lo, 0)
    rows, cols = int(np.asarray(num_rows)), int(np.asarray(num_cols))
    if rows == -1 and cols == -1:
        rows = cols = max(min_rows, min_cols)
    elif rows == -1:
        rows = min_rows
    elif cols == -1:
        cols = min_cols
    if rows < min_rows:
        raise invalid("The number of rows is too small.")
    if cols < min_cols:
        raise invalid("The number of columns is too small.")
    if rows != min_rows and cols != min_cols:
        raise invalid(
            "The number of rows or columns is not consistent with the specified d_lower, d_upper, and diagonal."
        )
    result = np.full(diag.shape[:-2] + (rows, cols), padding_value, diagonal.dtype)
    for idx, d in enumerate(range(hi, lo - 1, -1)):
        r, c, t = _diag_coords(d, rows, cols)
        result[..., r, c] = diag[..., idx, t + _offset(d, rows, cols, max_len, align)]
    return result


@kernel("MatrixDiag")
def matrix_diag(diagonal):
    return _matrix_diag(diagonal, 0, -1, -1, 0, "LEFT_LEFT")


@kernel("MatrixDiagV2", const_inputs=(1, 2, 3))
def matrix_diag_v2(diagonal, k, num_rows, num_cols, padding_value):
    return _matrix_diag(diagonal, k, num_rows, num_cols, padding_value, "LEFT_LEFT")


@kernel("MatrixDiagV3", const_inputs=(1, 2, 3))
def matrix_diag_v3(diagonal, k, num_rows, num_cols, padding_value, *, align="RIGHT_LEFT"):
    return _matrix_diag(diagonal, k, num_rows, num_cols, padding_value, align)


def _matrix_diag_part(input, k, padding_value, align):  # noqa: A002
    lo, hi = _diag_range(k)
    rows, cols = input.shape[-2:]
    max_len = max(min(rows + min(0, d), cols - max(0, d)) for d in (lo, hi)) if lo != hi else None
    max_len = max(min(rows + min(0, d), cols - max(0, d)) for d in range(lo, hi + 1))
    result = np.full(input.shape[:-2] + (hi - lo + 1, max_len), padding_value, input.dtype)
    for idx, d in enumerate(range(hi, lo - 1, -1)):
        r, c, t = _diag_coords(d, rows, cols)
        result[..., idx, t + _offset(d, rows, cols, max_len, align)] = input[..., r, c]
    return result[..., 0, :] if lo == hi else result


@kernel("MatrixDiagPart")
def matrix_diag_part(input):  # noqa: A002
    return _matrix_diag_part(input, 0, 0, "LEFT_LEFT")


@kernel("MatrixDiagPartV2", const_inputs=(1,))
def matrix_diag_part_v2(input, k, padding_value):  # noqa: A002
    return _matrix_diag_part(input, k, padding_value, "LEFT_LEFT")


@kernel("MatrixDiagPartV3", const_inputs=(1,))
def matrix_diag_part_v3(input, k, padding_value, *, align="RIGHT_LEFT"):  # noqa: A002
    return _matrix_diag_part(input, k, padding_value, align)


def _matrix_set_diag(input, diagonal, k, align):  # noqa: A002
    lo, hi = _diag_range(k)
    diag = diagonal[..., None, :] if lo == hi else diagonal
    rows, cols = input.shape[-2:]
    max_len = diag.shape[-1]
    result = np.array(input, copy=True)
    for idx, d in enumerate(range(hi, lo - 1, -1)):
        r, c, t = _diag_coords(d, rows, cols)
        result[..., r, c] = diag[..., idx, t + _offset(d, rows, cols, max_len, align)]
    return result


@kernel("MatrixSetDiag")
def matrix_set_diag(input, diagonal):  # noqa: A002
    return _matrix_set_diag(input, diagonal, 0, "LEFT_LEFT")


@kernel("MatrixSetDiagV2", const_inputs=(2,))
def matrix_set_diag_v2(input, diagonal, k):  # noqa: A002
    return _matrix_set_diag(input, diagonal, k, "LEFT_LEFT")


@kernel("MatrixSetDiagV3", const_inputs=(2,))
def matrix_set_diag_v3(input, diagonal, k, *, align="RIGHT_LEFT"):  # noqa: A002
    return _matrix_set_diag(input, diagonal, k, align)


# --------------------------------------------------------------------------- solvers


def _square(input, what):  # noqa: A002
    if input.ndim < 2 or input.shape[-1] != input.shape[-2]:
        raise (
            invalid("Input matrix must be square.")
            if input.ndim >= 2
            else invalid(f"Input tensor 0 must have rank >= 2, got {input.ndim}")
        )


@kernel("Cholesky")
def cholesky(input):  # noqa: A002
    _square(input, "Cholesky")
    try:
        return out(np.linalg.cholesky(input), input.dtype)
    except np.linalg.LinAlgError:
        raise invalid("Cholesky decomposition was not successful. The input might not be valid.") from None


@kernel("MatrixInverse")
def matrix_inverse(input, *, adjoint=False):  # noqa: A002
    _square(input, "MatrixInverse")
    x = np.conj(np.swapaxes(input, -1, -2)) if adjoint else input
    try:
        return out(np.linalg.inv(x), input.dtype)
    except np.linalg.LinAlgError:
        raise invalid("Input is not invertible.") from None


@kernel("MatrixDeterminant")
def matrix_determinant(input):  # noqa: A002
    _square(input, "MatrixDeterminant")
    return out(np.linalg.det(input), input.dtype)


@kernel("MatrixTriangularSolve")
def matrix_triangular_solve(matrix, rhs, *, lower=True, adjoint=False):
    m = np.tril(matrix) if lower else np.triu(matrix)
    if adjoint:
        m = np.conj(np.swapaxes(m, -1, -2))
    return out(np.linalg.solve(m, rhs), rhs.dtype)


@kernel("LogMatrixDeterminant")
def log_matrix_determinant(input):  # noqa: A002
    _square(input, "LogMatrixDeterminant")
    sign, logdet = np.linalg.slogdet(input)
    return out(sign, input.dtype), out(logdet, input.dtype)


@kernel("MatrixSolve")
def matrix_solve(matrix, rhs, *, adjoint=False):
    _square(matrix, "MatrixSolve")
    m = np.conj(np.swapaxes(matrix, -1, -2)) if adjoint else matrix
    try:
        return out(np.linalg.solve(m, rhs), rhs.dtype)
    except np.linalg.LinAlgError:
        raise invalid("Input matrix is not invertible.") from None


# --------------------------------------------------------------------------- decompositions
# QR matches TF's (both Householder, same sign choice). Singular values and eigenvalues match; the
# signs of singular and eigen vectors are LAPACK's, which may differ from Eigen's.


@kernel("Qr")
def qr(input, *, full_matrices=False):  # noqa: A002
    if input.ndim < 2:
        raise invalid(f"Input tensor 0 must have rank >= 2, got {input.ndim}")
    q, r = np.linalg.qr(input, mode="complete" if full_matrices else "reduced")
    return out(q, input.dtype), out(r, input.dtype)


@kernel("Svd")
def svd(input, *, compute_uv=True, full_matrices=False):  # noqa: A002
    if input.ndim < 2:
        raise invalid(f"Input tensor 0 must have rank >= 2, got {input.ndim}")
    if not compute_uv:
        s = np.linalg.svd(input, compute_uv=False)
        unused = np.zeros((), input.dtype)  # TF returns uninitialised scalars here
        return out(s, input.dtype), unused, unused
    u, s, vh = np.linalg.svd(input, full_matrices=full_matrices)
    v = np.conj(np.swapaxes(vh, -1, -2))
    return out(s, input.dtype), out(u, input.dtype), out(v, input.dtype)


@kernel("SelfAdjointEigV2")
def self_adjoint_eig_v2(input, *, compute_v=True):  # noqa: A002
    _square(input, "SelfAdjointEigV2")
    if not compute_v:
        return out(np.linalg.eigvalsh(input), input.dtype), np.zeros((), input.dtype)
    e, v = np.linalg.eigh(input)
    return out(e, input.dtype), out(v, input.dtype)

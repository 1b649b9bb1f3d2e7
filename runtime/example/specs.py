"""What a batch of ``tf.train.Example`` protos is parsed into: the per-feature specs and their ``Config``.

Shared by ``runtime/example/parser.py`` (TF's semantics, the general path) and
``runtime/example/fast_path.py`` (the column-wise batch path), so that neither imports the other's
internals: both read a ``Config`` the same way, through ``feature_slots``.

Thread-safety: frozen dataclasses; their cached properties are computed from immutable fields, so a
race computes the same value twice at worst.
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass, field

import numpy as np

from runtime import dtypes

KIND_OF = {dtypes.DT_FLOAT: "float_list", dtypes.DT_INT64: "int64_list", dtypes.DT_STRING: "bytes_list"}
NUMPY = {dtypes.DT_FLOAT: np.float32, dtypes.DT_INT64: np.int64, dtypes.DT_STRING: object}


@dataclass(frozen=True)
class DenseSpec:
    key: str
    dtype: int
    shape: tuple  # the per-example shape; shape[0] is None for a variable-length feature
    default: np.ndarray  # empty: the feature is required (fixed length) or pads with zeros

    @functools.cached_property
    def variable_length(self) -> bool:
        return bool(self.shape) and self.shape[0] is None

    @functools.cached_property
    def stride(self) -> int:
        """Values per row: the whole shape (fixed length) or one step of it (variable length)."""
        dims = self.shape[1:] if self.variable_length else self.shape
        return int(np.prod(dims, dtype=np.int64)) if dims else 1


@dataclass(frozen=True)
class SparseSpec:
    key: str
    dtype: int


@dataclass(frozen=True)
class RaggedSpec:
    key: str
    dtype: int
    split_dtype: int


@dataclass(frozen=True)
class Config:
    """What to parse; immutable, so a kernel may build it once and parse many batches with it."""

    dense: tuple[DenseSpec, ...] = ()
    sparse: tuple[SparseSpec, ...] = ()
    ragged: tuple[RaggedSpec, ...] = ()
    # What a parser derives from this Config once and keeps with it (the fast path's ``Plan``), so
    # that this module needs to know none of them; a race derives the same value twice at worst.
    derived: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @functools.cached_property
    def readers(self) -> list[tuple]:
        """(key, family, index, reader, exact count) per matched key; see ``feature_slots``. Reading the
        expected list of a Feature whose oneof holds another kind yields an empty list, so a
        non-empty read of the expected kind (of the exact size, for fixed-length dense) settles the
        type and size checks in one C call; anything else takes the checking path."""
        return [
            (key, family, index, operator.attrgetter(f"{kind}.value"), exact)
            for key, (family, index, kind, exact) in feature_slots(self).items()
        ]


def feature_slots(config: Config) -> dict[str, tuple]:
    """key -> (family, index, expected kind, exact value count or None for any), families 0 dense,
    1 sparse, 2 ragged. A key configured twice is matched by none of its configurations (TF's
    feature map rejects the duplicate): its dense outputs take their defaults and its sparse and
    ragged outputs stay empty."""
    slots: dict[str, tuple] = {}
    duplicates = set()
    for family, specs in enumerate((config.dense, config.sparse, config.ragged)):
        for index, spec in enumerate(specs):
            if spec.key in slots:
                duplicates.add(spec.key)
            exact = None  # any count: sparse, ragged and variable-length dense of stride 1
            if family == 0 and (not spec.variable_length or spec.stride != 1):
                exact = -1 if spec.variable_length else spec.stride  # -1: checked on the slow path
            slots[spec.key] = (family, index, KIND_OF[spec.dtype], exact)
    for key in duplicates:
        del slots[key]
    return slots


def split_numpy(dtype: int):
    return np.int32 if dtype == dtypes.DT_INT32 else np.int64

"""TF's ``MutableDenseHashTable``: open addressing over bucket arrays, kept as TF keeps them.

Why buckets and not a dict: TF saves a dense table as its bucket arrays, as they are
(``table-keys`` / ``table-values``; empty buckets hold ``empty_key``, erased ones ``deleted_key``
and their stale value), and restoring imports the arrays whole. With the same arrays, the same
hash (an integer key is its own hash, a string TF's ``Hash64``, a vector key ``Hash64Combine``
over its elements), the same quadratic probing and the same growth past ``max_load_factor``,
lookups, sizes and exports answer what TF's table answers, before a save and after a restore.

Keys are held as Python values, one per bucket (a tuple for a vector key); values as a numpy
array of ``[num_buckets, value size]``. Thread-safety: every method holds the table's lock.
"""

from __future__ import annotations

import math
import threading

import numpy as np

from runtime import dtypes, errors
from runtime.kernels.hashing import hash64

_MASK = (1 << 64) - 1


def _invalid(text: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, text)


def _shape(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def check_types(key_dtype: int, value_dtype: int, keys: np.ndarray, values: np.ndarray | None = None) -> None:
    """TF's ``CheckKeyAndValueTypes``, for every kind of table."""
    if _dtype_of(keys) != key_dtype:
        raise _invalid(f"Key must be type {dtypes.name(key_dtype)} but got {dtypes.name(_dtype_of(keys))}")
    if values is not None and _dtype_of(values) != value_dtype:
        raise _invalid(
            f"Value must be type {dtypes.name(value_dtype)} but got {dtypes.name(_dtype_of(values))}"
        )


def _dtype_of(array: np.ndarray) -> int:
    return dtypes.DT_STRING if array.dtype == object else dtypes.from_numpy(array.dtype)


def hash64_combine(a: int, b: int) -> int:
    """TF's ``Hash64Combine``."""
    return a ^ ((b + 0x9E3779B97F4A7800 + (a << 10) + (a >> 4)) & _MASK)


class DenseHashTable:
    """One ``MutableDenseHashTableV2`` resource (TF's constructor checks, in TF's order)."""

    static = False  # the kernels' LookupTable interface: mutable, always initialised
    initialized = True

    def check_types(self, keys: np.ndarray, values: np.ndarray | None = None) -> None:
        check_types(self.key_dtype, self.value_dtype, keys, values)

    def __init__(
        self, key_dtype: int, value_dtype: int, empty_key, deleted_key, value_shape=(),
        initial_num_buckets: int = 131072, max_load_factor: float = 0.8,
    ):  # fmt: skip
        if not 0 < max_load_factor < 1:
            raise _invalid(f"max_load_factor must be between 0 and 1, got: {max_load_factor:g}")
        self.key_dtype, self.value_dtype = key_dtype, value_dtype
        self.value_shape = tuple(value_shape or ())
        if len(self.value_shape) > 1:
            raise _invalid(f"Empty value must be a scalar or a vector, got shape {_shape(self.value_shape)}")
        empty, deleted = np.asarray(empty_key), np.asarray(deleted_key)
        self.key_shape = empty.shape
        if empty.ndim > 1:
            raise _invalid(f"Empty key must be a scalar or a vector, got shape {_shape(empty.shape)}")
        if deleted.size != empty.size:
            raise _invalid(
                "Empty and deleted keys must have same shape, got shapes: "
                f"{_shape(empty.shape)} and {_shape(deleted.shape)}"
            )
        self.key_size, self.value_size = max(empty.size, 1), math.prod(self.value_shape)
        self.empty_key, self.deleted_key = self._key(empty.reshape(-1)), self._key(deleted.reshape(-1))
        if self.empty_key == self.deleted_key:
            raise _invalid("Empty and deleted keys cannot be equal")
        self.max_load_factor = np.float32(max_load_factor)  # TF compares in float
        self.lock = threading.Lock()
        self._allocate(initial_num_buckets)

    # -- the LookupInterface -------------------------------------------------------------------

    def size(self) -> int:
        with self.lock:
            return self.num_entries

    def find(self, keys: np.ndarray, default: np.ndarray) -> np.ndarray:
        rows = self._rows(keys)
        default_row = np.asarray(default).reshape(-1)
        if default_row.size != self.value_size:
            raise _invalid(
                f"Expected shape {_shape(self.value_shape)} for default value, got {_shape(np.shape(default))}"
            )
        out = np.empty((len(rows), self.value_size), dtype=dtypes.as_numpy_dtype(self.value_dtype))
        with self.lock:
            for i, key in enumerate(rows):
                index = self._probe(key, "lookup")
                out[i] = default_row if self.keys[index] == self.empty_key else self.values[index]
        return out.reshape(self._output_shape(keys))

    def insert(self, keys: np.ndarray, values: np.ndarray) -> None:
        rows = self._rows(keys, "Expected key shape")
        self._check_values(keys, values)
        value_rows = np.asarray(values).reshape(len(rows), self.value_size)
        with self.lock:
            pending = self.num_entries + len(rows)  # TF counts every key as new
            if pending > np.float32(self.num_buckets) * self.max_load_factor:
                buckets = self.num_buckets
                while True:
                    buckets <<= 1
                    if not pending > np.float32(buckets) * self.max_load_factor:
                        break
                self._rebucket(buckets)
            self._insert(rows, value_rows, skip_reserved=False)

    def remove(self, keys: np.ndarray) -> None:
        rows = self._rows(keys, "Expected key shape")
        with self.lock:
            for key in rows:
                index = self._probe(key, "remove")
                if self.keys[index] == key:
                    self.keys[index] = self.deleted_key
                    self.num_entries -= 1

    def import_values(self, keys: np.ndarray, values: np.ndarray) -> None:
        """The bucket arrays of an export (a checkpoint's ``table-keys`` / ``table-values``)."""
        keys, values = np.asarray(keys), np.asarray(values)
        self._check_key_shape(keys.shape)
        key_dims = max(len(self.key_shape), 1)
        expected = keys.shape[: keys.ndim - key_dims] + (self.value_shape or (1,))
        if values.shape != expected:
            raise _invalid(f"Expected shape {_shape(expected)} for value, got {_shape(values.shape)}")
        rows = self._rows(keys)
        _check_buckets(len(rows))  # TF would probe out of its arrays; refuse instead
        count = len(rows)
        with self.lock:
            self.num_buckets = count
            self.keys = rows
            self.values = values.reshape(count, self.value_size).copy()
            self.num_entries = sum(k != self.empty_key and k != self.deleted_key for k in self.keys)

    def export_values(self) -> tuple[np.ndarray, np.ndarray]:
        """Every bucket, ``[num_buckets, key size]`` keys and ``[num_buckets, value size]`` values."""
        with self.lock:
            flat = [k for key in self.keys for k in (key if self.key_size > 1 else (key,))]
            keys = np.array(flat, dtype=dtypes.as_numpy_dtype(self.key_dtype))
            return keys.reshape(self.num_buckets, self.key_size), self.values.copy()

    # -- buckets -------------------------------------------------------------------------------

    def _allocate(self, num_buckets: int) -> None:
        _check_buckets(num_buckets)
        self.num_buckets, self.num_entries = num_buckets, 0
        self.keys = [self.empty_key] * num_buckets
        numpy_dtype = dtypes.as_numpy_dtype(self.value_dtype)
        fill = b"" if self.value_dtype == dtypes.DT_STRING else 0
        self.values = np.full((num_buckets, self.value_size), fill, dtype=numpy_dtype)

    def _rebucket(self, num_buckets: int) -> None:
        keys, values = self.keys, self.values
        self._allocate(num_buckets)
        self._insert(keys, values, skip_reserved=True)

    def _insert(self, rows: list, value_rows: np.ndarray, skip_reserved: bool) -> None:
        for key, value in zip(rows, value_rows):
            if key == self.empty_key or key == self.deleted_key:
                if skip_reserved:
                    continue
                raise self._reserved(key)
            index = self._probe(key, "insert", stop_at_deleted=True)
            if self.keys[index] != key:
                self.keys[index] = key
                self.num_entries += 1
            self.values[index] = value

    def _probe(self, key, what: str, stop_at_deleted: bool = False) -> int:
        """The bucket holding ``key``, or the first empty one on its path (or deleted one, for an
        insert): TF's quadratic probing from the key's hash."""
        if key == self.empty_key or key == self.deleted_key:
            raise self._reserved(key)
        mask = self.num_buckets - 1
        index, probes = self._hash(key) & mask, 0
        while True:
            found = self.keys[index]
            if found == key or found == self.empty_key or (stop_at_deleted and found == self.deleted_key):
                return index
            probes += 1
            index = (index + probes) & mask
            if probes >= self.num_buckets:
                raise errors.InternalError(None, None, f"Internal error in MutableDenseHashTable {what}")

    def _hash(self, key) -> int:
        if self.key_size == 1:
            return self._hash_scalar(key)
        result = 0
        for element in key:
            result = hash64_combine(result, self._hash_scalar(element))
        return result

    def _hash_scalar(self, element) -> int:
        if isinstance(element, bytes):
            return hash64(element)
        if isinstance(element, float) and not math.isfinite(element):
            return 0  # undefined in C++; any bucket will do, as probing finds the key
        return int(element) & _MASK  # TF's static_cast<uint64>

    def _reserved(self, key) -> errors.InvalidArgumentError:
        which = "empty_key" if key == self.empty_key else "deleted_key"
        return _invalid(f"Using the {which} as a table key is not allowed")

    # -- shapes --------------------------------------------------------------------------------

    def _key(self, row) -> object:
        row = row.tolist() if isinstance(row, np.ndarray) else row
        return tuple(row) if self.key_size > 1 else row[0]

    def _rows(self, keys: np.ndarray, message: str = "Expected key shape") -> list:
        """The keys as one Python key per row (TF's ``key.shaped<K, 2>({n, key size})``)."""
        keys = np.asarray(keys)
        self._check_key_shape(keys.shape)
        count = 1 if keys.ndim == 0 else keys.shape[0]
        if keys.size != count * self.key_size:
            raise _invalid(f"{message} {_shape((count, *self.key_shape))} got {_shape(keys.shape)}")
        return [self._key(row) for row in keys.reshape(count, self.key_size).tolist()]

    def _check_key_shape(self, shape: tuple) -> None:
        if self.key_shape and tuple(shape[len(shape) - len(self.key_shape) :]) != self.key_shape:
            raise _invalid(
                f"Input key shape {_shape(shape)} must end with the table's key shape {_shape(self.key_shape)}"
            )

    def _check_values(self, keys: np.ndarray, values: np.ndarray) -> None:
        expected = self._output_shape(keys)
        if np.shape(values) != expected:
            raise _invalid(f"Expected shape {_shape(expected)} for value, got {_shape(np.shape(values))}")

    def _output_shape(self, keys: np.ndarray) -> tuple:
        shape = np.shape(keys)
        return tuple(shape[: len(shape) - len(self.key_shape)]) + self.value_shape


def _check_buckets(num_buckets: int) -> None:
    if num_buckets < 4 or num_buckets & (num_buckets - 1):
        raise _invalid(f"Number of buckets must be at least 4 and a power of 2, got: {num_buckets}")

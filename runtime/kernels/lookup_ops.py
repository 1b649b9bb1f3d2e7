"""Lookup tables: the hash tables behind vocabularies (``StringLookup``, ``IntegerLookup``,
``categorical_column_with_vocabulary_*``, ``StaticVocabularyTable``) as Session resources.

A table op (``HashTableV2``, ``MutableHashTableV2``, ...) creates its table in the Session's
``ResourceMgr`` under (container, shared_name or node name) the first time it runs and returns the
handle; the other ops find the table through that handle. Static tables (``HashTable``) start
uninitialised: lookups fail until ``InitializeTableV2``/``InitializeTableFromTextFileV2``/
``LookupTableImportV2`` fills them, and initialising again with the same entries is a no-op (with
different entries: TF's FailedPreconditionError). Mutable tables start empty and ready.

The V1 ops (``HashTable``, ``LookupTableFind``, ...) pass the same handle along their ref edges.

Thread-safety: every table takes its own lock for writes; lookups read one dict reference.
"""

from __future__ import annotations

import functools
import itertools
import threading

import numpy as np

from runtime import dtypes, errors
from runtime.kernels.dense_hash_table import DenseHashTable, check_types
from runtime.kernels.registry import kernel
from runtime.kernels.resources import ANONYMOUS_NAME, ResourceHandle, resource_key

TABLE_KIND = "N10tensorflow6lookup15LookupInterfaceE"
_anonymous = itertools.count()


class LookupTable:
    """A table's entries; ``value_shape`` is () except for tables of tensors."""

    def __init__(self, key_dtype: int, value_dtype: int, value_shape=(), static: bool = False):
        self.key_dtype = key_dtype
        self.value_dtype = value_dtype
        self.value_shape = tuple(value_shape or ())
        self.static = static
        self.initialized = not static
        self.data: dict = {}
        self.lock = threading.Lock()

    def check_types(self, keys: np.ndarray, values: np.ndarray | None = None) -> None:
        check_types(self.key_dtype, self.value_dtype, keys, values)

    def values_of(self, keys: np.ndarray, values: np.ndarray) -> list:
        """The values as one Python item per key (a numpy row for tables of tensors)."""
        count = keys.size
        if self.value_shape:
            expected = keys.shape + self.value_shape
            if values.shape != expected:
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"Expected shape {_shape(expected)} for value, got {_shape(values.shape)}",
                )
            return list(values.reshape((count, *self.value_shape)))
        if values.shape != keys.shape:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Expected shape {_shape(keys.shape)} for value, got {_shape(values.shape)}",
            )
        return values.reshape(-1).tolist()


def _shape(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def _create_handle(
    ctx, container: str, shared_name: str, use_node_name_sharing: bool, make
) -> ResourceHandle:
    container, name = resource_key(container, shared_name, ctx.name)
    if name == ANONYMOUS_NAME:
        handle = ResourceHandle(container, f"{ctx.name}_anonymous_{next(_anonymous)}", TABLE_KIND)
    else:
        handle = _table_handle(container, name)
    ctx.resources.lookup_or_create(handle, make)
    return handle


@functools.lru_cache(maxsize=4096)  # handles are immutable values: one per table, not per run
def _table_handle(container: str, name: str) -> ResourceHandle:
    return ResourceHandle(container, name, TABLE_KIND)


def _table(handle, ctx) -> LookupTable:
    """The table behind a handle; NotFoundError (TF's text) when its op never ran."""
    return ctx.resources.lookup(handle)


@kernel("HashTableV2", "HashTable", stateful=True)
def hash_table_v2(
    *, container="", shared_name="", use_node_name_sharing=False, key_dtype, value_dtype, ctx
):  # fmt: skip
    return _create_handle(
        ctx, container, shared_name, use_node_name_sharing,
        lambda: LookupTable(key_dtype, value_dtype, static=True),
    )  # fmt: skip


@kernel("AnonymousHashTable", stateful=True)
def anonymous_hash_table(*, key_dtype, value_dtype, ctx):
    return _create_handle(
        ctx, "", ANONYMOUS_NAME, False, lambda: LookupTable(key_dtype, value_dtype, static=True)
    )


@kernel("MutableHashTableV2", "MutableHashTable", stateful=True)
def mutable_hash_table_v2(
    *, container="", shared_name="", use_node_name_sharing=False, key_dtype, value_dtype, ctx
):  # fmt: skip
    return _create_handle(
        ctx, container, shared_name, use_node_name_sharing, lambda: LookupTable(key_dtype, value_dtype)
    )


@kernel("AnonymousMutableHashTable", stateful=True)
def anonymous_mutable_hash_table(*, key_dtype, value_dtype, ctx):
    return _create_handle(ctx, "", ANONYMOUS_NAME, False, lambda: LookupTable(key_dtype, value_dtype))


@kernel("MutableHashTableOfTensorsV2", "MutableHashTableOfTensors", stateful=True)
def mutable_hash_table_of_tensors_v2(
    *, container="", shared_name="", use_node_name_sharing=False, key_dtype, value_dtype, value_shape=(),
    ctx
):  # fmt: skip
    return _create_handle(
        ctx, container, shared_name, use_node_name_sharing,
        lambda: LookupTable(key_dtype, value_dtype, value_shape),
    )  # fmt: skip


@kernel("MutableDenseHashTableV2", stateful=True)
def mutable_dense_hash_table_v2(
    empty_key, deleted_key, *, container="", shared_name="", use_node_name_sharing=False, key_dtype,
    value_dtype, value_shape=(), initial_num_buckets=131072, max_load_factor=0.8, ctx
):  # fmt: skip
    return _create_handle(
        ctx, container, shared_name, use_node_name_sharing,
        lambda: DenseHashTable(
            key_dtype, value_dtype, empty_key, deleted_key, value_shape, initial_num_buckets, max_load_factor
        ),
    )  # fmt: skip


def _flat_keys(keys: np.ndarray) -> list:
    return keys.reshape(-1).tolist()


@kernel("LookupTableFindV2", "LookupTableFind", stateful=True)
def lookup_table_find_v2(table_handle, keys, default_value, *, ctx):
    table = _table(table_handle, ctx)
    if not table.initialized:
        raise errors.FailedPreconditionError(None, None, "Table not initialized.")
    keys = np.asarray(keys)
    table.check_types(keys)
    if isinstance(table, DenseHashTable):
        return table.find(keys, default_value)
    default = np.asarray(default_value)
    numpy_dtype = dtypes.as_numpy_dtype(table.value_dtype)
    data = table.data
    flat = keys.reshape(-1).tolist()
    if not table.value_shape:
        if default.size != 1:
            raise errors.InvalidArgumentError(
                None, None, f"Expected shape [] for default value, got {_shape(default.shape)}"
            )
        fallback = default.reshape(-1).tolist()[0]
        out = np.empty(len(flat), dtype=numpy_dtype)
        out[:] = [data.get(k, fallback) for k in flat]
        return out.reshape(keys.shape)
    key_shape = keys.shape
    default = np.broadcast_to(default, table.value_shape)
    rows = [data.get(k, default) for k in flat]
    out = np.empty((len(flat), *table.value_shape), dtype=numpy_dtype)
    for i, row in enumerate(rows):
        out[i] = row
    return out.reshape(key_shape + table.value_shape)


def _pairs(table: LookupTable, keys, values) -> list[tuple]:
    """(key, value) pairs, type- and shape-checked against the table, in input order."""
    keys = np.asarray(keys)
    values = np.asarray(values)
    table.check_types(keys, values)
    return list(zip(_flat_keys(keys), table.values_of(keys, values)))


def _initialize(table: LookupTable, pairs: list) -> None:
    """Fill a static table (TF's ``InitializableLookupTable::Initialize``)."""
    entries: dict = {}
    for key, value in pairs:
        existing = entries.get(key, _MISSING)
        if existing is not _MISSING and existing != value:
            raise errors.FailedPreconditionError(
                None,
                None,
                f"HashTable has different value for same key. Key {_text(key)} has {_text(existing)} and "
                f"trying to add value {_text(value)}",
            )
        entries[key] = value
    with table.lock:
        if table.initialized:
            if entries != table.data:
                raise errors.FailedPreconditionError(
                    None, None, "Table was already initialized with different data."
                )
            return
        table.data = entries
        table.initialized = True


_MISSING = object()


def _text(value) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


@kernel("LookupTableImportV2", "LookupTableImport", stateful=True)
def lookup_table_import_v2(table_handle, keys, values, *, ctx):
    table = _table(table_handle, ctx)
    if table.static:
        _initialize(table, _pairs(table, keys, values))
        return None
    if isinstance(table, DenseHashTable):
        table.check_types(np.asarray(keys), np.asarray(values))
        return table.import_values(keys, values)
    entries = dict(_pairs(table, keys, values))
    with table.lock:
        table.data = entries


@kernel("InitializeTableV2", "InitializeTable", stateful=True)
def initialize_table_v2(table_handle, keys, values, *, ctx):
    table = _table(table_handle, ctx)
    keys, values = np.asarray(keys), np.asarray(values)
    if keys.shape != values.shape:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Keys and values must have the same size {keys.size} vs {values.size}",
        )
    _initialize(table, _pairs(table, keys, values))


@kernel("LookupTableInsertV2", "LookupTableInsert", stateful=True)
def lookup_table_insert_v2(table_handle, keys, values, *, ctx):
    table = _table(table_handle, ctx)
    if table.static:
        raise errors.UnimplementedError(None, None, "HashTable does not support insert")
    if isinstance(table, DenseHashTable):
        table.check_types(np.asarray(keys), np.asarray(values))
        return table.insert(keys, values)
    entries = dict(_pairs(table, keys, values))
    with table.lock:
        data = dict(table.data)
        data.update(entries)
        table.data = data


@kernel("LookupTableRemoveV2", stateful=True)
def lookup_table_remove_v2(table_handle, keys, *, ctx):
    table = _table(table_handle, ctx)
    if table.static:
        raise errors.UnimplementedError(None, None, "HashTable does not support remove")
    keys = np.asarray(keys)
    table.check_types(keys)
    if isinstance(table, DenseHashTable):
        return table.remove(keys)
    flat = _flat_keys(keys)
    with table.lock:
        data = dict(table.data)
        for key in flat:
            data.pop(key, None)
        table.data = data


@kernel("LookupTableSizeV2", "LookupTableSize", stateful=True)
def lookup_table_size_v2(table_handle, *, ctx):
    table = _table(table_handle, ctx)
    size = table.size() if isinstance(table, DenseHashTable) else len(table.data)
    return np.array(size, dtype=np.int64)


@kernel("LookupTableExportV2", "LookupTableExport", stateful=True)
def lookup_table_export_v2(table_handle, *, Tkeys, Tvalues, ctx):
    """Every (key, value), in insertion order (TF's order is its hash map's, unspecified); a
    dense table's every bucket, as TF's."""
    table = _table(table_handle, ctx)
    if isinstance(table, DenseHashTable):
        return table.export_values()
    data = table.data
    keys = np.empty(len(data), dtype=dtypes.as_numpy_dtype(table.key_dtype))
    keys[:] = list(data)
    values = np.empty((len(data), *table.value_shape), dtype=dtypes.as_numpy_dtype(table.value_dtype))
    for i, value in enumerate(data.values()):
        values[i] = value
    return keys, values


# --------------------------------------------------------------------------------- text files

WHOLE_LINE = -2
LINE_NUMBER = -1


@kernel("InitializeTableFromTextFileV2", "InitializeTableFromTextFile", stateful=True)
def initialize_table_from_text_file_v2(
    table_handle, filename, *, key_index, value_index, vocab_size=-1, delimiter="\t", offset=0, ctx
):  # fmt: skip
    """One entry per line: keys and values from a column, the whole line (-2) or the line number (-1)."""
    table = _table(table_handle, ctx)
    path = np.asarray(filename, dtype=object).item()
    path = path.decode("utf-8", "surrogateescape") if isinstance(path, bytes) else str(path)
    if table.initialized and table.static:
        return None  # TF skips re-reading the file of an initialised table
    pairs = list(_read_vocabulary(table, path, key_index, value_index, vocab_size, delimiter, offset))
    _initialize(table, pairs)


def _read_vocabulary(table, path, key_index, value_index, vocab_size, delimiter, offset):
    try:
        with open(path, "rb") as f:
            content = f.read()
    except FileNotFoundError:
        raise errors.NotFoundError(None, None, f"{path}; No such file or directory") from None
    sep = delimiter.encode() if isinstance(delimiter, str) else delimiter
    position = 0
    count = 0
    for raw in content.splitlines(keepends=True):
        if 0 <= vocab_size <= count:
            break
        position += len(raw)
        line = raw.rstrip(b"\n")
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line:
            raise errors.InvalidArgumentError(
                None, None, f"Invalid content in {path}: empty line found at position {position}."
            )
        columns = line.split(sep) if max(key_index, value_index) >= 0 else None
        if columns is not None and max(key_index, value_index) >= len(columns):
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Invalid number of columns in {path} line {count} ({line.decode('utf-8', 'replace')}) : "
                f"expected at least {max(key_index, value_index) + 1} got {len(columns)}",
            )
        number = offset + count
        key = _field(line, columns, key_index, number, table.key_dtype, count)
        value = _field(line, columns, value_index, number, table.value_dtype, count)
        yield key, value
        count += 1
    if vocab_size > 0 and count != vocab_size:
        raise errors.InvalidArgumentError(
            None, None, f"Invalid vocab_size in {path}: expected {vocab_size} but got {count}"
        )


def _field(line: bytes, columns, index: int, number: int, dtype: int, count: int):
    if index == LINE_NUMBER:
        return number
    text = line if index == WHOLE_LINE else columns[index]
    if dtype == dtypes.DT_STRING:
        return text
    try:
        if dtype in (dtypes.DT_FLOAT, dtypes.DT_DOUBLE):
            value = float(text)
            return float(np.float32(value)) if dtype == dtypes.DT_FLOAT else value
        value = int(text)
        info = np.iinfo(dtypes.as_numpy_dtype(dtype))
        if not info.min <= value <= info.max:
            raise ValueError
        return value
    except ValueError:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Field {text.decode('utf-8', 'replace')} in line {count} is not a valid {dtypes.name(dtype)}.",
        ) from None

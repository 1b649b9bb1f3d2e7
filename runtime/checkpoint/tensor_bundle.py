"""Reader for TensorBundle, the V2 checkpoint format that ``SaveV2`` writes and ``RestoreV2`` reads.

A bundle with prefix ``<prefix>`` is one index file and ``num_shards`` data files::

    variables/
        variables.index                       sorted string table (see ``runtime/checkpoint/table.py``)
        variables.data-00000-of-00002         raw tensor bytes, concatenated
        variables.data-00001-of-00002

Index entries (keys sorted bytewise):

- ``""`` (the empty key): a ``BundleHeaderProto`` -- ``num_shards``, ``endianness`` (LITTLE = 0),
  ``version`` (a ``VersionDef``; this reader consumes version 1).
- ``<tensor name>``: a ``BundleEntryProto`` -- ``dtype``, ``shape``, ``shard_id``, ``offset``,
  ``size`` (bytes in shard ``shard_id`` at ``offset``), ``crc32c`` (masked crc32c of those bytes) and,
  for a partitioned variable, ``slices`` (``TensorSliceProto``) with no bytes of its own.
- ``EncodeTensorNameSlice(name, slice)``: one entry per stored slice of a partitioned variable, whose
  key is an OrderedCode string: ``NumIncreasing(0) | String(name) | NumIncreasing(rank)`` then, per
  dimension, ``SignedNumIncreasing(start) | SignedNumIncreasing(length)`` (length -1 = full extent).

Tensor bytes are little-endian elements in row-major order (bool: one byte; bfloat16/half: two
bytes; complex: real then imaginary). A string tensor is laid out as::

    varint64 len[0] .. varint64 len[n-1] | fixed32 masked crc32c of the lengths | bytes[0] .. bytes[n-1]

where the length checksum covers each length as a fixed32 (not its varint), and the entry's crc32c
extends that running checksum over the fixed32 length checksum and then over the string bytes.

Guarantees: data shards are memory-mapped read-only and fixed-size tensors are returned as read-only
numpy views of the mapping (no copy); every read verifies the entry's crc32c; every size is checked
against the entry and the shard's length before anything is allocated; every failure is an
``OpError`` (``DataLossError`` for corrupt, truncated or missing files) naming the file and the
tensor. A ``BundleReader`` is immutable after construction apart from its lazily opened shard maps,
and safe to share between threads.
"""

from __future__ import annotations

import mmap
import os
import struct
import threading

import google_crc32c
import numpy as np
from google.protobuf.message import DecodeError

from apis.tensorflow.core.framework import tensor_slice_pb2
from apis.tensorflow.core.protobuf import tensor_bundle_pb2
from runtime import dtypes, errors
from runtime.checkpoint.table import Table, crc32c, mask_crc, unmask_crc
from runtime.wire import WireError, read_varints

HEADER_ENTRY_KEY = b""
_SUPPORTED_VERSION = 1
# An upper bound on any single dimension's product: beyond it no file on disk could back the tensor.
_MAX_ELEMENTS = 1 << 62


def index_filename(prefix: str) -> str:
    return prefix + ".index"


def data_filename(prefix: str, shard_id: int, num_shards: int) -> str:
    return f"{prefix}.data-{shard_id:05d}-of-{num_shards:05d}"


class BundleReader:
    """Reads tensors from one TensorBundle; construction reads the index, shards open on first use."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self._index_path = index_filename(prefix)
        try:
            with open(self._index_path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            raise errors.NotFoundError(
                None,
                None,
                f"Unsuccessful TensorSliceReader constructor: Failed to find any matching files for {prefix}",
            ) from None
        except OSError as e:
            raise errors.DataLossError(None, None, f"Failed to read {self._index_path}: {e}") from None
        self._entries: dict[bytes, bytes] = dict(Table(data, self._index_path).items())
        self.header = self._parse_header()
        self.num_shards = self.header.num_shards
        self._shards: dict[int, memoryview] = {}
        self._lock = threading.Lock()
        self._parsed: dict[bytes, tensor_bundle_pb2.BundleEntryProto] = {}

    # ---- index -------------------------------------------------------------------------------------
    def _parse_header(self) -> tensor_bundle_pb2.BundleHeaderProto:
        raw = self._entries.get(HEADER_ENTRY_KEY)
        if raw is None:
            raise errors.DataLossError(
                None, None, f"Corrupt checkpoint index {self._index_path}: no header entry"
            )
        header = tensor_bundle_pb2.BundleHeaderProto()
        try:
            header.ParseFromString(raw)
        except DecodeError:
            raise errors.DataLossError(None, None, f"Corrupt header entry in {self._index_path}") from None
        if header.endianness != tensor_bundle_pb2.BundleHeaderProto.LITTLE:
            raise errors.UnimplementedError(
                None,
                None,
                f"Reading a bundle with different endianness from the reader is unsupported: {self.prefix}",
            )
        if (
            header.version.min_consumer > _SUPPORTED_VERSION
            or _SUPPORTED_VERSION in header.version.bad_consumers
        ):
            raise errors.InvalidArgumentError(
                None, None, f"Checkpoint {self.prefix} requires a newer reader (version {header.version})"
            )
        if header.num_shards < 1 and len(self._entries) > 1:
            raise errors.DataLossError(
                None, None, f"Corrupt header in {self._index_path}: num_shards {header.num_shards}"
            )
        return header

    def keys(self) -> list[str]:
        """Names of the tensors stored (slice entries of partitioned variables excluded), sorted."""
        names = []
        for key in self._entries:
            if key and not key.startswith(b"\x00"):
                names.append(key.decode("utf-8", "surrogateescape"))
        return names

    def has_tensor(self, name: str) -> bool:
        return _key(name) in self._entries

    def entry(self, name: str) -> tensor_bundle_pb2.BundleEntryProto:
        """The ``BundleEntryProto`` of a tensor; NotFoundError if the bundle has none."""
        return self._entry(_key(name), name)

    def _entry(self, key: bytes, name: str) -> tensor_bundle_pb2.BundleEntryProto:
        cached = self._parsed.get(key)
        if cached is not None:
            return cached
        raw = self._entries.get(key)
        if raw is None:
            raise errors.NotFoundError(None, None, f"Key {name} not found in checkpoint")
        entry = tensor_bundle_pb2.BundleEntryProto()
        try:
            entry.ParseFromString(raw)
        except DecodeError:
            raise self._loss(name, "cannot parse its BundleEntryProto") from None
        self._parsed[key] = entry
        return entry

    def shard_extents(self) -> dict[int, int]:
        """Shard id -> the bytes its entries reach (offset + size): how long each data file must
        be. Every shard of ``num_shards`` appears (0 where no entry lies in it)."""
        extents = dict.fromkeys(range(self.num_shards), 0)
        for key in self._entries:
            if key == HEADER_ENTRY_KEY:
                continue
            entry = self._entry(key, key.decode("utf-8", "surrogateescape"))
            if entry.size:
                extents[entry.shard_id] = max(extents.get(entry.shard_id, 0), entry.offset + entry.size)
        return extents

    def shape(self, name: str) -> list[int]:
        entry = self.entry(name)
        return self._dims(entry, name)

    def dtype(self, name: str) -> int:
        return self.entry(name).dtype

    # ---- reading -----------------------------------------------------------------------------------
    def get_tensor(self, name: str, owned: bool = False) -> np.ndarray:
        """The full value of a tensor; slices of a partitioned variable are assembled into one array.
        ``owned``: an array of its own, read from the shard without mapping it (a restore keeps
        its values: a view of the mapped shard would hold every page of it resident besides)."""
        entry = self.entry(name)
        if entry.slices:
            return self._assemble(name, entry)
        dims = self._dims(entry, name)
        if owned and dtypes.itemsize(entry.dtype) is not None:
            return self._read_owned(name, entry, dims)
        value = self._read(name, entry, dims)
        return np.array(value, copy=True) if owned else value

    def _read_owned(self, name: str, entry, dims: list[int]) -> np.ndarray:
        """``_read``'s value, read into an array of its own (the same checks, in the same order)."""
        self._check_dtype(name, entry.dtype)
        count = int(np.prod(dims, dtype=object)) if dims else 1
        path = self._shard_path(entry.shard_id, name)
        try:
            with open(path, "rb") as f:
                self._check_extent(name, entry, os.fstat(f.fileno()).st_size, path)
                self._check_size(name, entry, dims, count, dtypes.itemsize(entry.dtype), path)
                array = np.empty(count, dtype=dtypes.as_numpy_dtype(entry.dtype))
                read, buffer = 0, array.view(np.uint8)  # (bfloat16 has no buffer format)
                while read < entry.size:  # (one read returns at most ~2 GiB)
                    got = os.preadv(f.fileno(), [buffer[read:]], entry.offset + read)
                    if not got:
                        break
                    read += got
        except OSError as e:
            raise errors.DataLossError(
                None, None, f"Cannot read data file {path} for tensor '{name}': {e.strerror or e}"
            ) from None
        if read != entry.size:
            raise self._loss(name, f"read {read} of its {entry.size} bytes", path)
        self._check_crc(name, entry, buffer, path)
        return array.reshape(dims)

    def get_slice(self, name: str, full_shape: list[int], spec: list[tuple[int, int]]) -> np.ndarray:
        """The part of a tensor a ``RestoreV2`` shape_and_slice asks for; (start, length) per dim, -1 = all."""
        entry = self.entry(name)
        if not entry.slices:
            stored = self._dims(entry, name)
            if stored != list(full_shape):
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"tensor_name = {name}; shape in shape_and_slice spec {full_shape} does not match "
                    f"the shape stored in checkpoint: {stored}",
                )
        for extent in entry.slices:
            if _extents(extent) == [
                (s, full_shape[d] if n == -1 else n) for d, (s, n) in enumerate(spec)
            ]:  # exactly a stored slice: read it directly, no assembly
                return self._read_slice(name, entry, extent)
        full = self.get_tensor(name)
        if list(full.shape) != list(full_shape):
            raise errors.InvalidArgumentError(
                None,
                None,
                f"tensor_name = {name}; shape in shape_and_slice spec {full_shape} does not match "
                f"the shape stored in checkpoint: {list(full.shape)}",
            )
        index = tuple(slice(None) if n == -1 else slice(s, s + n) for s, n in spec)
        return full[index]

    def _dims(self, entry, name: str) -> list[int]:
        if entry.shape.unknown_rank:
            raise self._loss(name, "its stored shape has unknown rank")
        dims = [d.size for d in entry.shape.dim]
        total = 1
        for d in dims:
            if d < 0:
                raise self._loss(name, f"its stored shape {dims} has a negative dimension")
            total *= d
        if total > _MAX_ELEMENTS:
            raise self._loss(name, f"its stored shape {dims} is too large")
        return dims

    def _loss(self, name: str, what: str, path: str | None = None) -> errors.DataLossError:
        return errors.DataLossError(
            None, None, f"Corrupt checkpoint {path or self._index_path}: tensor '{name}': {what}"
        )

    def _shard_path(self, shard_id: int, name: str) -> str:
        if not 0 <= shard_id < self.num_shards:
            raise self._loss(name, f"shard_id {shard_id} not in [0, {self.num_shards})")
        return data_filename(self.prefix, shard_id, self.num_shards)

    def _shard(self, shard_id: int, name: str) -> tuple[memoryview, str]:
        path = self._shard_path(shard_id, name)
        view = self._shards.get(shard_id)
        if view is None:
            with self._lock:
                view = self._shards.get(shard_id)
                if view is None:
                    view = self._shards[shard_id] = _map_file(path, name)
        return view, path

    def _check_dtype(self, name: str, dtype: int) -> None:
        if not dtypes.is_supported(dtype) or dtype in (dtypes.DT_RESOURCE, dtypes.DT_VARIANT):
            raise errors.UnimplementedError(
                None, None, f"Checkpoint {self.prefix}: tensor '{name}' has unsupported dtype {dtype}"
            )

    def _read(self, name: str, entry, dims: list[int]) -> np.ndarray:
        dtype = entry.dtype
        self._check_dtype(name, dtype)
        count = int(np.prod(dims, dtype=object)) if dims else 1
        data, path = self._shard(entry.shard_id, name)
        self._check_extent(name, entry, len(data), path)
        raw = data[entry.offset : entry.offset + entry.size]
        itemsize = dtypes.itemsize(dtype)
        if itemsize is None:
            return self._read_strings(name, entry, raw, count, dims, path)
        self._check_size(name, entry, dims, count, itemsize, path)
        self._check_crc(name, entry, raw, path)
        return np.frombuffer(raw, dtype=dtypes.as_numpy_dtype(dtype), count=count).reshape(dims)

    def _check_extent(self, name: str, entry, shard_bytes: int, path: str) -> None:
        end = entry.offset + entry.size
        if end > shard_bytes:
            raise self._loss(
                name,
                f"bytes [{entry.offset}, {end}) lie beyond the end of the shard ({shard_bytes} bytes)",
                path,
            )

    def _check_size(self, name: str, entry, dims: list[int], count: int, itemsize: int, path: str) -> None:
        if count * itemsize != entry.size:
            raise self._loss(
                name, f"{entry.size} bytes stored for shape {dims} of {dtypes.name(entry.dtype)}", path
            )

    def _check_crc(self, name: str, entry, data, path: str) -> None:
        actual = crc32c(data)
        if actual != unmask_crc(entry.crc32c):
            raise self._loss(
                name,
                f"Checksum does not match: stored {unmask_crc(entry.crc32c)} vs. calculated on the restored bytes "
                f"{actual}",
                path,
            )

    def _read_strings(self, name, entry, raw: memoryview, count: int, dims, path) -> np.ndarray:
        # Every element costs at least one length byte, so count > size is corrupt before allocating.
        if count > entry.size:
            raise self._loss(name, f"{entry.size} bytes cannot hold {count} strings", path)
        buf = bytes(raw)
        try:
            lengths, pos = read_varints(buf, 0, count)
        except WireError:
            raise self._loss(name, "truncated string length table", path) from None
        if pos + 4 + sum(lengths) != len(buf):
            raise self._loss(name, "string lengths do not add up to the entry's size", path)
        # TF checksums each length as a little-endian uint32 (its in-memory string size), not as the varint.
        crc = (
            google_crc32c.value(struct.pack(f"<{count}I", *(n & 0xFFFFFFFF for n in lengths))) if count else 0
        )
        (stored,) = struct.unpack_from("<I", buf, pos)
        if mask_crc(crc) != stored:
            raise self._loss(name, "The length checksum does not match", path)
        crc = google_crc32c.extend(crc, buf[pos : pos + 4])
        pos += 4
        out = np.empty(count, dtype=object)
        for i, length in enumerate(lengths):
            out[i] = buf[pos : pos + length]
            pos += length
        crc = google_crc32c.extend(crc, buf[pos - sum(lengths) : pos]) if lengths else crc
        if crc != unmask_crc(entry.crc32c):
            raise self._loss(
                name,
                f"Checksum does not match: stored {unmask_crc(entry.crc32c)} vs. calculated on the restored bytes "
                f"{crc}",
                path,
            )
        return out.reshape(dims)

    # ---- partitioned variables ---------------------------------------------------------------------
    def _read_slice(self, name: str, full_entry, extent_proto) -> np.ndarray:
        full_dims = self._dims(full_entry, name)
        extents = _extents(extent_proto)
        if len(extents) != len(full_dims):
            raise self._loss(
                name, f"slice rank {len(extents)} does not match the tensor's rank {len(full_dims)}"
            )
        shape = []
        for (start, length), dim in zip(extents, full_dims):
            length = dim if length == -1 else length
            if start < 0 or length < 0 or start + length > dim:
                raise self._loss(name, f"slice {extents} lies outside the shape {full_dims}")
            shape.append(length)
        key = encode_tensor_name_slice(name, extents)
        try:
            entry = self._entry(key, name)
        except errors.NotFoundError:
            raise self._loss(name, f"missing the entry for its slice {extents}") from None
        if entry.dtype != full_entry.dtype or self._dims(entry, name) != shape:
            raise self._loss(name, f"slice {extents} stored with a different dtype or shape")
        return self._read(name, entry, shape)

    def _assemble(self, name: str, entry) -> np.ndarray:
        dims = self._dims(entry, name)
        if not dtypes.is_supported(entry.dtype) or entry.dtype in (dtypes.DT_RESOURCE, dtypes.DT_VARIANT):
            raise errors.UnimplementedError(
                None, None, f"tensor '{name}' has unsupported dtype {entry.dtype}"
            )
        count = int(np.prod(dims, dtype=object)) if dims else 1
        itemsize = dtypes.itemsize(entry.dtype) or 1
        # The slices' bytes must back the whole tensor before we allocate it: each slice inside its
        # shard, and (slices may overlap) no more in total than the shards they use hold.
        stored = 0
        shard_bytes = {}
        for extent in entry.slices:
            key = encode_tensor_name_slice(name, _extents(extent))
            if key not in self._entries:
                continue
            part = self._entry(key, name)
            data, path = self._shard(part.shard_id, name)
            if part.offset + part.size > len(data):
                raise self._loss(
                    name, f"a slice's bytes lie beyond the end of the shard ({len(data)} bytes)", path
                )
            stored += part.size
            shard_bytes[part.shard_id] = len(data)
        stored = min(stored, sum(shard_bytes.values()))
        if count * itemsize > stored:
            raise self._loss(name, f"its slices hold {stored} bytes, too few for shape {dims}")
        out = np.empty(dims, dtype=dtypes.as_numpy_dtype(entry.dtype))
        for extent in entry.slices:
            part = self._read_slice(name, entry, extent)
            index = tuple(slice(s, s + (d if n == -1 else n)) for (s, n), d in zip(_extents(extent), dims))
            out[index] = part
        return out


def _key(name: str) -> bytes:
    return name.encode("utf-8", "surrogateescape")


def _extents(proto: tensor_slice_pb2.TensorSliceProto) -> list[tuple[int, int]]:
    return [(e.start, e.length if e.HasField("length") else -1) for e in proto.extent]


def _map_file(path: str, name: str) -> memoryview:
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                return memoryview(b"")
            populate = getattr(mmap, "MAP_POPULATE", 0)
            if populate:  # one syscall maps every page: a restore reads them all, faulting them in is slower
                mapped = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_SHARED | populate, prot=mmap.PROT_READ)
            else:
                mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            return memoryview(mapped).toreadonly()  # numpy views of it are read-only too
    except OSError as e:
        raise errors.DataLossError(
            None, None, f"Cannot read data file {path} for tensor '{name}': {e.strerror or e}"
        ) from None


# ---- OrderedCode, as TensorFlow's lib/strings/ordered_code.cc encodes slice keys ----------------------
def _num_increasing(value: int) -> bytes:
    body = value.to_bytes((value.bit_length() + 7) // 8, "big") if value else b""
    return bytes([len(body)]) + body


def _string(value: bytes) -> bytes:
    if b"\x00" in value or b"\xff" in value:
        value = b"".join(b"\x00\xff" if c == 0 else b"\xff\x00" if c == 0xFF else bytes([c]) for c in value)
    return value + b"\x00\x01"


def _signed_num_increasing(value: int) -> bytes:
    x = ~value if value < 0 else value
    length = min(x.bit_length() // 7 + 1, 10)
    raw = bytearray(value.to_bytes(length, "big", signed=True))
    # The length is written as `length` leading bits inverted from the sign; past 8 it spills into byte 1.
    if length <= 8:
        raw[0] ^= (0xFF << (8 - length)) & 0xFF
    else:
        raw[0] ^= 0xFF
        raw[1] ^= (0x80, 0xC0)[length - 9]
    return bytes(raw)


def encode_tensor_name_slice(name: str, extents: list[tuple[int, int]]) -> bytes:
    """The index key of one stored slice of a partitioned variable (``EncodeTensorNameSlice``)."""
    parts = [_num_increasing(0), _string(_key(name)), _num_increasing(len(extents))]
    for start, length in extents:
        parts.append(_signed_num_increasing(start))
        parts.append(_signed_num_increasing(length))
    return b"".join(parts)


def parse_shape_and_slice(text: str) -> tuple[list[int], list[tuple[int, int]]] | None:
    """Parse a ``RestoreV2`` shape_and_slice such as ``"10 3 0,4:-"``; None for the empty string (whole tensor)."""
    if not text:
        return None
    parts = text.split(" ")
    try:
        shape = [int(p) for p in parts[:-1]]
        spec = []
        for dim_spec in parts[-1].split(":"):
            if dim_spec == "-":
                spec.append((0, -1))
            else:
                start, length = dim_spec.split(",")
                spec.append((int(start), int(length)))
    except ValueError:
        raise errors.InvalidArgumentError(
            None, None, f"Expected a shape_and_slice spec, got {text!r}"
        ) from None
    if len(spec) != len(shape) or any(
        s < 0 or (n != -1 and (n < 0 or s + n > d)) for (s, n), d in zip(spec, shape)
    ):
        raise errors.InvalidArgumentError(None, None, f"Invalid shape_and_slice spec {text!r}")
    return shape, spec

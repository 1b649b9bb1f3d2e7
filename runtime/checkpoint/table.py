"""Reader for the immutable sorted string table TensorFlow writes as a TensorBundle's ``.index`` file.

The format is LevelDB's table format as TensorFlow's ``lib/io/table_format.txt`` describes it::

    <beginning of file>
    [data block 1]          entries of sorted (key, value) pairs
    ...
    [data block N]
    [meta block 1 .. K]     TensorFlow writes none
    [metaindex block]       keys are meta block names (empty for TF)
    [index block]           one entry per data block: key >= last key of the block, value = BlockHandle
    [Footer]                fixed 48 bytes
    <end of file>

Every block is followed by a 5-byte trailer: ``type`` (1 byte: 0 = uncompressed, 1 = snappy) and the
masked crc32c (4 bytes, little endian) of the block contents and the type byte.

A block is a run of entries followed by a restart array::

    entry:    varint32 shared_key_bytes | varint32 unshared_key_bytes | varint32 value_length
              | key_delta[unshared] | value[value_length]
    trailer:  fixed32 restart_offset[num_restarts] | fixed32 num_restarts

A key is the previous key's first ``shared`` bytes followed by ``key_delta``; at every restart point
``shared`` is 0. A ``BlockHandle`` is ``varint64 offset | varint64 size`` (size excludes the trailer).
The footer is ``metaindex_handle | index_handle | zero padding to 40 bytes | fixed64 magic``
(magic 0xdb4775248b80fb57, little endian).

TensorFlow's ``BundleWriter`` stores blocks uncompressed; snappy blocks are decoded by a small
pure-Python decoder so that tables from other writers still read. Every malformation raises
``DataLossError`` naming the file; nothing is allocated beyond what the file's length allows.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import google_crc32c

from runtime import errors
from runtime.wire import WireError, read_varint

TABLE_MAGIC = 0xDB4775248B80FB57
FOOTER_LENGTH = 48  # two BlockHandles padded to 40 bytes, then the 8-byte magic
BLOCK_TRAILER_LENGTH = 5
NO_COMPRESSION = 0
SNAPPY_COMPRESSION = 1
_MASK_DELTA = 0xA282EAD8


def mask_crc(crc: int) -> int:
    """crc32c as TF stores it: rotated right by 15 bits plus a constant (``crc32c::Mask``)."""
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


def unmask_crc(masked: int) -> int:
    rot = (masked - _MASK_DELTA) & 0xFFFFFFFF
    return ((rot >> 17) | (rot << 15)) & 0xFFFFFFFF


def crc32c(data, crc: int = 0) -> int:
    """crc32c of a bytes-like object, including mmap slices, without holding a copy of more than 1 MiB;
    ``crc``: that of the bytes before it (a file read in parts)."""
    view = memoryview(data).cast("B")
    step = 1 << 20
    if len(view) <= step and not crc:
        return google_crc32c.value(bytes(view))
    for start in range(0, len(view), step):
        crc = google_crc32c.extend(crc, bytes(view[start : start + step]))
    return crc


class _Corrupt(Exception):
    """Internal: a malformed structure; converted to DataLossError with the file name."""


def _decode_handle(buf, pos: int, limit: int) -> tuple[tuple[int, int], int]:
    offset, pos = read_varint(buf, pos, limit)
    size, pos = read_varint(buf, pos, limit)
    return (offset, size), pos


def snappy_decompress(data: bytes, max_length: int) -> bytes:
    """Decode a raw snappy block (no framing). ``max_length`` bounds the declared uncompressed size."""
    length, pos = read_varint(data, 0, len(data), 5)
    if length > max_length:
        raise _Corrupt(f"snappy block claims {length} bytes")
    out = bytearray()
    n = len(data)
    while pos < n:
        tag = data[pos]
        pos += 1
        kind = tag & 3
        if kind == 0:  # literal
            size = tag >> 2
            if size >= 60:
                extra = size - 59
                if pos + extra > n:
                    raise _Corrupt("truncated snappy literal")
                size = int.from_bytes(data[pos : pos + extra], "little")
                pos += extra
            size += 1
            if pos + size > n:
                raise _Corrupt("truncated snappy literal")
            out += data[pos : pos + size]
            pos += size
        else:
            if kind == 1:
                if pos >= n:
                    raise _Corrupt("truncated snappy copy")
                size = ((tag >> 2) & 7) + 4
                offset = ((tag >> 5) << 8) | data[pos]
                pos += 1
            else:
                width = 2 if kind == 2 else 4
                if pos + width > n:
                    raise _Corrupt("truncated snappy copy")
                size = (tag >> 2) + 1
                offset = int.from_bytes(data[pos : pos + width], "little")
                pos += width
            if offset == 0 or offset > len(out):
                raise _Corrupt("bad snappy copy offset")
            for _ in range(size):  # overlapping copies repeat the pattern byte by byte
                out.append(out[-offset])
        if len(out) > length:
            raise _Corrupt("snappy output exceeds declared length")
    if len(out) != length:
        raise _Corrupt("snappy output shorter than declared")
    return bytes(out)


class Table:
    """An opened ``.index`` table over a bytes-like buffer; immutable and safe to share across threads.

    ``items()`` yields every (key, value) in key order; ``get(key)`` looks one key up by binary search
    of the index block. Keys and values are ``bytes``.
    """

    def __init__(self, data, filename: str):
        self._data = data
        self.filename = filename
        try:
            self._index = self._read_index()
        except (_Corrupt, WireError) as e:
            raise self._error(str(e)) from None

    def _error(self, what: str) -> errors.DataLossError:
        return errors.DataLossError(None, None, f"Corrupt table {self.filename}: {what}")

    def _read_index(self) -> list[tuple[bytes, tuple[int, int]]]:
        size = len(self._data)
        if size < FOOTER_LENGTH:
            raise _Corrupt(f"file is too short ({size} bytes) to be an sstable")
        footer = bytes(self._data[size - FOOTER_LENGTH :])
        if struct.unpack_from("<Q", footer, 40)[0] != TABLE_MAGIC:
            raise _Corrupt("not an sstable (bad magic number)")
        metaindex_handle, pos = _decode_handle(footer, 0, 40)
        index_handle, pos = _decode_handle(footer, pos, 40)
        # TF zero-fills the padding; anything else there is a flipped bit in the handles or padding.
        if any(footer[pos:40]):
            raise _Corrupt("non-zero footer padding")
        for _ in _block_entries(self._read_block(metaindex_handle)):
            pass  # verified (checksum and structure), otherwise unused: TF writes no meta blocks
        index_block = self._read_block(index_handle)
        entries = []
        for key, value in _block_entries(index_block):
            handle, end = _decode_handle(value, 0, len(value))
            entries.append((key, handle))
        return entries

    def _read_block(self, handle: tuple[int, int]) -> bytes:
        offset, size = handle
        end = offset + size + BLOCK_TRAILER_LENGTH
        if end > len(self._data) - FOOTER_LENGTH:
            raise _Corrupt(f"block handle (offset {offset}, size {size}) beyond end of file")
        raw = bytes(self._data[offset:end])
        stored = struct.unpack_from("<I", raw, size + 1)[0]
        if unmask_crc(stored) != google_crc32c.value(raw[: size + 1]):
            raise _Corrupt(f"block checksum mismatch at offset {offset}")
        kind = raw[size]
        if kind == NO_COMPRESSION:
            return raw[:size]
        if kind == SNAPPY_COMPRESSION:
            # No snappy stream expands more than ~22x (a 3-byte copy yields 64 bytes): bound the output.
            return snappy_decompress(raw[:size], max_length=max(size, 1) * 32)
        raise _Corrupt(f"bad block compression type {kind}")

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        """Every (key, value) pair in key order."""
        try:
            for _, handle in self._index:
                yield from _block_entries(self._read_block(handle))
        except (_Corrupt, WireError) as e:
            raise self._error(str(e)) from None

    def get(self, key: bytes) -> bytes | None:
        """The value stored under ``key``, or None."""
        lo, hi = 0, len(self._index)
        while lo < hi:  # first block whose separator key is >= key
            mid = (lo + hi) // 2
            if self._index[mid][0] < key:
                lo = mid + 1
            else:
                hi = mid
        if lo == len(self._index):
            return None
        try:
            for k, v in _block_entries(self._read_block(self._index[lo][1])):
                if k == key:
                    return v
                if k > key:
                    return None
        except (_Corrupt, WireError) as e:
            raise self._error(str(e)) from None
        return None


def _block_entries(block: bytes) -> Iterator[tuple[bytes, bytes]]:
    """Decode a block's entries sequentially, checking every length against the block's bounds."""
    if len(block) < 4:
        raise _Corrupt("block too short")
    num_restarts = struct.unpack_from("<I", block, len(block) - 4)[0]
    if num_restarts > (len(block) - 4) // 4:
        raise _Corrupt("bad restart count in block")
    limit = len(block) - 4 - 4 * num_restarts
    pos = 0
    key = b""
    while pos < limit:
        shared, pos = read_varint(block, pos, limit, 5)
        unshared, pos = read_varint(block, pos, limit, 5)
        value_length, pos = read_varint(block, pos, limit, 5)
        if shared > len(key) or pos + unshared + value_length > limit:
            raise _Corrupt("bad entry in block")
        key = key[:shared] + block[pos : pos + unshared]
        pos += unshared
        yield key, block[pos : pos + value_length]
        pos += value_length

"""Test helpers: write SSTables and TensorBundles byte by byte, to craft valid and hostile checkpoints.

Only tests use this; the package never writes checkpoints.
"""

from __future__ import annotations

import struct

import google_crc32c
import numpy as np

from apis.tensorflow.core.protobuf import tensor_bundle_pb2
from runtime import dtypes
from runtime.checkpoint.table import TABLE_MAGIC, mask_crc


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def block(entries: list[tuple[bytes, bytes]], restart_interval: int = 16) -> bytes:
    out = bytearray()
    restarts = []
    previous = b""
    for i, (key, value) in enumerate(entries):
        shared = 0
        if i % restart_interval == 0:
            restarts.append(len(out))
        else:
            while shared < min(len(key), len(previous)) and key[shared] == previous[shared]:
                shared += 1
        out += varint(shared) + varint(len(key) - shared) + varint(len(value)) + key[shared:] + value
        previous = key
    restarts = restarts or [0]
    out += b"".join(struct.pack("<I", r) for r in restarts) + struct.pack("<I", len(restarts))
    return bytes(out)


def _with_trailer(contents: bytes, kind: int = 0) -> bytes:
    crc = google_crc32c.value(contents + bytes([kind]))
    return contents + bytes([kind]) + struct.pack("<I", mask_crc(crc))


def table(entries: list[tuple[bytes, bytes]], block_entries: int = 3, compress=None) -> bytes:
    """An SSTable with ``block_entries`` entries per data block; ``compress(bytes) -> bytes`` snappy-codes blocks."""
    out = bytearray()
    index = []
    entries = sorted(entries)
    for start in range(0, len(entries), block_entries):
        chunk = entries[start : start + block_entries]
        contents = block(chunk)
        kind = 0
        if compress is not None:
            contents, kind = compress(contents), 1
        handle = varint(len(out)) + varint(len(contents))
        out += _with_trailer(contents, kind)
        index.append((chunk[-1][0], handle))
    meta = varint(len(out)) + varint(len(block([])))
    out += _with_trailer(block([]))
    index_handle = varint(len(out)) + varint(len(block(index)))
    out += _with_trailer(block(index))
    footer = (meta + index_handle).ljust(40, b"\0") + struct.pack("<Q", TABLE_MAGIC)
    return bytes(out) + footer


def snappy_literal(data: bytes) -> bytes:
    """A valid snappy stream made of one literal (enough to exercise the decoder's framing)."""
    n = len(data) - 1
    if n < 60:
        tag = bytes([n << 2])
    else:
        tag = bytes([61 << 2]) + struct.pack("<H", n)
    return varint(len(data)) + tag + data


def write_bundle(prefix: str, tensors: dict[str, np.ndarray], entry_overrides: dict | None = None) -> None:
    """A one-shard bundle of fixed-size tensors; ``entry_overrides[name]`` edits fields of an entry."""
    data = bytearray()
    entries = []
    header = tensor_bundle_pb2.BundleHeaderProto(num_shards=1)
    header.version.producer = 1
    entries.append((b"", header.SerializeToString()))
    for name, value in tensors.items():
        raw = np.ascontiguousarray(value).tobytes()
        entry = tensor_bundle_pb2.BundleEntryProto(
            dtype=dtypes.from_numpy(value.dtype), shard_id=0, offset=len(data), size=len(raw)
        )
        entry.crc32c = mask_crc(google_crc32c.value(raw))
        for d in value.shape:
            entry.shape.dim.add().size = d
        for field, override in (entry_overrides or {}).get(name, {}).items():
            if field == "dims":
                del entry.shape.dim[:]
                for d in override:
                    entry.shape.dim.add().size = d
            else:
                setattr(entry, field, override)
        entries.append((name.encode(), entry.SerializeToString()))
        data += raw
    with open(prefix + ".index", "wb") as f:
        f.write(table(entries))
    with open(prefix + ".data-00000-of-00001", "wb") as f:
        f.write(bytes(data))

"""TFRecord files: what warmup reads (``assets.extra/tf_serving_warmup_requests``) and the
request log writes.

Each record, as TensorFlow's ``RecordWriter`` writes it (no compression)::

    uint64 length (little endian) | uint32 masked crc32c of those 8 bytes
    byte   data[length]           | uint32 masked crc32c of data

Both checksums are checked. Errors are TensorFlow's ``RecordReader``'s: DATA_LOSS "truncated
record at <offset>" or "corrupted record at <offset>" (with " (Is this even a TFRecord file?)"
at offset 0). A length field larger than what is left of the file is a truncation, found
before anything is allocated, so a corrupt file never makes the reader allocate its claim.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import BinaryIO

from runtime import errors
from runtime.checkpoint.table import crc32c, mask_crc, unmask_crc

HEADER_SIZE, FOOTER_SIZE = 12, 4


def _suffix(offset: int) -> str:
    return " (Is this even a TFRecord file?)" if offset == 0 else ""


def _checked(data: bytes, crc_bytes: bytes, offset: int) -> bytes:
    if unmask_crc(struct.unpack("<I", crc_bytes)[0]) != crc32c(data):
        raise errors.DataLossError(None, None, f"corrupted record at {offset}{_suffix(offset)}")
    return data


def read_records(f: BinaryIO, size: int) -> Iterator[bytes]:
    """The records of an open file of ``size`` bytes, in order."""
    offset = 0
    while offset < size:
        header = f.read(HEADER_SIZE)
        if len(header) < HEADER_SIZE:
            raise errors.DataLossError(None, None, f"truncated record at {offset}{_suffix(offset)}")
        (length,) = struct.unpack("<Q", _checked(header[:8], header[8:], offset))
        if length + FOOTER_SIZE > size - offset - HEADER_SIZE:
            raise errors.DataLossError(None, None, f"truncated record at {offset}{_suffix(offset)}")
        body = f.read(length + FOOTER_SIZE)
        yield _checked(body[:length], body[length:], offset + HEADER_SIZE)
        offset += HEADER_SIZE + length + FOOTER_SIZE


def encode_record(data: bytes) -> bytes:
    """One record's bytes, for appending to a TFRecord file."""
    length = struct.pack("<Q", len(data))
    return (
        length
        + struct.pack("<I", mask_crc(crc32c(length)))
        + data
        + struct.pack("<I", mask_crc(crc32c(data)))
    )

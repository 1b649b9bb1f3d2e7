"""The TensorBundle and SSTable readers on crafted files: format details, limits and corruption."""

from __future__ import annotations

import os

import numpy as np
import pytest

from runtime import errors
from runtime.checkpoint.table import Table, _Corrupt, mask_crc, snappy_decompress, unmask_crc
from runtime.checkpoint.tensor_bundle import (
    BundleReader,
    _signed_num_increasing,
    encode_tensor_name_slice,
    parse_shape_and_slice,
)
from tests.runtime.bundle_files import snappy_literal, table, write_bundle


def test_crc_mask_round_trips():
    for crc in (0, 1, 0xFFFFFFFF, 0x12345678, 0xA282EAD8):
        assert unmask_crc(mask_crc(crc)) == crc


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x80"),
        (4, b"\x84"),
        (-1, b"\x7f"),
        (63, b"\xbf"),
        (-64, b"\x40"),
        (64, b"\xc0\x40"),
        (6667, b"\xda\x0b"),
        (8191, b"\xdf\xff"),
        (8192, b"\xe0\x20\x00"),
        (-65, b"\x3f\xbf"),
        (2**63 - 1, b"\xff\xc0\x7f\xff\xff\xff\xff\xff\xff\xff"),
    ],
)
def test_ordered_code_signed_numbers(value, encoded):
    assert _signed_num_increasing(value) == encoded


def test_slice_key_matches_tensorflow_layout():
    # From an index TF wrote for variable "p" of shape [10, 3] split 4/3/3 along dim 0.
    assert encode_tensor_name_slice("p", [(0, 4), (0, 3)]) == bytes.fromhex(
        "0070000101028084808 3".replace(" ", "")
    )
    assert encode_tensor_name_slice("a\x00b", [])[:6] == b"\x00a\x00\xffb\x00"


def test_table_with_many_blocks_and_prefix_compression():
    entries = [(f"key{i:04d}".encode(), f"value{i}".encode() * (i % 5)) for i in range(200)]
    t = Table(table(entries, block_entries=7), "mem.index")
    assert list(t.items()) == sorted(entries)
    assert t.get(b"key0150") == b"value150" * 0
    assert t.get(b"key0151") == b"value151"
    assert t.get(b"key9999") is None and t.get(b"a") is None


def test_snappy_blocks_are_decoded():
    entries = [(b"a", b"1"), (b"b", b"2" * 100)]
    t = Table(table(entries, compress=snappy_literal), "snappy.index")
    assert dict(t.items()) == dict(entries)
    # a copy op repeating the previous 2 bytes: "ab" + copy(offset 2, length 6) = "abababab"
    stream = bytes([8, 1 << 2]) + b"ab" + bytes([((6 - 4) << 2) | 1, 2])
    assert snappy_decompress(stream, 100) == b"abababab"
    with pytest.raises(_Corrupt):
        snappy_decompress(bytes([200, 1]) + b"x", 100)  # claims more than allowed


def test_table_corruption_is_data_loss():
    good = table([(b"k", b"v")])
    for bad in (good[:-1], good[:10], b"", good[:-8] + b"\0" * 8, bytes([good[0] ^ 1]) + good[1:]):
        with pytest.raises(errors.DataLossError, match="bad.index"):
            list(Table(bad, "bad.index").items())


@pytest.mark.parametrize("owned", [False, True])  # mapped view, or read into its own array
def test_bundle_round_trip_every_fixed_dtype(tmp_path, owned):
    import ml_dtypes

    tensors = {
        f"t{i}": np.arange(6).astype(dt).reshape(2, 3)
        for i, dt in enumerate(
            [np.float16, ml_dtypes.bfloat16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
             np.uint8, np.uint16, np.uint32, np.uint64, np.bool_, np.complex64, np.complex128]
        )
    }  # fmt: skip
    prefix = str(tmp_path / "ckpt")
    write_bundle(prefix, tensors)
    reader = BundleReader(prefix)
    for name, value in tensors.items():
        got = reader.get_tensor(name, owned=owned)
        assert got.dtype == value.dtype and got.tobytes() == value.tobytes()
        assert got.flags.writeable == owned  # a view of the mapped shard is read-only


@pytest.mark.parametrize("owned", [False, True])  # mapped view, or read into its own array
def test_entry_claiming_huge_shape_fails_before_allocating(tmp_path, owned):
    prefix = str(tmp_path / "ckpt")
    write_bundle(
        prefix,
        {"huge": np.zeros(4, np.float32), "neg": np.zeros(1, np.float32), "beyond": np.zeros(2, np.float32)},
        {"huge": {"dims": [10**6, 10**6]}, "neg": {"dims": [-5]}, "beyond": {"offset": 1 << 40}},
    )
    reader = BundleReader(prefix)
    with pytest.raises(errors.DataLossError, match="huge"):
        reader.get_tensor("huge", owned=owned)
    with pytest.raises(errors.DataLossError, match="neg"):
        reader.get_tensor("neg", owned=owned)
    with pytest.raises(errors.DataLossError, match="beyond.*data-00000-of-00001|data-00000-of-00001.*beyond"):
        reader.get_tensor("beyond", owned=owned)


@pytest.mark.parametrize("owned", [False, True])  # mapped view, or read into its own array
def test_checksum_mismatch_names_file_and_tensor(tmp_path, owned):
    prefix = str(tmp_path / "ckpt")
    write_bundle(prefix, {"w": np.arange(8, dtype=np.float32)})
    path = prefix + ".data-00000-of-00001"
    data = bytearray(open(path, "rb").read())
    data[5] ^= 0x10
    open(path, "wb").write(bytes(data))
    with pytest.raises(
        errors.DataLossError, match=r"ckpt\.data-00000-of-00001: tensor 'w': Checksum does not match"
    ):
        BundleReader(prefix).get_tensor("w", owned=owned)


@pytest.mark.parametrize("owned", [False, True])  # mapped view, or read into its own array
def test_missing_and_truncated_shard(tmp_path, owned):
    prefix = str(tmp_path / "ckpt")
    write_bundle(prefix, {"w": np.arange(8, dtype=np.float32)})
    path = prefix + ".data-00000-of-00001"
    with open(path, "r+b") as f:
        f.truncate(20)
    with pytest.raises(errors.DataLossError, match="'w'.*beyond the end"):
        BundleReader(prefix).get_tensor("w", owned=owned)
    os.remove(path)
    with pytest.raises(errors.DataLossError, match=r"data-00000-of-00001 for tensor 'w'"):
        BundleReader(prefix).get_tensor("w", owned=owned)


def test_big_endian_bundle_is_refused(tmp_path):
    from apis.tensorflow.core.protobuf import tensor_bundle_pb2

    header = tensor_bundle_pb2.BundleHeaderProto(
        num_shards=1, endianness=tensor_bundle_pb2.BundleHeaderProto.BIG
    )
    (tmp_path / "c.index").write_bytes(table([(b"", header.SerializeToString())]))
    with pytest.raises(errors.UnimplementedError, match="endianness"):
        BundleReader(str(tmp_path / "c"))


def test_shape_and_slice_parsing():
    assert parse_shape_and_slice("") is None
    assert parse_shape_and_slice("10 3 0,4:-") == ([10, 3], [(0, 4), (0, -1)])
    for bad in ("10 3 0,4", "x y", "10 0,11"):
        with pytest.raises(errors.InvalidArgumentError):
            parse_shape_and_slice(bad)


def test_tensorflow_multi_block_index_lookups():
    from tests.loader.corpus import manifest

    m = manifest("loader_many_variables")
    path = m["export_path"] / "variables" / "variables.index"
    t = Table(path.read_bytes(), str(path))
    assert len(t._index) >= 3  # TF cut the index into several data blocks
    items = list(t.items())
    assert len(items) == 2501  # header + one entry per variable
    assert all(t.get(key) == value for key, value in items)
    assert t.get(items[-1][0] + b"\x00") is None
    reader = BundleReader(str(path)[: -len(".index")])
    assert sorted(reader.keys()) == sorted(m["variables"])


def test_partitioned_entry_claiming_more_than_its_shards_hold(tmp_path):
    from apis.tensorflow.core.protobuf import tensor_bundle_pb2

    header = tensor_bundle_pb2.BundleHeaderProto(num_shards=1)
    full = tensor_bundle_pb2.BundleEntryProto(dtype=1)
    part = tensor_bundle_pb2.BundleEntryProto(dtype=1, size=4 * 10**12)
    for proto in (full, part):
        proto.shape.dim.add().size = 10**6
        proto.shape.dim.add().size = 10**6
    extents = full.slices.add()
    extents.extent.add(start=0, length=10**6)
    extents.extent.add(start=0)
    key = encode_tensor_name_slice("p", [(0, 10**6), (0, -1)])
    entries = [
        (b"", header.SerializeToString()),
        (b"p", full.SerializeToString()),
        (key, part.SerializeToString()),
    ]
    (tmp_path / "c.index").write_bytes(table(entries))
    (tmp_path / "c.data-00000-of-00001").write_bytes(b"\0" * 64)
    with pytest.raises(errors.DataLossError, match="'p'.*beyond the end of the shard"):
        BundleReader(str(tmp_path / "c")).get_tensor("p")
    part.size = 64
    entries[2] = (key, part.SerializeToString())
    (tmp_path / "c.index").write_bytes(table(entries))
    with pytest.raises(errors.DataLossError, match="'p'.*its slices hold 64 bytes"):
        BundleReader(str(tmp_path / "c")).get_tensor("p")

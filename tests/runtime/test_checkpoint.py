"""``runtime.checkpoint.reader.load_checkpoint`` against TensorFlow's checkpoint reader, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from apis.tensorflow.core.framework import tensor_pb2
from runtime import dtypes, errors
from runtime.checkpoint.reader import latest_checkpoint, load_checkpoint
from runtime.tensor_util import make_ndarray
from tests.loader.corpus import manifest, manifests


def _expected(path) -> tuple[np.ndarray, int, list[int]]:
    proto = tensor_pb2.TensorProto()
    proto.ParseFromString(path.read_bytes())
    return make_ndarray(proto), proto.dtype, [d.size for d in proto.tensor_shape.dim]


def _same_bits(ours, theirs: np.ndarray) -> bool:
    ours = np.asarray(ours, dtype=theirs.dtype) if not isinstance(ours, np.ndarray) else ours
    if ours.shape != theirs.shape or ours.dtype != theirs.dtype:
        return False
    if theirs.dtype == object:
        return all(a == b for a, b in zip(ours.reshape(-1), theirs.reshape(-1)))
    return ours.tobytes() == np.ascontiguousarray(theirs).tobytes()


def test_every_corpus_variable_matches_tensorflow_bit_exactly():
    checked = 0
    for m in [m for m in manifests() if m["variables"]]:
        reader = load_checkpoint(str(m["export_path"] / "variables" / "variables"))
        shapes = reader.get_variable_to_shape_map()
        types = reader.get_variable_to_dtype_map()
        assert sorted(shapes) == sorted(m["variables"]), m["name"]
        for name, rel in m["variables"].items():
            theirs, dtype, shape = _expected(m["dir"] / rel)
            ours = reader.get_tensor(name)
            assert types[name] == dtype, (m["name"], name)
            assert shapes[name] == shape, (m["name"], name)
            if isinstance(ours, bytes):
                ours = np.array(ours, dtype=object)
            assert _same_bits(ours, theirs), (m["name"], name)
            checked += 1
    assert checked > 30


def test_all_dtypes_are_covered_and_read_only_views():
    m = manifest("loader_all_dtypes")
    reader = load_checkpoint(str(m["export_path"] / "variables" / "variables"))
    seen = set(reader.get_variable_to_dtype_map().values())
    wanted = {
        dtypes.DT_HALF, dtypes.DT_BFLOAT16, dtypes.DT_FLOAT, dtypes.DT_DOUBLE, dtypes.DT_INT8, dtypes.DT_INT16,
        dtypes.DT_INT32, dtypes.DT_INT64, dtypes.DT_UINT8, dtypes.DT_UINT16, dtypes.DT_UINT32, dtypes.DT_UINT64,
        dtypes.DT_BOOL, dtypes.DT_COMPLEX64, dtypes.DT_COMPLEX128, dtypes.DT_STRING,
    }  # fmt: skip
    assert wanted <= seen
    big = reader.get_tensor("f32_big")
    assert not big.flags.writeable and not big.flags.owndata  # a view of the mmapped shard
    assert reader.get_tensor("str_scalar") == b"scalar string"


def test_partitioned_variables_are_assembled_and_sliced():
    m = manifest("loader_partitioned_sharded")
    reader = load_checkpoint(str(m["export_path"] / "variables" / "variables"))
    tall = reader.get_tensor("tall")
    assert tall.shape == (20000, 2)
    assert reader.get_variable_to_shape_map()["wide"] == [4, 130]
    part = reader.bundle.get_slice("tall", [20000, 2], [(6667, 6667), (0, -1)])
    assert np.array_equal(part, tall[6667:13334])
    assert reader.bundle.num_shards == 2
    arbitrary = reader.bundle.get_slice("tall", [20000, 2], [(5, 10000), (1, 1)])
    assert np.array_equal(arbitrary, tall[5:10005, 1:2])


def test_missing_checkpoint_and_key(tmp_path):
    with pytest.raises(errors.NotFoundError, match="Failed to find any matching files"):
        load_checkpoint(str(tmp_path / "nothing"))
    m = manifest("loader_all_dtypes")
    reader = load_checkpoint(str(m["export_path"] / "variables" / "variables"))
    assert not reader.has_tensor("nope") and reader.has_tensor("f32")
    with pytest.raises(errors.NotFoundError, match="Key nope not found in checkpoint"):
        reader.get_tensor("nope")


def test_directory_resolves_through_checkpoint_state(tmp_path):
    from tests.runtime.bundle_files import write_bundle

    write_bundle(str(tmp_path / "model.ckpt-5"), {"v": np.arange(3, dtype=np.int32)})
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-5"\n')
    assert latest_checkpoint(str(tmp_path)) == str(tmp_path / "model.ckpt-5")
    assert load_checkpoint(str(tmp_path)).get_tensor("v").tolist() == [0, 1, 2]


def test_restore_v2_kernel_reads_whole_tensors_and_slices():
    from runtime.kernels import lookup

    m = manifest("loader_partitioned_sharded")
    prefix = np.array(str(m["export_path"] / "variables" / "variables").encode(), dtype=object)
    restore = lookup("RestoreV2")
    assert restore is not None and restore.stateful
    names = np.array([b"names", b"tall", b"tall"], dtype=object)
    specs = np.array([b"", b"", b"20000 2 6667,6667:-"], dtype=object)
    names_value, tall, part = restore.fn(prefix, names, specs, dtypes=[dtypes.DT_STRING, dtypes.DT_FLOAT, 1])
    assert names_value.tolist() == [b"alpha", b"beta", b"gamma", b"delta"]
    assert np.array_equal(part, tall[6667:13334])
    with pytest.raises(
        errors.InvalidArgumentError, match="expected dtype double does not equal original dtype float"
    ):
        restore.fn(prefix, names[1:2], specs[1:2], dtypes=[dtypes.DT_DOUBLE])
    with pytest.raises(errors.NotFoundError, match="Key missing not found in checkpoint"):
        restore.fn(prefix, np.array([b"missing"], object), np.array([b""], object), dtypes=[1])


def test_saver_string_ops_and_write_ops():
    from runtime.kernels import lookup

    joined = lookup("StringJoin").fn([np.array(b"a", object), np.array([b"x", b"y"], object)], separator="/")
    assert joined.tolist() == [b"a/x", b"a/y"]
    name = lookup("ShardedFilename").fn(np.array(b"model", object), np.int32(1), np.int32(2))
    assert name.item() == b"model-00001-of-00002"
    with pytest.raises(errors.UnimplementedError, match="SaveV2 is not supported"):
        lookup("SaveV2").fn()

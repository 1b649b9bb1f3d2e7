"""TensorFlow-core wire cases: tensors, examples, SavedModel and checkpoint records.

Imports only `google.protobuf` (through the `pb` loader each builder receives), so it
runs against TensorFlow's modules in the oracle venv and against ours in the main venv.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    build: Callable  # (Protos) -> Message
    check: Callable  # (Message) -> None, raises AssertionError


def case(module_globals: dict, name: str) -> Case:
    """The Case made of `name` and `check_<name>` defined in a cases module."""
    return Case(module_globals[name], module_globals["check_" + name])


# --- tensors -------------------------------------------------------------------------


def shape(pb, *dims, unknown_rank=False):
    proto = pb("tensorflow/core/framework/tensor_shape").TensorShapeProto(unknown_rank=unknown_rank)
    for size in dims:
        proto.dim.add(size=size)
    return proto


def typed_tensors(pb) -> dict:
    """One tensor per dtype, each filled through the *_val field TensorFlow uses for it."""
    types = pb("tensorflow/core/framework/types")
    tensor = pb("tensorflow/core/framework/tensor")
    handle = pb("tensorflow/core/framework/resource_handle")

    def make(dtype, dims, **vals):
        t = tensor.TensorProto(dtype=types.DataType.Value(dtype), tensor_shape=shape(pb, *dims))
        for field, values in vals.items():
            if isinstance(values, bytes):
                setattr(t, field, values)
            else:
                getattr(t, field).extend(values)
        return t

    resource = handle.ResourceHandleProto(
        device="/job:localhost/replica:0/task:0/device:CPU:0",
        container="c",
        name="var",
        hash_code=2**64 - 1,
        maybe_type_name="tensorflow::Var",
    )
    resource.dtypes_and_shapes.add(dtype=types.DT_FLOAT, shape=shape(pb, 2, -1))
    variant = tensor.VariantTensorDataProto(type_name="tensorflow::Tensor", metadata=b"\x00\x01")
    variant.tensors.append(make("DT_INT32", [1], int_val=[7]))
    return {
        "half": make("DT_HALF", [3], half_val=[0x3C00, 0xBC00, 0x7E00]),
        "bfloat16": make("DT_BFLOAT16", [2], half_val=[0x3F80, 0xFF80]),
        "float": make("DT_FLOAT", [2, 2], float_val=[1.5, -0.0, math.inf, 3.25]),
        "double": make("DT_DOUBLE", [2], double_val=[1e300, -2.5e-300]),
        "int8": make("DT_INT8", [2], int_val=[-128, 127]),
        "int16": make("DT_INT16", [2], int_val=[-32768, 32767]),
        "int32": make("DT_INT32", [3], int_val=[-(2**31), 0, 2**31 - 1]),
        "uint8": make("DT_UINT8", [2], int_val=[0, 255]),
        "uint16": make("DT_UINT16", [2], int_val=[0, 65535]),
        "qint8": make("DT_QINT8", [2], int_val=[-1, 1]),
        "int64": make("DT_INT64", [2], int64_val=[-(2**63), 2**63 - 1]),
        "uint32": make("DT_UINT32", [2], uint32_val=[0, 2**32 - 1]),
        "uint64": make("DT_UINT64", [2], uint64_val=[1, 2**64 - 1]),
        "bool": make("DT_BOOL", [3], bool_val=[True, False, True]),
        "string": make("DT_STRING", [2], string_val=[b"caf\xc3\xa9", b"\x00\xff"]),
        "complex64": make("DT_COMPLEX64", [2], scomplex_val=[1.0, -1.0, 0.5, 2.0]),
        "complex128": make("DT_COMPLEX128", [1], dcomplex_val=[1e-10, -3.0]),
        "resource": make("DT_RESOURCE", [], resource_handle_val=[resource]),
        "variant": make("DT_VARIANT", [], variant_val=[variant]),
        "float8": make("DT_FLOAT8_E4M3FN", [2], float8_val=b"\x38\xb8"),
        "scalar_broadcast": make("DT_FLOAT", [4, 3], float_val=[0.25]),
        "content": make("DT_FLOAT", [2], tensor_content=struct.pack("<2f", 1.0, -1.5)),
        "unknown_dims": tensor.TensorProto(
            dtype=types.DT_FLOAT, tensor_shape=shape(pb, -1, 3, -1), version_number=1
        ),
        "unknown_rank": tensor.TensorProto(dtype=types.DT_INT64, tensor_shape=shape(pb, unknown_rank=True)),
    }


def example(pb, i: int):
    example = pb("tensorflow/core/example/example").Example()
    feature = example.features.feature
    feature["bytes"].bytes_list.value.extend([b"a%d" % i, b"\xff"])
    feature["float"].float_list.value.extend([0.5 * i, -1.0])
    feature["int64"].int64_list.value.extend([i, -(2**63)])
    feature["empty"].float_list.SetInParent()
    return example


def signature_defs(pb):
    meta_graph = pb("tensorflow/core/protobuf/meta_graph")
    types = pb("tensorflow/core/framework/types")
    signatures = pb("tensorflow_serving/apis/get_model_metadata").SignatureDefMap()
    predict = signatures.signature_def["serving_default"]
    predict.method_name = "tensorflow/serving/predict"
    predict.inputs["x"].CopyFrom(
        meta_graph.TensorInfo(name="x:0", dtype=types.DT_FLOAT, tensor_shape=shape(pb, -1, 3))
    )
    predict.outputs["y"].CopyFrom(
        meta_graph.TensorInfo(name="y:0", dtype=types.DT_FLOAT, tensor_shape=shape(pb, -1))
    )
    sparse = predict.inputs["sparse"]
    sparse.dtype = types.DT_INT64
    sparse.coo_sparse.values_tensor_name = "sv:0"
    sparse.coo_sparse.indices_tensor_name = "si:0"
    sparse.coo_sparse.dense_shape_tensor_name = "ss:0"
    classify = signatures.signature_def["classify"]
    classify.method_name = "tensorflow/serving/classify"
    classify.inputs["inputs"].CopyFrom(meta_graph.TensorInfo(name="tf_example:0", dtype=types.DT_STRING))
    classify.defaults["threshold"].CopyFrom(typed_tensors(pb)["float"])
    return signatures


def signature_def_map(pb):
    return signature_defs(pb)


def check_signature_def_map(signatures) -> None:
    predict = signatures.signature_def["serving_default"]
    assert predict.inputs["sparse"].WhichOneof("encoding") == "coo_sparse"
    assert [d.size for d in predict.inputs["x"].tensor_shape.dim] == [-1, 3]


# --- SavedModel pieces ---------------------------------------------------------------


def saved_model(pb):
    """A hand-built SavedModel touching graph, function, attr and object-graph messages."""
    types = pb("tensorflow/core/framework/types")
    attr_value = pb("tensorflow/core/framework/attr_value")
    model = pb("tensorflow/core/protobuf/saved_model").SavedModel(saved_model_schema_version=1)
    meta_graph = model.meta_graphs.add()
    meta_graph.meta_info_def.tags.extend(["serve", "gpu"])
    meta_graph.meta_info_def.tensorflow_version = "2.21.0"
    meta_graph.meta_info_def.stripped_op_list.op.add(name="Const")
    meta_graph.signature_def["serving_default"].CopyFrom(signature_defs(pb).signature_def["serving_default"])
    graph = meta_graph.graph_def
    graph.versions.producer = 2000
    graph.versions.min_consumer = 12
    node = graph.node.add(name="c", op="Const", device="/device:CPU:0")
    node.attr["dtype"].type = types.DT_FLOAT
    node.attr["value"].tensor.CopyFrom(typed_tensors(pb)["content"])
    node.attr["shape"].shape.CopyFrom(shape(pb, 2))
    node.attr["list"].list.i.extend([1, -2])
    node.attr["list"].list.type.extend([types.DT_INT32, types.DT_STRING])
    node.attr["func"].func.CopyFrom(attr_value.NameAttrList(name="f"))
    node.attr["s"].s = b"bytes"
    add = graph.node.add(name="add", op="AddV2", input=["c", "c:0", "^c"])
    add.attr["T"].type = types.DT_FLOAT
    function = graph.library.function.add()
    function.signature.name = "f"
    function.signature.input_arg.add(name="x", type=types.DT_FLOAT)
    function.signature.output_arg.add(name="y", type=types.DT_FLOAT)
    function.ret["y"] = "x"
    meta_graph.saver_def.filename_tensor_name = "save/Const:0"
    meta_graph.saver_def.version = 2
    meta_graph.collection_def["variables"].bytes_list.value.append(b"\x0a\x01v")
    meta_graph.asset_file_def.add(filename="vocab.txt").tensor_info.name = "asset:0"
    objects = meta_graph.object_graph_def
    root = objects.nodes.add()
    root.children.add(node_id=1, local_name="v")
    variable = objects.nodes.add().variable
    variable.dtype = types.DT_FLOAT
    variable.shape.CopyFrom(shape(pb, 2))
    variable.trainable = True
    concrete = objects.concrete_functions["f"]
    concrete.bound_inputs.append(1)
    concrete.output_signature.tuple_value.values.add().none_value.SetInParent()
    return model


def check_saved_model(model) -> None:
    meta_graph = model.meta_graphs[0]
    assert list(meta_graph.meta_info_def.tags) == ["serve", "gpu"]
    node = meta_graph.graph_def.node[0]
    assert node.attr["dtype"].type == 1
    assert list(node.attr["list"].list.i) == [1, -2]
    assert meta_graph.graph_def.node[1].input[2] == "^c"
    assert meta_graph.object_graph_def.nodes[1].WhichOneof("kind") == "variable"


def bundle_header(pb):
    bundle = pb("tensorflow/core/protobuf/tensor_bundle")
    header = bundle.BundleHeaderProto(num_shards=2, endianness=bundle.BundleHeaderProto.LITTLE)
    header.version.producer = 1
    header.version.bad_consumers.append(3)
    return header


def check_bundle_header(header) -> None:
    assert header.num_shards == 2
    assert list(header.version.bad_consumers) == [3]


def bundle_entry(pb):
    bundle = pb("tensorflow/core/protobuf/tensor_bundle")
    types = pb("tensorflow/core/framework/types")
    entry = bundle.BundleEntryProto(dtype=types.DT_FLOAT, shard_id=1, offset=4096, size=24, crc32c=0xDEADBEEF)
    entry.shape.CopyFrom(shape(pb, 2, 3))
    piece = entry.slices.add()
    piece.extent.add(start=0, length=2)
    piece.extent.add()  # full extent: length left unset
    return entry


def check_bundle_entry(entry) -> None:
    assert entry.crc32c == 0xDEADBEEF
    assert entry.slices[0].extent[0].HasField("length")
    assert not entry.slices[0].extent[1].HasField("length")


def sequence_example(pb):
    example = pb("tensorflow/core/example/example").SequenceExample()
    example.context.feature["id"].bytes_list.value.append(b"seq")
    steps = example.feature_lists.feature_list["tokens"].feature
    for i in range(2):
        steps.add().int64_list.value.append(i)
    return example


def check_sequence_example(example) -> None:
    steps = example.feature_lists.feature_list["tokens"].feature
    assert [s.int64_list.value[0] for s in steps] == [0, 1]


CASES: dict[str, Case] = {
    name: case(globals(), name)
    for name in ("signature_def_map", "saved_model", "bundle_header", "bundle_entry", "sequence_example")
}

"""serving.inference.metadata: TF Serving's GetModelMetadata (get_model_metadata_impl.cc)."""

from types import SimpleNamespace

import pytest

from apis.tensorflow.core.protobuf import meta_graph_pb2
from apis.tensorflow_serving.apis import get_model_metadata_pb2
from runtime import errors
from serving.inference.metadata import get_model_metadata
from serving.lifecycle.servable import Servable


class FakeCore:
    def __init__(self):
        mgd = meta_graph_pb2.MetaGraphDef()
        mgd.signature_def["serving_default"].method_name = "tensorflow/serving/predict"
        mgd.signature_def["serving_default"].inputs["x"].name = "x:0"
        mgd.signature_def["__saved_model_init_op"].outputs["__saved_model_init_op"].name = "NoOp"
        self.mgd = mgd
        self.servable = Servable(
            "default", 123, SimpleNamespace(meta_graph_def=mgd, signature_defs=mgd.signature_def)
        )

    def pinned(self, model_spec, deadline=None):
        if model_spec.name != "default":
            raise errors.NotFoundError(
                None, None, f"Servable not found for request: Latest({model_spec.name})"
            )
        return self.servable


def request(*fields, name="default"):
    req = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=fields)
    req.model_spec.name = name
    return req


def test_signature_def_map_in_an_any():
    core = FakeCore()
    req = request("signature_def")
    req.model_spec.signature_name = "ignored"
    response = get_model_metadata(core, req)
    assert response.model_spec.name == "default"
    assert response.model_spec.version.value == 123
    assert not response.model_spec.signature_name
    assert list(response.metadata) == ["signature_def"]
    any_ = response.metadata["signature_def"]
    assert any_.type_url == "type.googleapis.com/tensorflow.serving.SignatureDefMap"
    signature_def_map = get_model_metadata_pb2.SignatureDefMap()
    assert any_.Unpack(signature_def_map)
    assert dict(signature_def_map.signature_def) == dict(core.mgd.signature_def)


@pytest.mark.parametrize(
    "req, code, text",
    [
        (
            get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"]),
            errors.INVALID_ARGUMENT,
            "Missing ModelSpec",
        ),
        (
            request(),
            errors.INVALID_ARGUMENT,
            "GetModelMetadataRequest must specify at least one metadata_field",
        ),
        (request("signature_def", "foo"), errors.INVALID_ARGUMENT, "Metadata field foo is not supported"),
        (
            request("signature_def", name="nope"),
            errors.NOT_FOUND,
            "Servable not found for request: Latest(nope)",
        ),
    ],
    ids=["missing model spec", "no field", "unsupported field", "unknown model"],
)
def test_errors(req, code, text):
    with pytest.raises(errors.OpError) as info:
        get_model_metadata(FakeCore(), req)
    assert (info.value.code, info.value.message) == (code, text)

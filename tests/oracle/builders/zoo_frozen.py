"""The zoo (``_zoo.py``) in Keras 2 (TF 2.15) as TF1-style frozen graphs: the model's call
traced once, its variables made constants (``convert_variables_to_constants_v2``), written by
``SavedModelBuilder`` with no variables at all (what TF1 serving pipelines and converters made).
The text classifier has none: its lookup table is a resource no freezing turns into a constant.
"""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

from tests.oracle.builders import _zoo
from tests.oracle.tfside import Case, model

VENV = "tf215"
FAMILY = "zoo"
DEPENDS = ("tests/oracle/builders/_zoo.py",)

v1 = tf.compat.v1


def freeze(key: str, export_dir: str) -> list[Case]:
    net = _zoo.build(key)
    names = list(net.input_names)
    specs = [tf.TensorSpec(t.shape, t.dtype, name=n) for n, t in zip(names, net.inputs)]

    @tf.function
    def serve(*args):
        return net(dict(zip(names, args)) if len(args) > 1 else args[0], training=False)

    frozen = convert_variables_to_constants_v2(serve.get_concrete_function(*specs))
    graph_def = frozen.graph.as_graph_def()
    with tf.Graph().as_default() as graph, v1.Session(graph=graph) as sess:
        tf.import_graph_def(graph_def, name="")
        inputs = {n: graph.get_tensor_by_name(t.name) for n, t in zip(names, frozen.inputs)}
        (output,) = [graph.get_tensor_by_name(t.name) for t in frozen.outputs]
        signature = v1.saved_model.signature_def_utils.predict_signature_def(
            inputs=inputs, outputs={net.output_names[0]: output}
        )
        builder = v1.saved_model.Builder(export_dir)
        builder.add_meta_graph_and_variables(
            sess, ["serve"], signature_def_map={"serving_default": signature}
        )
        builder.save()
    return [Case("serving_default", _zoo.inputs(key), **_zoo.TOLERANCE)]


@model("zoo_mobilenet_frozen")
def zoo_mobilenet_frozen(export_dir: str) -> list[Case]:
    return freeze("mobilenet", export_dir)


@model("zoo_mobilenet_v2_frozen")
def zoo_mobilenet_v2_frozen(export_dir: str) -> list[Case]:
    return freeze("mobilenet_v2", export_dir)


@model("zoo_mobilenet_v3_small_frozen")
def zoo_mobilenet_v3_small_frozen(export_dir: str) -> list[Case]:
    return freeze("mobilenet_v3_small", export_dir)


@model("zoo_mobilenet_v3_large_frozen")
def zoo_mobilenet_v3_large_frozen(export_dir: str) -> list[Case]:
    return freeze("mobilenet_v3_large", export_dir)


@model("zoo_efficientnet_b0_frozen")
def zoo_efficientnet_b0_frozen(export_dir: str) -> list[Case]:
    return freeze("efficientnet_b0", export_dir)


@model("zoo_efficientnet_v2_b0_frozen")
def zoo_efficientnet_v2_b0_frozen(export_dir: str) -> list[Case]:
    return freeze("efficientnet_v2_b0", export_dir)


@model("zoo_resnet50_frozen")
def zoo_resnet50_frozen(export_dir: str) -> list[Case]:
    return freeze("resnet50", export_dir)


@model("zoo_resnet50_v2_frozen")
def zoo_resnet50_v2_frozen(export_dir: str) -> list[Case]:
    return freeze("resnet50_v2", export_dir)


@model("zoo_densenet121_frozen")
def zoo_densenet121_frozen(export_dir: str) -> list[Case]:
    return freeze("densenet121", export_dir)


@model("zoo_inception_v3_frozen")
def zoo_inception_v3_frozen(export_dir: str) -> list[Case]:
    return freeze("inception_v3", export_dir)


@model("zoo_xception_frozen")
def zoo_xception_frozen(export_dir: str) -> list[Case]:
    return freeze("xception", export_dir)


@model("zoo_nasnet_mobile_frozen")
def zoo_nasnet_mobile_frozen(export_dir: str) -> list[Case]:
    return freeze("nasnet_mobile", export_dir)


@model("zoo_convnext_tiny_frozen")
def zoo_convnext_tiny_frozen(export_dir: str) -> list[Case]:
    return freeze("convnext_tiny", export_dir)


@model("zoo_regnet_y002_frozen")
def zoo_regnet_y002_frozen(export_dir: str) -> list[Case]:
    return freeze("regnet_y002", export_dir)


@model("zoo_bert_encoder_frozen")
def zoo_bert_encoder_frozen(export_dir: str) -> list[Case]:
    return freeze("bert_encoder", export_dir)

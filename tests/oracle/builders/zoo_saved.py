"""The zoo (``_zoo.py``) in Keras 2 (TF 2.15), each model saved with ``tf.saved_model.save(model)``.

What ``model.save`` of TF 2.x wrote for years: the ``serving_default`` signature calls the model's
traced call, whose layers are functions of their own, and reads every weight through a
``ReadVariableOp`` of a captured resource variable.
"""

from __future__ import annotations

import tensorflow as tf

from tests.oracle.builders import _zoo
from tests.oracle.tfside import Case, model

VENV = "tf215"
FAMILY = "zoo"
DEPENDS = ("tests/oracle/builders/_zoo.py",)


def save(key: str, export_dir: str) -> list[Case]:
    tf.saved_model.save(_zoo.build(key), export_dir)
    return [Case("serving_default", _zoo.inputs(key), **_zoo.TOLERANCE)]


@model("zoo_mobilenet_saved")
def zoo_mobilenet_saved(export_dir: str) -> list[Case]:
    return save("mobilenet", export_dir)


@model("zoo_mobilenet_v2_saved")
def zoo_mobilenet_v2_saved(export_dir: str) -> list[Case]:
    return save("mobilenet_v2", export_dir)


@model("zoo_mobilenet_v3_small_saved")
def zoo_mobilenet_v3_small_saved(export_dir: str) -> list[Case]:
    return save("mobilenet_v3_small", export_dir)


@model("zoo_mobilenet_v3_large_saved")
def zoo_mobilenet_v3_large_saved(export_dir: str) -> list[Case]:
    return save("mobilenet_v3_large", export_dir)


@model("zoo_efficientnet_b0_saved")
def zoo_efficientnet_b0_saved(export_dir: str) -> list[Case]:
    return save("efficientnet_b0", export_dir)


@model("zoo_efficientnet_v2_b0_saved")
def zoo_efficientnet_v2_b0_saved(export_dir: str) -> list[Case]:
    return save("efficientnet_v2_b0", export_dir)


@model("zoo_resnet50_saved")
def zoo_resnet50_saved(export_dir: str) -> list[Case]:
    return save("resnet50", export_dir)


@model("zoo_resnet50_v2_saved")
def zoo_resnet50_v2_saved(export_dir: str) -> list[Case]:
    return save("resnet50_v2", export_dir)


@model("zoo_densenet121_saved")
def zoo_densenet121_saved(export_dir: str) -> list[Case]:
    return save("densenet121", export_dir)


@model("zoo_inception_v3_saved")
def zoo_inception_v3_saved(export_dir: str) -> list[Case]:
    return save("inception_v3", export_dir)


@model("zoo_xception_saved")
def zoo_xception_saved(export_dir: str) -> list[Case]:
    return save("xception", export_dir)


@model("zoo_nasnet_mobile_saved")
def zoo_nasnet_mobile_saved(export_dir: str) -> list[Case]:
    return save("nasnet_mobile", export_dir)


@model("zoo_convnext_tiny_saved")
def zoo_convnext_tiny_saved(export_dir: str) -> list[Case]:
    return save("convnext_tiny", export_dir)


@model("zoo_regnet_y002_saved")
def zoo_regnet_y002_saved(export_dir: str) -> list[Case]:
    return save("regnet_y002", export_dir)


@model("zoo_bert_encoder_saved")
def zoo_bert_encoder_saved(export_dir: str) -> list[Case]:
    return save("bert_encoder", export_dir)


@model("zoo_text_classifier_saved")
def zoo_text_classifier_saved(export_dir: str) -> list[Case]:
    return save("text_classifier", export_dir)

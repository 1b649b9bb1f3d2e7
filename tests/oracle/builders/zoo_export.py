"""The zoo (``_zoo.py``) in Keras 3 (TF 2.21), each model written by ``model.export`` (its
``serve`` and ``serving_default`` signatures). Keras 3 has no RegNet.
"""

from __future__ import annotations

from tests.oracle.builders import _zoo
from tests.oracle.tfside import Case, model

VENV = "tf221"
FAMILY = "zoo"
DEPENDS = ("tests/oracle/builders/_zoo.py",)


def export(key: str, export_dir: str) -> list[Case]:
    _zoo.build(key).export(export_dir, format="tf_saved_model", verbose=False)
    return [Case(signature, _zoo.inputs(key), **_zoo.TOLERANCE) for signature in ("serving_default", "serve")]


@model("zoo_mobilenet_export")
def zoo_mobilenet_export(export_dir: str) -> list[Case]:
    return export("mobilenet", export_dir)


@model("zoo_mobilenet_v2_export")
def zoo_mobilenet_v2_export(export_dir: str) -> list[Case]:
    return export("mobilenet_v2", export_dir)


@model("zoo_mobilenet_v3_small_export")
def zoo_mobilenet_v3_small_export(export_dir: str) -> list[Case]:
    return export("mobilenet_v3_small", export_dir)


@model("zoo_mobilenet_v3_large_export")
def zoo_mobilenet_v3_large_export(export_dir: str) -> list[Case]:
    return export("mobilenet_v3_large", export_dir)


@model("zoo_efficientnet_b0_export")
def zoo_efficientnet_b0_export(export_dir: str) -> list[Case]:
    return export("efficientnet_b0", export_dir)


@model("zoo_efficientnet_v2_b0_export")
def zoo_efficientnet_v2_b0_export(export_dir: str) -> list[Case]:
    return export("efficientnet_v2_b0", export_dir)


@model("zoo_resnet50_export")
def zoo_resnet50_export(export_dir: str) -> list[Case]:
    return export("resnet50", export_dir)


@model("zoo_resnet50_v2_export")
def zoo_resnet50_v2_export(export_dir: str) -> list[Case]:
    return export("resnet50_v2", export_dir)


@model("zoo_densenet121_export")
def zoo_densenet121_export(export_dir: str) -> list[Case]:
    return export("densenet121", export_dir)


@model("zoo_inception_v3_export")
def zoo_inception_v3_export(export_dir: str) -> list[Case]:
    return export("inception_v3", export_dir)


@model("zoo_xception_export")
def zoo_xception_export(export_dir: str) -> list[Case]:
    return export("xception", export_dir)


@model("zoo_nasnet_mobile_export")
def zoo_nasnet_mobile_export(export_dir: str) -> list[Case]:
    return export("nasnet_mobile", export_dir)


@model("zoo_convnext_tiny_export")
def zoo_convnext_tiny_export(export_dir: str) -> list[Case]:
    return export("convnext_tiny", export_dir)


@model("zoo_bert_encoder_export")
def zoo_bert_encoder_export(export_dir: str) -> list[Case]:
    return export("bert_encoder", export_dir)


@model("zoo_text_classifier_export")
def zoo_text_classifier_export(export_dir: str) -> list[Case]:
    return export("text_classifier", export_dir)

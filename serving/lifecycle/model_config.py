"""ModelServerConfig: reading ``--model_config_file`` and checking a model_config_list.

A config file is a text-format ``tensorflow.serving.ModelServerConfig``::

    model_config_list {
      config {
        name: "half_plus_two"
        base_path: "/models/half_plus_two"
        model_platform: "tensorflow"
        model_version_policy { specific { versions: 1 versions: 2 } }   # or latest {...}, all {}
        version_labels { key: "stable" value: 1 }
      }
    }

Errors carry TF Serving's texts: a file that does not parse logs protobuf's
``Error parsing text-format tensorflow.serving.ModelServerConfig: <line>:<col>: <why>`` and
fails with ``Invalid protobuf file: '<path>'``; ``logging_config`` is accepted and ignored.
Pure functions, no threads.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from google.protobuf import text_format

from apis.tensorflow_serving.config import model_server_config_pb2
from runtime import errors

logger = logging.getLogger(__name__)

TENSORFLOW_PLATFORM = "tensorflow"

ModelServerConfig = model_server_config_pb2.ModelServerConfig
ModelConfig = model_server_config_pb2.ModelConfig


def parse_text_proto(text: str, message, source: str):
    """Parses text format into ``message`` as TF Serving's ``ParseProtoTextFile`` does."""
    try:
        text_format.Parse(text, message)
    except text_format.ParseError as e:
        where = f"{e.GetLine()}:{e.GetColumn()}: " if e.GetLine() is not None else ""
        why = str(e).split(" : ", 1)[-1] if e.GetLine() is not None else str(e)
        # protobuf's C++ parser reports exactly this line on stderr; clients grep for it.
        logger.error("Error parsing text-format %s: %s%s", message.DESCRIPTOR.full_name, where, why)
        raise errors.InvalidArgumentError(None, None, f"Invalid protobuf file: '{source}'") from None
    return message


def read_text_proto_file(path: str, message):
    """Reads a text-format proto file; NotFoundError / InvalidArgumentError as TF's Env does."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise errors.NotFoundError(None, None, f"{path}; No such file or directory") from None
    except IsADirectoryError:
        raise errors.FailedPreconditionError(None, None, f"{path}; Is a directory") from None
    except OSError as e:
        raise errors.UnknownError(None, None, f"{path}; {e.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise errors.InvalidArgumentError(None, None, f"Invalid protobuf file: '{path}'") from None
    return parse_text_proto(text, message, path)


def read_model_server_config(path: str) -> ModelServerConfig:
    return read_text_proto_file(path, ModelServerConfig())


def build_single_model_config(model_name: str, model_base_path: str) -> ModelServerConfig:
    """The config that ``--model_name`` / ``--model_base_path`` stand for."""
    logger.info(
        "Building single TensorFlow model file config:  model_name: %s model_base_path: %s",
        model_name,
        model_base_path,
    )
    config = ModelServerConfig()
    model = config.model_config_list.config.add()
    model.name = model_name
    model.base_path = model_base_path
    model.model_platform = TENSORFLOW_PLATFORM
    return config


def model_platform(model: ModelConfig) -> str:
    """The model's platform, from ``model_platform`` or the deprecated ``model_type``."""
    if model.model_type != model_server_config_pb2.MODEL_TYPE_UNSPECIFIED:
        logger.warning(
            "Deprecated ModelServerConfig::model_type field used. Prefer ModelServerConfig::model_platform."
        )
        if model.model_platform:
            raise errors.InvalidArgumentError(
                None,
                None,
                "Illegal setting both ModelServerConfig::model_type (deprecated) and "
                f"ModelServerConfig::model_platform, model name is {model.name}",
            )
        if model.model_type != model_server_config_pb2.TENSORFLOW:
            raise errors.InvalidArgumentError(
                None, None, f"ModelServerConfig::model_type choice {model.model_type} not supported."
            )
        return TENSORFLOW_PLATFORM
    if not model.model_platform:
        raise errors.InvalidArgumentError(
            None,
            None,
            "Illegal setting neither ModelServerConfig::model_type (deprecated) nor "
            f"ModelServerConfig::model_platform, model name is {model.name}",
        )
    return model.model_platform


def _is_relative(path: str) -> bool:
    return "://" not in path and not os.path.isabs(path)


def validate_model_config_list(config_list, old_config_list=None) -> None:
    """TF Serving's checks of a model_config_list (and of a transition from ``old_config_list``)."""
    names: set[str] = set()
    for model in config_list.config:
        if model.name in names:
            raise errors.InvalidArgumentError(
                None, None, f"Illegal to list model {model.name} multiple times in config list"
            )
        names.add(model.name)
    for model in config_list.config:
        if _is_relative(model.base_path):
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Expected model {model.name} to have an absolute path or URI; got base_path()={model.base_path}",
            )
    old_platforms = {m.name: model_platform(m) for m in old_config_list.config} if old_config_list else {}
    for model in config_list.config:
        platform = model_platform(model)
        old = old_platforms.get(model.name)
        if old is not None and old != platform:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Illegal to change a model's platform. For model {model.name} platform was {old} and "
                f"new platform requested is {platform}",
            )
        if platform != TENSORFLOW_PLATFORM:
            raise errors.InvalidArgumentError(
                None, None, f"Model {model.name} requests unsupported platform {platform}"
            )


def version_label_map(
    config: ModelServerConfig,
    available: Callable[[str, int], bool],
    old_labels: dict[str, dict[str, int]] | None,
    allow_labels_for_unavailable_models: bool,
) -> dict[str, dict[str, int]]:
    """model name -> label -> version, checked as TF Serving's ``UpdateModelVersionLabelMap``.

    A label may only point at an available version, unless
    ``--allow_version_labels_for_unavailable_models`` is set and the label is new or keeps its
    version. (So labels in the very first config need that flag, exactly as in TF Serving.)
    """
    labels: dict[str, dict[str, int]] = {}
    for model in config.model_config_list.config:
        for label, version in sorted(model.version_labels.items()):
            allow_unavailable = False
            if allow_labels_for_unavailable_models:
                existing = (old_labels or {}).get(model.name, {}).get(label)
                allow_unavailable = existing is None or existing == version
            if not allow_unavailable and not available(model.name, version):
                raise errors.FailedPreconditionError(
                    None,
                    None,
                    f"Request to assign label to version {version} of model {model.name}, which is not "
                    "currently available for inference",
                )
            labels.setdefault(model.name, {})[label] = version
    return labels

"""serving.lifecycle.model_config: text-format ModelServerConfig files, checks and version labels."""

import logging

import pytest

from runtime import errors
from serving.lifecycle import model_config

GOOD = """
model_config_list {
  config {
    name: "half_plus_two"
    base_path: "/models/half_plus_two"
    model_platform: "tensorflow"
    model_version_policy { specific { versions: 1 versions: 2 } }
    version_labels { key: "stable" value: 1 }
    logging_config { sampling_config { sampling_rate: 0.5 } }
  }
  config { name: "other" base_path: "/models/other" model_platform: "tensorflow" }
}
"""


def write(tmp_path, text):
    path = tmp_path / "models.config"
    path.write_text(text)
    return str(path)


def test_reads_good_config(tmp_path):
    config = model_config.read_model_server_config(write(tmp_path, GOOD))
    models = config.model_config_list.config
    assert [m.name for m in models] == ["half_plus_two", "other"]
    assert list(models[0].model_version_policy.specific.versions) == [1, 2]
    assert dict(models[0].version_labels) == {"stable": 1}


def test_bad_config_logs_tf_servings_error(tmp_path, caplog):
    path = write(tmp_path, "model_config_list { config { nme: 'x' } }")
    with caplog.at_level(logging.ERROR), pytest.raises(errors.InvalidArgumentError) as e:
        model_config.read_model_server_config(path)
    assert e.value.message == f"Invalid protobuf file: '{path}'"
    assert "Error parsing text-format tensorflow.serving.ModelServerConfig: 1:" in caplog.text


def test_missing_file(tmp_path):
    with pytest.raises(errors.NotFoundError) as e:
        model_config.read_model_server_config(str(tmp_path / "none"))
    assert "No such file or directory" in e.value.message


def test_single_model_config():
    config = model_config.build_single_model_config("m", "/p")
    (model,) = config.model_config_list.config
    assert (model.name, model.base_path, model.model_platform) == ("m", "/p", "tensorflow")


def config_list(text):
    config = model_config.ModelServerConfig()
    model_config.parse_text_proto(text, config, "<test>")
    return config.model_config_list


INVALID = {
    "duplicate": (
        "model_config_list { config { name: 'a' base_path: '/a' model_platform: 'tensorflow' } "
        "config { name: 'a' base_path: '/b' model_platform: 'tensorflow' } }",
        "Illegal to list model a multiple times in config list",
    ),
    "relative": (
        "model_config_list { config { name: 'a' base_path: 'rel' model_platform: 'tensorflow' } }",
        "Expected model a to have an absolute path or URI; got base_path()=rel",
    ),
    "no platform": (
        "model_config_list { config { name: 'a' base_path: '/a' } }",
        "Illegal setting neither ModelServerConfig::model_type (deprecated) nor "
        "ModelServerConfig::model_platform, model name is a",
    ),
    "other platform": (
        "model_config_list { config { name: 'a' base_path: '/a' model_platform: 'tflite' } }",
        "Model a requests unsupported platform tflite",
    ),
}


@pytest.mark.parametrize("text, message", INVALID.values(), ids=INVALID.keys())
def test_validate_rejects(text, message):
    with pytest.raises(errors.InvalidArgumentError) as e:
        model_config.validate_model_config_list(config_list(text))
    assert e.value.message == message


def test_deprecated_model_type_is_tensorflow():
    model_config.validate_model_config_list(
        config_list("model_config_list { config { name: 'a' base_path: '/a' model_type: TENSORFLOW } }")
    )


def labels_config():
    config = model_config.ModelServerConfig()
    model_config.parse_text_proto(
        "model_config_list { config { name: 'm' base_path: '/m' model_platform: 'tensorflow' "
        "version_labels { key: 'stable' value: 1 } version_labels { key: 'canary' value: 2 } } }",
        config,
        "<test>",
    )
    return config


def test_labels_need_available_versions():
    with pytest.raises(errors.FailedPreconditionError) as e:
        model_config.version_label_map(labels_config(), lambda name, v: v == 1, None, False)
    assert e.value.message == (
        "Request to assign label to version 2 of model m, which is not currently available for inference"
    )
    labels = model_config.version_label_map(labels_config(), lambda name, v: True, None, False)
    assert labels == {"m": {"stable": 1, "canary": 2}}


def test_labels_for_unavailable_models_when_allowed():
    labels = model_config.version_label_map(labels_config(), lambda name, v: False, None, True)
    assert labels == {"m": {"stable": 1, "canary": 2}}
    # ... but an existing label may not move to an unavailable version.
    with pytest.raises(errors.FailedPreconditionError):
        model_config.version_label_map(labels_config(), lambda name, v: False, {"m": {"canary": 3}}, True)

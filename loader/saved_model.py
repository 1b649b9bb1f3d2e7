"""Reading ``saved_model.pb`` / ``saved_model.pbtxt``: the ``SavedModel`` proto of an export directory.

A SavedModel export directory, as TensorFlow writes it::

    00000123/
        saved_model.pb          a serialized tensorflow.SavedModel (or saved_model.pbtxt, text format)
        fingerprint.pb          optional FingerprintDef (TF >= 2.11)
        variables/
            variables.index     TensorBundle index (runtime/checkpoint/tensor_bundle.py)
            variables.data-00000-of-00001
        assets/                 files that asset_file_def entries name (vocabularies, ...)
        assets.extra/           never read by the loader

``saved_model.pb`` wins over ``saved_model.pbtxt`` when both exist, as in TensorFlow. A chunked
``saved_model.cpb`` (written by TF's proto splitter for models over 2 GiB) is not supported.
"""

from __future__ import annotations

import os

from google.protobuf import text_format
from google.protobuf.message import DecodeError

from apis.tensorflow.core.protobuf import saved_model_pb2
from runtime import errors

SAVED_MODEL_FILENAME_PB = "saved_model.pb"
SAVED_MODEL_FILENAME_PBTXT = "saved_model.pbtxt"
SAVED_MODEL_FILENAME_CPB = "saved_model.cpb"
VARIABLES_DIRECTORY = "variables"
VARIABLES_FILENAME = "variables"
ASSETS_DIRECTORY = "assets"


def variables_prefix(export_dir: str) -> str:
    """``<export_dir>/variables/variables``: the checkpoint prefix the saver restores from."""
    return os.path.join(export_dir, VARIABLES_DIRECTORY, VARIABLES_FILENAME)


def maybe_saved_model_directory(export_dir: str) -> bool:
    """True if ``export_dir`` holds a SavedModel file; False means it certainly holds no SavedModel."""
    return any(
        os.path.exists(os.path.join(export_dir, name))
        for name in (SAVED_MODEL_FILENAME_PB, SAVED_MODEL_FILENAME_PBTXT, SAVED_MODEL_FILENAME_CPB)
    )


def read_saved_model(export_dir: str) -> saved_model_pb2.SavedModel:
    """The ``SavedModel`` of an export directory.

    Raises NotFoundError (TensorFlow's text) when neither file exists, DataLossError naming the file
    when it cannot be read or parsed.
    """
    export_dir = os.fspath(export_dir)
    pb_path = os.path.join(export_dir, SAVED_MODEL_FILENAME_PB)
    pbtxt_path = os.path.join(export_dir, SAVED_MODEL_FILENAME_PBTXT)
    saved_model = saved_model_pb2.SavedModel()
    if os.path.exists(pb_path):
        data = _read(pb_path)
        try:
            saved_model.ParseFromString(data)
        except (DecodeError, RecursionError, ValueError) as e:
            raise errors.DataLossError(None, None, f"Can't parse {pb_path} as binary proto: {e}") from None
        return saved_model
    if os.path.exists(pbtxt_path):
        data = _read(pbtxt_path)
        try:
            text_format.Parse(data.decode("utf-8"), saved_model)
        except (text_format.ParseError, UnicodeDecodeError, RecursionError, ValueError) as e:
            raise errors.DataLossError(None, None, f"Can't parse {pbtxt_path} as text proto: {e}") from None
        return saved_model
    if os.path.exists(os.path.join(export_dir, SAVED_MODEL_FILENAME_CPB)):
        raise errors.UnimplementedError(
            None, None, f"Chunked SavedModels (saved_model.cpb) are not supported: {export_dir}"
        )
    raise errors.NotFoundError(
        None, None, f"Could not find SavedModel .pb or .pbtxt at supplied export directory path: {export_dir}"
    )


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise errors.DataLossError(None, None, f"Failed to read {path}: {e.strerror or e}") from None

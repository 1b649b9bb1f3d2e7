"""A TF Lite version as a bundle (TF Serving's ``LoadTfLiteModel`` into a ``SavedModelBundle``).

``load_tflite_bundle(export_dir, ...)`` reads ``<export_dir>/model.tflite`` into a ``TfLiteBundle``:
a ``TfLiteSession`` and a MetaGraphDef holding only the SignatureDefs served (what TF Serving keeps
of a bundle's MetaGraphDef), so the request path and GetModelMetadata read it as any bundle.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping

from apis.tensorflow.core.protobuf import meta_graph_pb2
from runtime import errors
from serving.inference.tflite.model import read_model
from serving.inference.tflite.session import TfLiteSession, create_pool

logger = logging.getLogger(__name__)

TFLITE_MODEL_FILENAME = "model.tflite"
LITERT_PACKAGE = "ai-edge-litert"
_MISSING_LITERT = (
    "--prefer_tflite_model=true serves TensorFlow Lite models through LiteRT's interpreter, which is "
    f"not installed: pip install 'savedmodel-server[tflite]' (the {LITERT_PACKAGE} package)"
)


@dataclasses.dataclass
class TfLiteBundle:
    """A loaded TF Lite version. The session is thread-safe; the bundle is not mutated after
    loading (except by a batching wrapper replacing ``session`` before it serves); ``close``
    releases the interpreters."""

    session: object
    meta_graph_def: meta_graph_pb2.MetaGraphDef
    export_dir: str
    platform: str = "tensorflow_lite"  # what V2's model metadata names

    @property
    def signature_defs(self) -> Mapping[str, meta_graph_pb2.SignatureDef]:
        return self.meta_graph_def.signature_def

    def close(self) -> None:
        close = getattr(self.session, "close", None)
        if close is not None:
            close()


def tflite_model_found(export_dir: str) -> bool:
    """``TfLiteModelFound``: the version directory holds ``model.tflite``."""
    return os.path.isfile(os.path.join(export_dir, TFLITE_MODEL_FILENAME))


def require_litert() -> None:
    """FAILED_PRECONDITION naming the package to install when LiteRT's interpreter is missing."""
    try:
        _interpreter_class()
    except ImportError:
        raise errors.FailedPreconditionError(None, None, _MISSING_LITERT) from None


def _interpreter_class():
    from ai_edge_litert.interpreter import Interpreter

    return Interpreter


def load_tflite_bundle(export_dir: str, num_pools: int, interpreters_per_pool: int) -> TfLiteBundle:
    """``LoadTfLiteModel`` + ``TfLiteSession::Create``: the file read, the flatbuffer verified,
    the SignatureDefs found, ``max(1, num_pools)`` interpreters built. TF Serving's codes and
    texts; LiteRT's own reason is logged."""
    try:
        interpreter_class = _interpreter_class()
    except ImportError:
        raise errors.FailedPreconditionError(None, None, _MISSING_LITERT) from None
    path = os.path.join(export_dir, TFLITE_MODEL_FILENAME)
    model_bytes = _read(path)
    try:
        first = interpreter_class(model_content=model_bytes, num_threads=1)
    except ValueError as e:
        logger.error("%s is not a TF Lite model: %s", path, e)
        if "not a valid Flatbuffer" in str(e) or not model_bytes:
            raise errors.InvalidArgumentError(
                None, None, "Cannot build FlatBufferModel from buffer."
            ) from None
        raise errors.InternalError(None, None, "Cannot build Interpreter from buffer.") from None
    except RuntimeError as e:
        logger.error("LiteRT could not build an interpreter for %s: %s", path, e)
        raise errors.InternalError(None, None, "Cannot build Interpreter from buffer.") from None
    model = read_model(model_bytes)
    pool = create_pool(model_bytes, num_pools, interpreter_class, first=first)
    session = TfLiteSession(model, pool, interpreters_per_pool, model.batch_size)
    meta_graph_def = meta_graph_pb2.MetaGraphDef()
    for key, signature in model.signature_defs.items():
        meta_graph_def.signature_def[key].CopyFrom(signature)
    logger.info(
        "Loaded TF Lite model %s: signatures %s, %d interpreter(s)%s",
        path,
        ", ".join(sorted(model.signature_defs)),
        pool.size,
        ", requests batched in the session (num_tflite_interpreters_per_pool > 1)"
        if interpreters_per_pool > 1
        else "",
    )
    return TfLiteBundle(session, meta_graph_def, export_dir)


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise errors.NotFoundError(None, None, f"{path}; No such file or directory") from None
    except OSError as e:
        raise errors.UnavailableError(None, None, f"{path}; {e.strerror}") from None

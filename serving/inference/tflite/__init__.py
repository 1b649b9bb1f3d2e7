"""TensorFlow Lite models (``--prefer_tflite_model``), as TF Serving serves them: a version directory
holding ``model.tflite`` is loaded into a ``TfLiteBundle`` whose Session runs LiteRT's interpreter
(the ``tflite`` extra, ``ai-edge-litert``) and whose SignatureDefs are those TF Serving reports for
the model, so Predict, metadata, REST, V2, ``--enable_batching``, warmup and metrics take the one
request path unchanged (Classify and Regress too, for SignatureDefs of those methods; but the
ParseExample op such models use is one TF Serving adds to TF Lite and LiteRT lacks: they fail
to load, naming it).

``model`` reads the flatbuffer, ``session`` runs it (a pool of interpreters), ``batching`` is the
session's own batch scheduler, ``bundle`` loads a version. Imports ``runtime``'s vocabulary and
``apis`` only, and LiteRT only while a TF Lite version loads.
"""

from serving.inference.tflite.bundle import (
    TFLITE_MODEL_FILENAME,
    TfLiteBundle,
    load_tflite_bundle,
    require_litert,
    tflite_model_found,
)

__all__ = [
    "TFLITE_MODEL_FILENAME",
    "TfLiteBundle",
    "load_tflite_bundle",
    "require_litert",
    "tflite_model_found",
]

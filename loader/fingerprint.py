"""Reading ``fingerprint.pb``: the ``FingerprintDef`` TF >= 2.11 writes beside ``saved_model.pb``.

The fingerprint identifies a SavedModel (checksums of the graph, signatures, object graph and
checkpoint, plus a UUID); servers report it in metadata and metrics. Absent in older exports.
"""

from __future__ import annotations

import os

from google.protobuf.message import DecodeError

from apis.tensorflow.core.protobuf import fingerprint_pb2
from runtime import errors

FINGERPRINT_FILENAME = "fingerprint.pb"


def read_fingerprint(export_dir: str) -> fingerprint_pb2.FingerprintDef | None:
    """The export's FingerprintDef, or None when it has no ``fingerprint.pb``."""
    path = os.path.join(export_dir, FINGERPRINT_FILENAME)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise errors.DataLossError(None, None, f"Failed to read {path}: {e.strerror or e}") from None
    fingerprint = fingerprint_pb2.FingerprintDef()
    try:
        fingerprint.ParseFromString(data)
    except DecodeError as e:
        raise errors.DataLossError(None, None, f"Can't parse {path} as binary proto: {e}") from None
    return fingerprint

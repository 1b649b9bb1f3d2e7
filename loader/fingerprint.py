"""Reading ``fingerprint.pb``: the ``FingerprintDef`` TF >= 2.11 writes beside ``saved_model.pb``.

The fingerprint identifies a SavedModel (checksums of the graph, signatures, object graph and
checkpoint, plus a UUID); servers report it in metadata and metrics. Absent in older exports.
``model_identity`` names a SavedModel's content for caches keyed by it (the cluster cache).
"""

from __future__ import annotations

import hashlib
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


def model_identity(export_dir: str, fingerprint: fingerprint_pb2.FingerprintDef | None) -> str:
    """A SavedModel's content, as a string: its fingerprint's checksums (of ``saved_model.pb``,
    the graph, signatures and object graph, and the checkpoint), else, for exports without one,
    the SHA-256 of ``saved_model.pb`` (or ``.pbtxt``) and ``variables/variables.index`` (whose
    per-tensor checksums cover the data files), the files TF's own fingerprint hashes."""
    if fingerprint is not None:
        fields = (
            fingerprint.saved_model_checksum,
            fingerprint.graph_def_program_hash,
            fingerprint.signature_def_hash,
            fingerprint.saved_object_graph_hash,
            fingerprint.checkpoint_hash,
        )
        return "fingerprint " + " ".join(str(field) for field in fields)
    digest = hashlib.sha256()
    for name in ("saved_model.pb", "saved_model.pbtxt", os.path.join("variables", "variables.index")):
        path = os.path.join(export_dir, name)
        if os.path.isfile(path):
            with open(path, "rb") as f:
                digest.update(name.encode() + b"\0" + f.read() + b"\0")
    return "files " + digest.hexdigest()

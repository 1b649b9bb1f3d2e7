"""``ClusterCache``: converted, validated delegation kept on disk, so a restart or a new replica
skips converting and validating (``--onnx_cluster_cache_dir``, ``load_saved_model(cluster_cache=)``).

Two kinds of entry, named by their keys:

- a *plan* (``<key>.plan``): the delegated graph (``partition.fuse``'s GraphDef, whose clusters
  read weights by name, so it holds none: ``cluster_constants.py``; plus the function bodies
  delegation added) and its ``DelegationReport``, keyed by the model, the tag set, the signatures
  served, the delegation options and the converter version. A hit skips the graph rewrites;
- a *cluster* (``<key>.onnx``, its weights of 1 MiB or more in ``<key>.onnx.data`` as ONNX
  external data, and its header ``<key>.onnx.json``): one cluster's ONNX model for one input
  signature, written once it converted and its first run matched the numpy kernels, keyed by the
  model, the cluster's subgraph, the signature and the converter version. A hit skips converting
  and validating; onnxruntime reads the model from its path (the header's ``shared`` names the
  weights it takes from the Session's variables instead: ``cluster.py``).

The model is the loader's ``model_identity`` (its SavedModel fingerprint) and tag set. The
converter version is the SHA-256 of the runtime's own sources and the onnx and onnxruntime
versions: an entry is never trusted across versions.

A plan's file, parsed here (nothing is unpickled, nothing executed; a model's header is the same
JSON, in a file of its own)::

    b"SMSCACHE1\\n"                 magic
    8 bytes, big-endian            header length (at most MAX_HEADER_BYTES)
    header                         JSON: kind, key, converter, payload_bytes, payload_crc32c, meta
    payload                        the serialized GraphDef

The payload's crc32c (hardware-fast: a 200 MB model checks in tens of milliseconds, where SHA-256
took half a second) catches torn and corrupt files. An entry that fails any check (a torn or
corrupt file, another key, another version) is ignored and rebuilt. Entries are written to a
temporary file in the directory and renamed into place, so replicas sharing a directory read
whole entries or none. The directory is as trusted as the model directories: an entry's model
runs as it is. Thread-safe (no state but the directory).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import logging
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime
from google.protobuf.message import DecodeError

from apis.tensorflow.core.framework import graph_pb2
from runtime.checkpoint.table import crc32c
from runtime.onnx.interface import CLUSTER_OP
from runtime.onnx.report import DelegationReport

logger = logging.getLogger(__name__)

MAGIC = b"SMSCACHE1\n"
MAX_HEADER_BYTES = 1 << 20
DATA_ALIGNMENT = 1 << 16  # a weight's offset in a data file: onnxruntime can map it from there
_LENGTH_BYTES = 8


@dataclass(frozen=True)
class Entry:
    """What an entry holds: its payload and the metadata stored with it."""

    payload: bytes
    meta: dict


def _onnx_version() -> str:
    """onnx's installed version, from its ``onnx-<version>.dist-info`` directory beside the
    package: importing onnx (whose ``__version__`` comes from importlib.metadata) would cost a
    start from the cache 50-80 ms it has no other use for."""
    spec = importlib.util.find_spec("onnx")
    folder = Path(spec.origin).parent.parent if spec is not None and spec.origin else None
    found = sorted(folder.glob("onnx-*.dist-info")) if folder is not None else []
    if len(found) == 1:
        return found[0].name[len("onnx-") : -len(".dist-info")]
    import onnx  # (an unusual install: ask onnx itself)

    return onnx.__version__


@functools.cache
def converter_version() -> str:
    """The SHA-256 of every source file of the runtime and the onnx and onnxruntime versions:
    whatever could change a conversion, a partition or a validation changes it."""
    root = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    digest = hashlib.sha256(f"onnx {_onnx_version()} onnxruntime {onnxruntime.__version__}".encode())
    for relative in _sources(root):  # (os.walk and plain reads: pathlib's took half of its 10 ms)
        with open(os.path.join(root, relative), "rb") as source:
            digest.update(relative.encode() + b"\0" + source.read() + b"\0")
    return digest.hexdigest()


def _sources(root: str) -> list[str]:
    """The ``.py`` files under ``root``, as sorted POSIX paths relative to it."""
    found = []
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = [name for name in subfolders if name != "__pycache__"]
        relative = os.path.relpath(folder, root).replace(os.sep, "/")
        found += [name if relative == "." else f"{relative}/{name}" for name in files if name.endswith(".py")]
    return sorted(found)


def key_of(*parts: object) -> str:
    """One key from parts (strings, bytes, numbers, lists of them): the SHA-256 of their JSON
    (bytes by their own SHA-256)."""
    digest = hashlib.sha256()
    for part in parts:
        if isinstance(part, bytes):
            part = "sha256:" + hashlib.sha256(part).hexdigest()
        digest.update(json.dumps(part, sort_keys=True, default=str).encode() + b"\0")
    return digest.hexdigest()


class ClusterCache:
    """Plans and clusters of one SavedModel, in ``directory`` (created when first written)."""

    def __init__(self, directory: str | os.PathLike, model: str):
        self.directory = Path(directory)
        self.model = model  # the SavedModel and MetaGraphDef: part of every key

    def key(self, kind: str, *parts: object) -> str:
        return key_of(kind, converter_version(), self.model, *parts)

    def read(self, kind: str, key: str) -> Entry | None:
        """The entry of ``key``, or None where there is none or it fails a check (logged)."""
        path = self._path(kind, key)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            logger.warning("cluster cache: cannot read %s: %s", path, exc)
            return None
        try:
            return _parse(data, kind, key)
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            logger.warning("cluster cache: ignoring %s (rebuilt): %s", path, exc)
            return None

    def write(self, kind: str, key: str, payload: bytes, meta: dict | None = None) -> None:
        """Stores an entry atomically (temporary file, then rename); failures are logged only:
        a cache that cannot be written costs time, never a model."""
        header = _header(kind, key, payload, meta)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            length = len(header).to_bytes(_LENGTH_BYTES, "big")
            _replace(self._path(kind, key), [MAGIC, length, header, payload])
        except OSError as exc:
            logger.warning("cluster cache: cannot write %s: %s", self._path(kind, key), exc)

    def _path(self, kind: str, key: str) -> Path:
        return self.directory / f"{key}.{kind}"

    # -- models: ONNX files onnxruntime reads from their paths ---------------------------------

    def stored_model(self, key: str) -> StoredModel | None:
        """The stored ONNX model of ``key``, where its header (``<key>.onnx.json``) checks out
        against its files (sizes, crc32c, read in slices: no copy of a weight is held); else
        None. A path, not bytes: onnxruntime reads the files itself."""
        path = self._path("onnx", key)
        try:
            head = self._path("onnx.json", key)
            if head.stat().st_size > MAX_HEADER_BYTES:
                raise ValueError("header too big")
            header = _check_header(json.loads(head.read_text()), "onnx", key)
            _check_file(path, header["payload_bytes"], header["payload_crc32c"])
            if header.get("data_bytes", 0):
                _check_file(self._path("onnx.data", key), header["data_bytes"], header["data_crc32c"])
            meta = header.get("meta", {})
            if not isinstance(meta, dict):
                raise ValueError("meta is not an object")
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            logger.warning("cluster cache: ignoring %s (rebuilt): %s", path, exc)
            return None
        return StoredModel(path, meta)

    def place_weights(self, key: str, model, large: Mapping[str, np.ndarray]) -> None:
        """Points the initializers ``large`` holds out of ``model`` (an ``onnx.ModelProto``; see
        ``converter.Converted``) at their places in ``<key>.onnx.data``, which ``write_model``
        writes: the model is then serialized once, for its session and for the cache alike."""
        data_name = self._path("onnx.data", key).name
        offsets = _offsets(large)
        for tensor in model.graph.initializer:
            if tensor.name in offsets:
                del tensor.external_data[:]
                place = (data_name, offsets[tensor.name], large[tensor.name].nbytes)
                for field, value in zip(("location", "offset", "length"), place):
                    entry = tensor.external_data.add()
                    entry.key, entry.value = field, str(value)

    def write_model(
        self, key: str, data: bytes, large: Mapping[str, np.ndarray] | None = None, meta: dict | None = None
    ) -> None:
        """Stores a serialized model whose held-out initializers ``place_weights`` placed, and
        those (``large``) in ``<key>.onnx.data``. Data, model, then header, each atomically: a
        reader sees files its header matches, or a mismatch it ignores."""
        large = large or {}
        data_path = self._path("onnx.data", key)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            extra = {}
            if large:
                parts = list(_aligned(large, _offsets(large)))  # (views: no copies)
                _replace(data_path, parts)
                crc = 0
                for part in parts:
                    crc = crc32c(part, crc)
                extra = {"data_bytes": sum(len(part) for part in parts), "data_crc32c": crc}
            _replace(self._path("onnx", key), [data])
            _replace(self._path("onnx.json", key), [_header("onnx", key, data, meta, extra)])
        except OSError as exc:
            logger.warning("cluster cache: cannot write model %s: %s", key, exc)


@dataclass(frozen=True)
class StoredModel:
    """A model entry that checked out: its file's path and the metadata stored with it."""

    path: Path
    meta: dict


def _offsets(large: Mapping[str, np.ndarray]) -> dict[str, int]:
    """Each held-out array's offset in its data file: in order, each at a multiple of
    DATA_ALIGNMENT."""
    offsets, end = {}, 0
    for name, array in large.items():
        offsets[name] = -(-end // DATA_ALIGNMENT) * DATA_ALIGNMENT
        end = offsets[name] + array.nbytes
    return offsets


def _aligned(large: Mapping[str, np.ndarray], offsets: Mapping[str, int]) -> Iterator[bytes | memoryview]:
    """The data file's parts: each array's bytes at its offset, zeros between (no copies)."""
    at = 0
    for name, array in large.items():
        yield bytes(offsets[name] - at)
        yield np.ascontiguousarray(array).view(np.uint8).reshape(-1)
        at = offsets[name] + array.nbytes


def _file_crc(path: Path) -> int:
    """A file's crc32c, read in parts (a mapping would hold all of it resident while checked)."""
    crc, buffer = 0, bytearray(1 << 20)
    with open(path, "rb", buffering=0) as f:
        while read := f.readinto(buffer):
            crc = crc32c(memoryview(buffer)[:read], crc)
    return crc


def _check_file(path: Path, size: int, crc: int) -> None:
    """Raises ValueError unless ``path`` is ``size`` bytes of crc32c ``crc``."""
    actual = path.stat().st_size
    if actual != size:
        raise ValueError(f"{path.name}: {actual} bytes, {size} expected")
    if _file_crc(path) != crc:
        raise ValueError(f"{path.name}: checksum mismatch")


def _header(kind: str, key: str, payload: bytes, meta: dict | None, extra: dict | None = None) -> bytes:
    return json.dumps(
        {
            "kind": kind,
            "key": key,
            "converter": converter_version(),
            "payload_bytes": len(payload),
            "payload_crc32c": crc32c(payload),
            **(extra or {}),
            "meta": meta or {},
        }
    ).encode()


def _replace(path: Path, parts: Iterable[bytes]) -> None:
    """Writes ``path`` atomically: a temporary file in its directory, renamed over it."""
    import tempfile  # (with shutil and random: only a start that writes the cache needs them)

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                out.write(part)
        os.chmod(tmp, 0o644)  # (mkstemp makes it 0600: replicas may run as other users)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _check_header(header, kind: str, key: str) -> dict:
    if not isinstance(header, dict):
        raise ValueError("header is not an object")
    for field, expected in (("kind", kind), ("key", key), ("converter", converter_version())):
        if header.get(field) != expected:
            raise ValueError(f"{field} {header.get(field)!r} is not {expected!r}")
    return header


def _parse(data: bytes, kind: str, key: str) -> Entry:
    """The entry in ``data``, checked against the expected kind, key and converter version."""
    if not data.startswith(MAGIC):
        raise ValueError("not a cache entry")
    start = len(MAGIC) + _LENGTH_BYTES
    length = int.from_bytes(data[len(MAGIC) : start], "big")
    if length > MAX_HEADER_BYTES or start + length > len(data):
        raise ValueError(f"header of {length} bytes")
    header = _check_header(json.loads(data[start : start + length].decode("utf-8")), kind, key)
    payload = data[start + length :]
    if header["payload_bytes"] != len(payload):
        raise ValueError(f"payload of {len(payload)} bytes, {header['payload_bytes']} expected")
    if header["payload_crc32c"] != crc32c(payload):
        raise ValueError("payload checksum mismatch")
    meta = header.get("meta", {})
    if not isinstance(meta, dict):
        raise ValueError("meta is not an object")
    return Entry(payload, meta)


# -- plans -----------------------------------------------------------------------------------


def store_plan(cache: ClusterCache, key: str, fused_def, library, original_functions, report) -> None:
    """Writes a delegated graph: its nodes, the function bodies delegation added to the model's
    library (the rest is the model's own), its report."""
    stored = graph_pb2.GraphDef()
    stored.node.extend(fused_def.node)
    stored.versions.CopyFrom(fused_def.versions)
    stored.library.function.extend(
        library[name] for name in sorted(library) if name not in original_functions
    )
    _rekey(stored, "")  # (a process's own key: the reader sets its own)
    cache.write("plan", key, stored.SerializeToString(deterministic=True), {"report": report.to_json()})


def _rekey(graph_def, delegation_key: str) -> None:
    """Sets the delegation key of every cluster node, in the graph and its functions."""
    for node in [*graph_def.node, *(n for f in graph_def.library.function for n in f.node_def)]:
        if node.op == CLUSTER_OP:
            node.attr["key"].s = delegation_key.encode()


def cached_plan(cache: ClusterCache, key: str, original_functions, delegation_key: str):
    """(fused GraphDef, function library, report) of a stored plan, its cluster nodes given
    ``delegation_key`` (the process's own: clusters find their context by it); None on a miss."""
    entry = cache.read("plan", key)
    if entry is None:
        return None
    try:
        fused_def = graph_pb2.GraphDef.FromString(entry.payload)
        report = DelegationReport.from_json(entry.meta["report"])
    except (DecodeError, KeyError, TypeError, ValueError) as exc:
        logger.warning("cluster cache: ignoring plan %s (rebuilt): %s", key, exc)
        return None
    _rekey(fused_def, delegation_key)
    added = {f.signature.name: f for f in fused_def.library.function}
    del fused_def.library.function[:]
    return fused_def, {**original_functions, **added}, report

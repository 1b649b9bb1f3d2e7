"""The oracle cache as tests read it, without TensorFlow (stdlib only).

A missing or stale cache is a test failure, never a skip: the message says to run
``python -m tests.oracle build``.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.oracle import cache_dir
from tests.oracle.catalog import Entry, builder_hash

BUILD_HINT = "run `python -m tests.oracle build` (with the main venv's python)"


def manifest_path(name: str) -> Path:
    return cache_dir() / name / "manifest.json"


def load_manifest(name: str) -> dict:
    """The manifest of model ``name``, with ``dir`` and ``export_path`` (absolute) added."""
    path = manifest_path(name)
    if not path.is_file():
        raise AssertionError(f"oracle model {name!r} is not built ({path} missing): {BUILD_HINT}")
    manifest = json.loads(path.read_text())
    manifest["dir"] = path.parent
    manifest["export_path"] = (path.parent / manifest["export_dir"]).resolve()
    return manifest


def built_names() -> list[str]:
    """Names of every model in the cache; fails when there is no cache at all."""
    if not cache_dir().is_dir():
        raise AssertionError(f"no oracle cache at {cache_dir()}: {BUILD_HINT}")
    return sorted(p.parent.name for p in cache_dir().glob("*/manifest.json"))


def check_current(entry: Entry) -> dict:
    """The manifest of a catalog entry, asserting it was built from the current sources."""
    manifest = load_manifest(entry.name)
    if manifest["builder_hash"] != builder_hash(entry):
        raise AssertionError(f"oracle model {entry.name!r} is stale: {BUILD_HINT}")
    return manifest

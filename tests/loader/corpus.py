"""The oracle corpus as the loader tests see it: every built model's manifest and export dir.

A missing cache is a failure, never a skip: run ``python -m tests.oracle build`` first.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.oracle import REPO_ROOT, cache_dir

LOADER_MODELS = (
    "loader_all_dtypes",
    "loader_partitioned_sharded",
    "loader_pbtxt_no_variables",
    "loader_legacy_init_op_assets",
    "loader_tf2_module",
    "loader_many_variables",
)
BUILD_HINT = "run `python -m tests.oracle build` (the TF oracle corpus is missing or stale)"


def manifests() -> list[dict]:
    """Every manifest of the cache, each with ``dir`` and ``export_path`` added; fails when the cache is absent."""
    found = []
    for path in sorted(cache_dir().glob("*/manifest.json")):
        manifest = json.loads(path.read_text())
        manifest["dir"] = path.parent
        manifest["export_path"] = (path.parent / manifest["export_dir"]).resolve()
        found.append(manifest)
    names = {m["name"] for m in found}
    missing = [name for name in LOADER_MODELS if name not in names]
    assert not missing, f"oracle models {missing} not built in {cache_dir()}: {BUILD_HINT}"
    return found


def manifest(name: str) -> dict:
    for m in manifests():
        if m["name"] == name:
            return m
    raise AssertionError(f"oracle model {name} not built: {BUILD_HINT}")


def committed_models() -> list[Path]:
    """Every export dir under ``models/`` (``models/<name>/<version>/saved_model.pb``)."""
    return sorted(
        p.parent for p in (REPO_ROOT / "models").glob("*/*/saved_model.pb*") if p.parent.name.isdigit()
    )

"""Builds the oracle corpus: one TensorFlow subprocess per builder module (stdlib only).

A subprocess amortises TensorFlow's import over every stale model of its module. It reports
each model on a stdout line starting with ``RESULT_PREFIX`` (everything else it prints goes to
``cache/.logs/<module>.log``) and exits non-zero when any of its models failed.
"""

from __future__ import annotations

import concurrent.futures
import functools
import json
import os
import platform
import shutil
import subprocess
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from tests.oracle import REPO_ROOT, cache_dir, oracle_dir
from tests.oracle.catalog import Entry, builder_hash, discover
from tests.oracle.venvs import CLIENT_VENVS, ensure_venv

RESULT_PREFIX = "@@oracle-result "

# oneDNN off and one hash seed: reference outputs and exports as reproducible as TF allows.
SUBPROCESS_ENV = {
    "TF_CPP_MIN_LOG_LEVEL": "2",
    "TF_ENABLE_ONEDNN_OPTS": "0",
    "PYTHONHASHSEED": "0",
    "PYTHONUNBUFFERED": "1",
    "CUDA_VISIBLE_DEVICES": "",
}

_print_lock = threading.Lock()


def say(line: str) -> None:
    with _print_lock:
        print(line, flush=True)


def select(entries: list[Entry], only: Iterable[str] | None) -> list[Entry]:
    """Entries named by ``only`` (model names, or ``models/`` directory names)."""
    if not only:
        return entries
    wanted = set(only)
    chosen = [e for e in entries if e.name in wanted or (e.models_dir and e.models_dir.name in wanted)]
    known = {e.name for e in chosen} | {e.models_dir.name for e in chosen if e.models_dir}
    unknown = wanted - known
    if unknown:
        raise SystemExit(f"unknown model(s): {', '.join(sorted(unknown))}; see `list`")
    return chosen


def read_manifest(name: str) -> dict | None:
    path = cache_dir() / name / "manifest.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def is_current(entry: Entry) -> bool:
    manifest = read_manifest(entry.name)
    return manifest is not None and manifest.get("builder_hash") == builder_hash(entry)


def summary(entry: Entry, status: str, seconds: float | None = None) -> str:
    manifest = read_manifest(entry.name) or {}
    size = _tree_size(cache_dir() / entry.name)
    if entry.committed:
        size += _tree_size(REPO_ROOT / entry.committed)
    timing = f"{seconds:6.1f}s" if seconds is not None else "       "
    return (
        f"{status:<7} {entry.name:<28} {entry.family:<9} tf {manifest.get('tf_version', '?'):<7}"
        f" {len(manifest.get('meta_graphs', [])):>2} meta graphs"
        f" {len(manifest.get('cases', [])):>3} cases"
        f" {len(manifest.get('variables', {})):>3} variables"
        f" {size / 1024:8.1f} KiB {timing}"
    )


def _tree_size(path: Path) -> int:
    if not path.exists():
        return 0
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def build(*, force: bool, only: list[str] | None, jobs: int) -> int:
    """Builds stale (or all, with ``force``) models; returns the process exit status."""
    start = time.monotonic()
    entries = discover()
    chosen = select(entries, only)
    stale = [e for e in chosen if force or not is_current(e)]
    for entry in chosen:
        if entry not in stale:
            say(summary(entry, "cached"))
    groups: dict[str, list[Entry]] = {}
    for entry in stale:
        groups.setdefault(entry.module, []).append(entry)
    pythons = {venv: ensure_venv(oracle_dir(), venv, say) for venv in {e.venv for e in stale}}
    for venv in CLIENT_VENVS:
        ensure_venv(oracle_dir(), venv, say)
    cache_dir().mkdir(parents=True, exist_ok=True)
    # Modules with the most stale models first (the zoo's: minutes each), so that no long one
    # starts last while the other workers sit idle.
    ordered = sorted(groups.items(), key=lambda item: -len(item[1]))
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [
            pool.submit(_run_module, pythons[group[0].venv], module, group) for module, group in ordered
        ]
        failed = [name for f in futures for name in f.result()]
    if not only:
        _prune({e.name for e in entries})
    total = time.monotonic() - start
    say(
        f"{len(chosen)} models ({len(stale) - len(failed)} built, {len(failed)} failed,"
        f" {len(chosen) - len(stale)} cached) in {total:.1f}s;"
        f" cache {cache_dir()}"
    )
    if failed:
        say(f"FAILED: {', '.join(failed)}")
        return 1
    return 0


def _run_module(python: Path, module: str, group: list[Entry]) -> list[str]:
    """Runs one builder subprocess; returns the names of the models that failed."""
    log_path = cache_dir() / ".logs" / f"{module.rsplit('.', 1)[-1]}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    command = [str(python), "-m", "tests.oracle.tfside", module, "--cache", str(cache_dir())]
    for entry in group:
        command += ["--model", f"{entry.name}={builder_hash(entry)}"]
    by_name = {e.name: e for e in group}
    reported: set[str] = set()
    failed: list[str] = []
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            command,
            cwd=REPO_ROOT,
            env={**os.environ, **SUBPROCESS_ENV},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert process.stdout is not None
        for line in process.stdout:
            if not line.startswith(RESULT_PREFIX):
                log.write(line)
                continue
            result = json.loads(line[len(RESULT_PREFIX) :])
            entry = by_name[result["name"]]
            reported.add(entry.name)
            if result["ok"]:
                say(summary(entry, "built", result["seconds"]))
            else:
                failed.append(entry.name)
                say(f"FAILED  {entry.name}: {result['error']} (log: {log_path})")
        returncode = process.wait()
    missing = [name for name in by_name if name not in reported]
    if returncode != 0 or missing:
        failed += missing
        tail = "".join(log_path.read_text().splitlines(keepends=True)[-30:])
        say(f"builder {module} exited with {returncode}; last lines of {log_path}:\n{tail}")
    return failed


def _prune(known: set[str]) -> None:
    """Removes cache entries of models no builder declares any more."""
    for path in cache_dir().iterdir():
        if path.is_dir() and not path.name.startswith(".") and path.name not in known:
            say(f"removed {path.name} (no builder declares it)")
            shutil.rmtree(path)


def list_models() -> int:
    for entry in discover():
        manifest = read_manifest(entry.name)
        if manifest is None:
            state = "missing"
        elif manifest.get("builder_hash") != builder_hash(entry):
            state = "stale"
        else:
            state = "current"
        where = entry.committed or "saved_model"
        say(f"{entry.name:<28} {entry.family:<9} {entry.venv:<6} {state:<8} {where}")
    return 0


@functools.cache
def _no_aslr() -> list[str]:
    """A prefix running a command without address-space randomization, where available.

    Keras' exporter orders checkpoint variables by ``id()``; with fixed addresses (and a fixed
    hash seed) its exports are byte-for-byte reproducible.
    """
    command = ["setarch", platform.machine(), "-R"]
    if shutil.which("setarch") and subprocess.run([*command, "true"], check=False).returncode == 0:
        return command
    return []


def build_models(only: list[str] | None) -> int:
    """Rebuilds the committed ``models/<name>/<version>`` exports with their build.py."""
    committed = [e for e in discover() if e.committed]
    failures = 0
    for entry in select(committed, only):
        assert entry.committed and entry.models_dir
        version_dir = REPO_ROOT / entry.committed
        tmp = version_dir.parent / f".{version_dir.name}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        python = ensure_venv(oracle_dir(), entry.venv, say)
        log_path = cache_dir() / ".logs" / f"models-{entry.models_dir.name}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        start = time.monotonic()
        with open(log_path, "w") as log:
            result = subprocess.run(
                [*_no_aslr(), str(python), str(entry.models_dir / "build.py"), str(tmp)],
                cwd=REPO_ROOT,
                env={**os.environ, **SUBPROCESS_ENV},
                stdout=log,
                stderr=subprocess.STDOUT,
                check=False,
            )
        if result.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            tail = "".join(log_path.read_text().splitlines(keepends=True)[-30:])
            say(f"FAILED  {entry.committed} (exit {result.returncode}); {log_path}:\n{tail}")
            failures += 1
            continue
        shutil.rmtree(version_dir, ignore_errors=True)
        tmp.rename(version_dir)
        size = _tree_size(version_dir) / 1024
        say(f"built   {entry.committed:<36} {size:8.1f} KiB {time.monotonic() - start:6.1f}s")
    if failures:
        return 1
    say("run `python -m tests.oracle build` to refresh their reference outputs")
    return 0

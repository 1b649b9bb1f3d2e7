"""Model base paths on object storage (``s3://``, ``gs://``, any fsspec URL), behind one seam.

A local base path never comes here: ``serving/lifecycle/source.py`` lists it with ``os.scandir`` as
before. A remote base path (``RemoteBasePath``) is polled with one recursive listing per poll
(S3: ``ListObjectsV2`` pages), and each version the policy picks is read once into a local
cache directory, so the loader, its assets and onnxruntime read local files only::

    s3://bucket/models/m/            <cache dir>/<hash of the URL>/
      1/saved_model.pb        ->       1/saved_model.pb
      1/variables/...                  1/variables/...
                                       1/.remote-listing.json   (what was fetched: sizes, tags)

A version is taken only when it is complete by the rule local directories follow (the loader's):
a ``saved_model.pb``/``.pbtxt``, and if it has ``variables/``, the index and every data shard the
shards' names count (``variables.data-00000-of-00002`` names two). Transient failures (network,
throttling) are retried with backoff and then leave the aspired versions as they were, so a
serving version is never unloaded for them; a missing base path or refused credentials become
one clear status for that model (``errors``), never a silent polling loop.

Backends are optional extras (``pip install 'savedmodel-server[s3]'``, ``[gcs]``); their
credentials come from their usual environment (for S3: ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``, ``AWS_ENDPOINT_URL``) and are never logged.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping

from runtime import errors

logger = logging.getLogger(__name__)

EXTRAS = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs"}  # URL scheme -> our extra
LISTING_FILE = ".remote-listing.json"
ATTEMPTS = 3
FIRST_BACKOFF_SECONDS = 0.2
# Backends give up quickly so that ``retried`` decides (botocore alone spends ~40 s per call on
# an endpoint that is down, and the polling thread would stall that long).
_FAIL_FAST = {
    "s3": {"config_kwargs": {"connect_timeout": 5, "read_timeout": 30, "retries": {"max_attempts": 1}}},
}
# What tells one upload of an object from another, by backend (S3, GCS, others), best first.
_TAG_KEYS = ("ETag", "etag", "md5Hash", "generation", "LastModified", "updated", "mtime", "created")
_SHARD_RE = re.compile(r"variables\.data-(\d+)-of-(\d+)")

Listing = dict[str, dict[str, tuple[int, str]]]  # version child -> {relative path: (size, tag)}


def is_remote(path: str) -> bool:
    """True for a URL with a scheme other than ``file://`` (a local path has none)."""
    scheme, sep, _ = path.partition("://")
    return bool(sep) and scheme.lower() != "file" and "/" not in scheme


def open_file_system(url: str, storage_options: Mapping[str, Mapping] | None = None):
    """``(fsspec file system, path within it)`` for ``url``; FAILED_PRECONDITION naming the
    extra to install when fsspec or the URL's backend is missing."""
    scheme = url.partition("://")[0].lower()
    extra = EXTRAS.get(scheme)
    hint = (
        f"pip install 'savedmodel-server[{extra}]'" if extra else f"install an fsspec backend for {scheme}://"
    )
    try:
        import fsspec
    except ImportError:
        raise errors.FailedPreconditionError(
            None, None, f"Model paths on {scheme}:// need fsspec and its backend: {hint}"
        ) from None
    options = {**_FAIL_FAST.get(EXTRAS.get(scheme), {}), **(storage_options or {}).get(scheme, {})}
    try:
        fs, path = fsspec.core.url_to_fs(url, **options)
    except (ImportError, ValueError) as e:
        raise errors.FailedPreconditionError(
            None, None, f"Model paths on {scheme}:// need a backend that is not installed: {hint} ({e})"
        ) from None
    if EXTRAS.get(scheme) == "s3":
        fs.retries = 1  # s3fs's own retry loop (5 tries, ~40 s against a dead endpoint); ours is `retried`
    return fs, path


def incomplete(files: Mapping[str, object]) -> str | None:
    """Why a version's files (relative paths) are not yet a whole SavedModel, or None. A version
    of only a ``model.tflite`` is whole (``--prefer_tflite_model`` serves it; the loader says so
    otherwise)."""
    if "saved_model.pb" not in files and "saved_model.pbtxt" not in files:
        return None if "model.tflite" in files else "no saved_model.pb yet"
    variables = [p for p in files if p.startswith("variables/")]
    if not variables:
        return None
    if "variables/variables.index" not in files:
        return "variables/ has no variables.index yet"
    shards = [_SHARD_RE.fullmatch(p.rpartition("/")[2]) for p in variables]
    counts = {int(m.group(2)) for m in shards if m}
    if not counts:
        return "variables/ has no data shard yet"
    if len(counts) > 1:
        return f"variables/ holds data shards of different checkpoints ({sorted(counts)} shards)"
    (count,) = counts
    have = {int(m.group(1)) for m in shards if m}
    missing = sorted(set(range(count)) - have)
    if missing:
        return f"variables/ lacks data shard(s) {missing} of {count}"
    return None


def classify(error: BaseException, what: str) -> errors.OpError:
    """A storage failure as a status: NOT_FOUND and PERMISSION_DENIED are the user's to fix;
    anything else (network, throttling, timeouts) is UNAVAILABLE: retried, never fatal."""
    if isinstance(error, errors.OpError):
        return error
    if isinstance(error, FileNotFoundError):
        return errors.NotFoundError(None, None, f"{what}: not found ({error})")
    if isinstance(error, PermissionError):
        return errors.PermissionDeniedError(None, None, f"{what}: access denied ({error})")
    return errors.UnavailableError(None, None, f"{what}: {type(error).__name__}: {error}")


def retried(call: Callable, what: str, sleep: Callable[[float], None] = time.sleep):
    """``call()``, tried ``ATTEMPTS`` times with doubling backoff while it fails transiently."""
    delay = FIRST_BACKOFF_SECONDS
    for attempt in range(ATTEMPTS):
        try:
            return call()
        except Exception as e:  # noqa: BLE001 - every backend failure is classified
            error = classify(e, what)
            if error.code != errors.UNAVAILABLE or attempt == ATTEMPTS - 1:
                raise error from None
            logger.debug("%s failed (attempt %d): %s; retrying", what, attempt + 1, error.message)
            sleep(delay)
            delay *= 2
    raise AssertionError("unreachable")


class RemoteBasePath:
    """One model's base path on object storage: lists its versions and fetches them into
    ``cache_dir``. Used from the source's polling thread only."""

    def __init__(self, url: str, cache_dir: str, storage_options: Mapping[str, Mapping] | None = None):
        self.url = url.rstrip("/")
        self._fs, root = open_file_system(self.url, storage_options)
        self._root = root.rstrip("/")
        key = hashlib.sha256(self.url.encode()).hexdigest()[:16]
        self._cache = os.path.join(cache_dir, key)

    def list(self) -> Listing:
        """Every file under the base path by version child, from one recursive listing.
        NOT_FOUND when there is nothing there (object stores have no empty directories)."""

        def find():
            self._fs.invalidate_cache(self._root)
            return self._fs.find(self._root, detail=True)

        found = retried(find, f"Could not list base path {self.url}")
        listing: Listing = {}
        prefix = self._root + "/"
        for path, info in found.items():
            if not path.startswith(prefix) or info.get("type") == "directory":
                continue
            child, _, relative = path[len(prefix) :].partition("/")
            if relative:
                tag = next((str(info[k]) for k in _TAG_KEYS if info.get(k) not in (None, "")), "")
                listing.setdefault(child, {})[relative] = (int(info.get("size") or 0), tag)
        if not found:
            raise errors.NotFoundError(
                None, None, f"Could not find base path {self.url}: nothing is stored there"
            )
        return listing

    def fetch(self, child: str, files: Mapping[str, tuple[int, str]]) -> str:
        """The local copy of version ``child`` as ``files`` lists it: kept when it matches,
        otherwise downloaded whole into a fresh directory and swapped in."""
        local = os.path.join(self._cache, child)
        wanted = {path: list(entry) for path, entry in sorted(files.items())}
        if _read_listing(local) == wanted:
            return local
        os.makedirs(self._cache, exist_ok=True)
        staging = tempfile.mkdtemp(prefix=f".fetch-{child}-", dir=self._cache)
        try:
            remote = [f"{self._root}/{child}/{path}" for path in wanted]
            targets = [os.path.join(staging, *path.split("/")) for path in wanted]
            for target in targets:
                os.makedirs(os.path.dirname(target), exist_ok=True)
            retried(lambda: self._fs.get(remote, targets), f"Could not read version {self.url}/{child}")
            with open(os.path.join(staging, LISTING_FILE), "w") as f:
                json.dump(wanted, f)
            _swap_in(staging, local)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        logger.info("Read version %s/%s into %s (%d files)", self.url, child, local, len(wanted))
        return local


def _read_listing(local: str) -> dict | None:
    try:
        with open(os.path.join(local, LISTING_FILE)) as f:
            listing = json.load(f)
    except (OSError, ValueError):
        return None
    return listing if isinstance(listing, dict) else None


def _swap_in(staging: str, local: str) -> None:
    """Moves the finished download to ``local``; an older copy is moved aside first (a rename
    cannot replace a non-empty directory) and removed after."""
    old = None
    if os.path.exists(local):
        old = tempfile.mkdtemp(prefix=".old-", dir=os.path.dirname(local))
        os.rename(local, os.path.join(old, "copy"))
    os.rename(staging, local)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)

"""FileSystemStoragePathSource: finds model versions on disk and tells the manager.

Each model's base path holds one directory per version, named by the version number::

    /models/half_plus_two/
      00000123/            -> version 123 (leading zeros are fine)
        saved_model.pb
        variables/
      124/                 -> version 124
      tmp-upload/          -> ignored (not a number)

Every ``file_system_poll_wait_seconds`` (0: once, negative: never) the source lists each base
path, applies the model's version policy (``latest`` N, default 1; ``all``; ``specific``) and
calls ``aspired_versions_callback(name, [AspiredVersion, ...])`` with the complete list of
versions the manager should serve. A base path that does not exist is logged as TF Serving
logs it and leaves that model's aspired versions as they were (never an empty list), so a
transiently missing mount never unloads a model. Unlike TF Serving, one missing base path
does not stop the other models from being polled, and only directories count as versions.
Base paths on object storage (``s3://``, ``gs://``, ...) are read through ``serving/lifecycle/storage.py``.
With ``settle_seconds`` (``--file_system_settle_seconds``, ours) a version directory is only seen
once nothing under it has changed for that long, so a copy in progress is never loaded.

Thread-safety: ``update_config`` and ``stop`` may be called from any thread; the callback
runs on the polling thread (or the caller of ``poll_once``).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from runtime import errors
from serving.lifecycle import storage

logger = logging.getLogger(__name__)

_VERSION_RE = re.compile(r"\s*[+-]?\d+\s*")  # absl::SimpleAtoi: spaces and a sign allowed
_INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class VersionPolicy:
    """``ServableVersionPolicy`` as plain data: kind in {"latest", "all", "specific"}."""

    kind: str = "latest"
    num_versions: int = 1
    versions: tuple[int, ...] = ()

    @classmethod
    def from_proto(cls, proto) -> VersionPolicy:
        choice = proto.WhichOneof("policy_choice")
        if choice == "all":
            return cls("all")
        if choice == "specific":
            return cls("specific", versions=tuple(proto.specific.versions))
        num = proto.latest.num_versions if choice == "latest" else 1
        return cls("latest", num_versions=max(num, 1))


@dataclass(frozen=True)
class ServableToMonitor:
    servable_name: str
    base_path: str
    policy: VersionPolicy = VersionPolicy()


@dataclass(frozen=True)
class AspiredVersion:
    version: int
    path: str


AspiredVersionsCallback = Callable[[str, list[AspiredVersion]], None]


def parse_version(child: str) -> int | None:
    """The version number a directory name stands for, or None."""
    if not _VERSION_RE.fullmatch(child):
        return None
    value = int(child)
    return value if -_INT64_MAX - 1 <= value <= _INT64_MAX else None


def index_children_by_version(name: str, children: Sequence[str]) -> dict[int, str]:
    by_version: dict[int, str] = {}
    for child in sorted(children):
        version = parse_version(child)
        if version is None:
            continue
        if version in by_version:
            logger.warning(
                "Duplicate version directories detected. Version %d will be loaded from %s, %s will be ignored.",
                version,
                child,
                by_version[version],
            )
        by_version[version] = child
    return by_version


def select_versions(servable: ServableToMonitor, children: Sequence[str]) -> list[tuple[int, str]]:
    """Pure: the (version, child directory) pairs the policy aspires to, highest first."""
    by_version = index_children_by_version(servable.servable_name, children)
    ordered = sorted(by_version.items(), reverse=True)
    policy = servable.policy
    if policy.kind == "all":
        return ordered
    if policy.kind == "specific":
        wanted = set(policy.versions)
        chosen = [(v, c) for v, c in ordered if v in wanted]
        for missing in sorted(wanted - {v for v, _ in chosen}):
            logger.warning(
                "Version %d of servable %s, which was requested to be served as a 'specific' version in "
                "the servable's version policy, was not found in the file system",
                missing,
                servable.servable_name,
            )
        return chosen
    return ordered[: policy.num_versions]


def newest_change(path: str) -> float:
    """The latest status change (ctime) of ``path`` or anything under it. A copy that keeps
    files' modification times (``cp -p``, ``rsync -a``, ``gsutil``) still sets their ctimes."""
    newest = 0.0
    for root, _dirs, files in os.walk(path):
        for name in (root, *(os.path.join(root, f) for f in files)):
            try:
                newest = max(newest, os.lstat(name).st_ctime)
            except OSError:
                continue
    return newest


def settled(path: str, settle_seconds: float, now: float | None = None) -> bool:
    """True when nothing under ``path`` has changed for ``settle_seconds``."""
    return (time.time() if now is None else now) - newest_change(path) >= settle_seconds


def poll_servable(servable: ServableToMonitor, settle_seconds: float = 0.0) -> list[AspiredVersion] | None:
    """Lists one base path; None when it cannot be read (logged as TF Serving does).
    ``settle_seconds`` > 0: a version directory that changed more recently than that is not
    seen yet (it is still being written), so the policy keeps the versions it has."""
    base = servable.base_path
    if not os.path.exists(base):
        logger.error(
            "FileSystemStoragePathSource encountered a filesystem access error: Could not find base path "
            "%s for servable %s with error NOT_FOUND: %s not found",
            base,
            servable.servable_name,
            base,
        )
        return None
    try:
        children = [e.name for e in os.scandir(base) if e.is_dir()]
    except OSError as e:
        logger.error(
            "FileSystemStoragePathSource encountered a filesystem access error: %s: %s", base, e.strerror
        )
        return None
    if servable.policy.kind == "specific" and not servable.policy.versions:
        logger.warning("No specific versions requested for servable %s.", servable.servable_name)
        return []
    if settle_seconds > 0:
        children = [c for c in children if parse_version(c) is None or _settled(base, c, settle_seconds)]
    chosen = select_versions(servable, children)
    if not chosen:
        logger.warning(
            "No versions of servable %s found under base path %s. Did you forget to name your leaf "
            "directory as a number (eg. '/1/')?",
            servable.servable_name,
            base,
        )
    return [AspiredVersion(v, os.path.join(base, child)) for v, child in chosen]


def _settled(base: str, child: str, settle_seconds: float) -> bool:
    if settled(os.path.join(base, child), settle_seconds):
        return True
    logger.info(
        "Version directory %s is still changing; waiting until it is unchanged for %gs",
        os.path.join(base, child),
        settle_seconds,
    )
    return False


def poll_remote_servable(servable: ServableToMonitor, remote: storage.RemoteBasePath) -> list[AspiredVersion]:
    """``poll_servable`` for a base path on object storage: one listing, complete versions
    only (an upload in progress is not seen yet), the policy's picks fetched into the local
    cache. Raises the OpError that stopped it (``storage.classify``)."""
    listing = remote.list()
    complete = {}
    for child, files in listing.items():
        if parse_version(child) is None:
            continue
        why = storage.incomplete(files)
        if why is None:
            complete[child] = files
        else:
            logger.info("Version %s/%s is not complete yet (%s); not loading it", remote.url, child, why)
    chosen = select_versions(servable, list(complete))
    if not chosen:
        logger.warning(
            "No versions of servable %s found under base path %s. Did you forget to name your leaf "
            "directory as a number (eg. '/1/')?",
            servable.servable_name,
            remote.url,
        )
    return [AspiredVersion(version, remote.fetch(child, complete[child])) for version, child in chosen]


SourceErrorCallback = Callable[[str, "errors.OpError | None"], None]


class FileSystemStoragePathSource:
    """Polls base paths on a daemon thread and reports aspired versions per model.

    Base paths on object storage (``storage.is_remote``) are read through ``storage``: their
    versions are fetched into ``cache_dir`` (a temporary directory of the source's own, removed
    on ``stop``, when empty), and ``error_callback(name, error_or_None)`` hears when a model's
    base path fails (a missing path, refused credentials, storage out of reach) and recovers.
    """

    def __init__(
        self,
        servables: Sequence[ServableToMonitor],
        poll_wait_seconds: float,
        callback: AspiredVersionsCallback,
        settle_seconds: float = 0.0,
        *,
        cache_dir: str = "",
        storage_options: dict | None = None,
        error_callback: SourceErrorCallback | None = None,
    ):
        self._servables = list(servables)
        self._poll_wait_seconds = poll_wait_seconds
        self._settle_seconds = settle_seconds
        self._callback = callback
        self._cache_dir, self._own_cache = cache_dir, False
        self._storage_options = storage_options or {}
        self._error_callback = error_callback
        self._remotes: dict[str, storage.RemoteBasePath] = {}
        self._errors: dict[str, str] = {}  # model -> the message last reported
        self._lock = threading.Lock()
        self._poll_lock = threading.Lock()  # one poll at a time, callbacks in order
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def servables(self) -> list[ServableToMonitor]:
        with self._lock:
            return list(self._servables)

    def start(self) -> None:
        """Polls once now (on this thread), then every poll_wait_seconds in the background.

        0 polls once; negative never polls (TF Serving: reserved for tests).
        """
        if self._poll_wait_seconds < 0:
            return
        self.poll_once()
        if self._poll_wait_seconds > 0:
            self._thread = threading.Thread(
                target=self._run, name="FileSystemStoragePathSource_filesystem_polling_thread", daemon=True
            )
            self._thread.start()

    def update_config(self, servables: Sequence[ServableToMonitor]) -> None:
        """Replaces the watched models; dropped models get an empty aspired list (unload)."""
        with self._poll_lock:
            with self._lock:
                old = {s.servable_name for s in self._servables}
                self._servables = list(servables)
                new = {s.servable_name for s in self._servables}
            for name in sorted(old - new):
                self._callback(name, [])
        if self._poll_wait_seconds >= 0:
            self.poll_once()

    def poll_once(self) -> None:
        with self._poll_lock:
            for servable in self.servables:
                if storage.is_remote(servable.base_path):
                    versions = self._poll_remote(servable)
                else:
                    versions = poll_servable(servable, self._settle_seconds)
                if versions is not None:
                    self._callback(servable.servable_name, versions)

    def _poll_remote(self, servable: ServableToMonitor) -> list[AspiredVersion] | None:
        """None (the aspired versions stay as they were) when the base path fails."""
        name = servable.servable_name
        try:
            remote = self._remotes.get(servable.base_path)
            if remote is None:
                remote = storage.RemoteBasePath(servable.base_path, self._cache(), self._storage_options)
                self._remotes[servable.base_path] = remote
            versions = poll_remote_servable(servable, remote)
        except errors.OpError as error:
            self._report(name, error)
            return None
        self._report(name, None)
        return versions

    def _report(self, name: str, error: errors.OpError | None) -> None:
        """Logs a model's storage failure once, and its recovery; tells ``error_callback``."""
        message = "" if error is None else error.message
        if self._errors.get(name, "") == message:
            return
        self._errors[name] = message
        if error is None:
            logger.info("The base path of servable %s can be read again", name)
        elif error.code == errors.UNAVAILABLE:
            logger.warning("Servable %s keeps the versions it serves: %s", name, message)
        else:
            logger.error("FileSystemStoragePathSource encountered a filesystem access error: %s", message)
        if self._error_callback is not None:
            self._error_callback(name, error)

    def _cache(self) -> str:
        if not self._cache_dir:
            self._cache_dir, self._own_cache = tempfile.mkdtemp(prefix="model_server-models-"), True
        return self._cache_dir

    def stop(self) -> None:
        self._stopped.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._own_cache:
            shutil.rmtree(self._cache_dir, ignore_errors=True)

    def _run(self) -> None:
        while not self._stopped.is_set():
            self._wake.wait(self._poll_wait_seconds)
            self._wake.clear()
            if self._stopped.is_set():
                return
            try:
                self.poll_once()
            except Exception:  # a bad poll must never kill polling
                logger.exception("File-system poll failed")

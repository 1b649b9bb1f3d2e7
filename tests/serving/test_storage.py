"""serving.lifecycle.storage and the source's remote base paths, on fsspec's in-memory file system.

The in-memory store stands in for a bucket (``memory://bucket/...``: one recursive listing per
poll, objects that appear whole); tests/e2e/test_object_storage.py runs the same paths against
an S3 server.
"""

from __future__ import annotations

import os
import uuid

import fsspec
import pytest

from runtime import errors
from serving.lifecycle import storage
from serving.lifecycle.source import (
    AspiredVersion,
    FileSystemStoragePathSource,
    ServableToMonitor,
    VersionPolicy,
)

SHARD = "variables/variables.data-00000-of-00001"


@pytest.fixture
def bucket():
    """A fresh ``memory://`` base path, removed afterwards."""
    url = f"memory://bucket-{uuid.uuid4().hex[:8]}/models/m"
    fs, root = fsspec.core.url_to_fs(url)
    yield url, fs, root
    if fs.exists(root.split("/models")[0]):
        fs.rm(root.split("/models")[0], recursive=True)


def upload(fs, root, version, files=("saved_model.pb", "variables/variables.index", SHARD), content=b"x"):
    for path in files:
        fs.pipe(f"{root}/{version}/{path}", content + path.encode())


@pytest.mark.parametrize(
    "path, remote",
    [
        ("/models/m", False),
        ("relative/m", False),
        ("file:///models/m", False),
        ("s3://bucket/m", True),
        ("gs://bucket/m", True),
        ("memory://bucket/m", True),
    ],
)
def test_is_remote(path, remote):
    assert storage.is_remote(path) is remote


@pytest.mark.parametrize(
    "files, why",
    [
        ({"saved_model.pb"}, None),
        ({"saved_model.pbtxt"}, None),
        ({"variables/variables.index", SHARD}, "no saved_model.pb yet"),
        ({"saved_model.pb", SHARD}, "variables/ has no variables.index yet"),
        ({"saved_model.pb", "variables/variables.index"}, "variables/ has no data shard yet"),
        ({"saved_model.pb", "variables/variables.index", SHARD, "assets/vocab.txt"}, None),
        (
            {"saved_model.pb", "variables/variables.index", "variables/variables.data-00001-of-00003"},
            "variables/ lacks data shard(s) [0, 2] of 3",
        ),
        (
            {
                "saved_model.pb",
                "variables/variables.index",
                "variables/variables.data-00000-of-00002",
                "variables/variables.data-00001-of-00002",
            },
            None,
        ),
    ],
)
def test_a_version_is_complete_by_the_loader_rule(files, why):
    assert storage.incomplete(dict.fromkeys(files)) == why


def test_listing_and_fetching_once(bucket, tmp_path):
    url, fs, root = bucket
    upload(fs, root, 1)
    upload(fs, root, 2, files=("saved_model.pb",))
    remote = storage.RemoteBasePath(url, str(tmp_path))
    listing = remote.list()
    assert set(listing) == {"1", "2"} and set(listing["1"]) == {
        "saved_model.pb",
        "variables/variables.index",
        SHARD,
    }
    local = remote.fetch("1", listing["1"])
    assert open(os.path.join(local, SHARD), "rb").read() == b"x" + SHARD.encode()
    marker = os.path.join(local, "saved_model.pb")
    os.utime(marker, (1, 1))
    assert remote.fetch("1", remote.list()["1"]) == local
    assert os.stat(marker).st_mtime == 1  # not read again: the listing is unchanged
    upload(fs, root, 1, content=b"yy")  # a new upload of version 1
    assert remote.fetch("1", remote.list()["1"]) == local
    assert open(os.path.join(local, SHARD), "rb").read() == b"yy" + SHARD.encode()
    assert sorted(os.listdir(os.path.dirname(local))) == ["1"]  # no staging or old copies left


def test_nothing_at_the_base_path_is_not_found(bucket, tmp_path):
    url, _, _ = bucket
    with pytest.raises(errors.NotFoundError, match="Could not find base path memory://"):
        storage.RemoteBasePath(url, str(tmp_path)).list()


def test_a_missing_backend_names_the_extra(monkeypatch, tmp_path):
    def no_backend(url, **options):
        raise ImportError("Install s3fs to access S3")

    monkeypatch.setattr(fsspec.core, "url_to_fs", no_backend)
    with pytest.raises(errors.FailedPreconditionError, match=r"pip install 'savedmodel-server\[s3\]'"):
        storage.RemoteBasePath("s3://bucket/m", str(tmp_path))
    with pytest.raises(errors.FailedPreconditionError, match=r"savedmodel-server\[gcs\]"):
        storage.RemoteBasePath("gs://bucket/m", str(tmp_path))


def test_transient_failures_are_retried_and_others_are_not():
    calls, slept = [], []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError("connection reset")
        return "listed"

    assert storage.retried(flaky, "list", sleep=slept.append) == "listed"
    assert slept == [0.2, 0.4]

    def refused():
        calls.append(1)
        raise PermissionError("InvalidAccessKeyId")

    calls.clear()
    with pytest.raises(errors.PermissionDeniedError, match="list: access denied"):
        storage.retried(refused, "list", sleep=slept.append)
    assert len(calls) == 1

    def down():
        raise TimeoutError("read timed out")

    with pytest.raises(errors.UnavailableError, match="list: TimeoutError: read timed out"):
        storage.retried(down, "list", sleep=lambda s: None)


class Recorder:
    def __init__(self):
        self.aspired, self.errors = [], []

    def callback(self, name, versions):
        self.aspired.append([v.version for v in versions])

    def error(self, name, error):
        self.errors.append(None if error is None else type(error).__name__)


def test_the_source_serves_complete_versions_and_survives_outages(bucket, tmp_path, monkeypatch):
    url, fs, root = bucket
    upload(fs, root, 1)
    recorder = Recorder()
    source = FileSystemStoragePathSource(
        [ServableToMonitor("m", url, VersionPolicy())],
        -1,
        recorder.callback,
        cache_dir=str(tmp_path),
        error_callback=recorder.error,
    )
    source.poll_once()
    upload(fs, root, 2, files=("saved_model.pb", "variables/variables.index"))  # upload in progress
    source.poll_once()
    upload(fs, root, 2)
    source.poll_once()
    assert recorder.aspired == [[1], [1], [2]]
    remote = source._remotes[url]
    monkeypatch.setattr(remote._fs, "find", lambda *a, **k: (_ for _ in ()).throw(ConnectionError("down")))
    monkeypatch.setattr(storage, "FIRST_BACKOFF_SECONDS", 0.0)
    source.poll_once()
    source.poll_once()
    assert recorder.aspired == [[1], [1], [2]]  # nothing reported: the versions served stay
    assert recorder.errors == ["UnavailableError"]  # reported once
    monkeypatch.undo()
    source.poll_once()
    assert recorder.aspired[-1] == [2] and recorder.errors == ["UnavailableError", None]
    assert AspiredVersion(2, os.path.join(remote._cache, "2")).path.startswith(str(tmp_path))
    source.stop()


def test_a_missing_base_path_is_an_error_for_that_model_only(bucket, tmp_path):
    url, fs, root = bucket
    upload(fs, root, 1)
    recorder = Recorder()
    source = FileSystemStoragePathSource(
        [
            ServableToMonitor("m", url, VersionPolicy()),
            ServableToMonitor("gone", url + "-gone", VersionPolicy()),
        ],
        -1,
        recorder.callback,
        error_callback=recorder.error,
    )
    source.poll_once()
    assert recorder.aspired == [[1]] and recorder.errors == ["NotFoundError"]
    cache = source._cache_dir
    assert os.path.isdir(cache)
    source.stop()
    assert not os.path.exists(cache)  # the source's own temporary cache goes with it

"""serving.lifecycle.source: version directory names, version policies, polling and config updates."""

import logging
import os

import pytest

from serving.lifecycle.source import (
    AspiredVersion,
    FileSystemStoragePathSource,
    ServableToMonitor,
    VersionPolicy,
    parse_version,
    poll_servable,
    select_versions,
)

VERSIONS = {
    "1": 1,
    "00000123": 123,
    "0": 0,
    "-3": -3,
    "+7": 7,
    " 8 ": 8,
    "1a": None,
    "v1": None,
    "1_000": None,
    "": None,
    "1.5": None,
    "99999999999999999999": None,
}


@pytest.mark.parametrize("name, version", VERSIONS.items(), ids=[repr(k) for k in VERSIONS])
def test_parse_version(name, version):
    assert parse_version(name) == version


CHILDREN = ["1", "0003", "2", "tmp", "10", ".hidden"]
POLICIES = {
    "latest default": (VersionPolicy(), [(10, "10")]),
    "latest 2": (VersionPolicy("latest", num_versions=2), [(10, "10"), (3, "0003")]),
    "latest 99": (VersionPolicy("latest", num_versions=99), [(10, "10"), (3, "0003"), (2, "2"), (1, "1")]),
    "all": (VersionPolicy("all"), [(10, "10"), (3, "0003"), (2, "2"), (1, "1")]),
    "specific": (VersionPolicy("specific", versions=(1, 3, 42)), [(3, "0003"), (1, "1")]),
}


@pytest.mark.parametrize("policy, expected", POLICIES.values(), ids=POLICIES.keys())
def test_select_versions(policy, expected):
    assert select_versions(ServableToMonitor("m", "/base", policy), CHILDREN) == expected


def test_duplicate_versions_warn(caplog):
    with caplog.at_level(logging.WARNING):
        chosen = select_versions(ServableToMonitor("m", "/b"), ["01", "1"])
    assert chosen == [(1, "1")]
    assert "Duplicate version directories detected" in caplog.text


def test_policy_from_proto():
    from apis.tensorflow_serving.config import file_system_storage_path_source_pb2 as fs

    proto = fs.FileSystemStoragePathSourceConfig.ServableVersionPolicy()
    assert VersionPolicy.from_proto(proto) == VersionPolicy("latest", 1)
    proto.latest.num_versions = 0
    assert VersionPolicy.from_proto(proto) == VersionPolicy("latest", 1)
    proto.all.SetInParent()
    assert VersionPolicy.from_proto(proto) == VersionPolicy("all")
    proto.specific.versions.extend([3, 1])
    assert VersionPolicy.from_proto(proto) == VersionPolicy("specific", versions=(3, 1))


def test_poll_missing_base_path_logs_like_tf_serving(tmp_path, caplog):
    missing = str(tmp_path / "nope")
    with caplog.at_level(logging.ERROR):
        assert poll_servable(ServableToMonitor("m", missing)) is None
    assert (
        f"FileSystemStoragePathSource encountered a filesystem access error: Could not find base path "
        f"{missing} for servable m with error NOT_FOUND: {missing} not found"
    ) in caplog.text


def test_poll_no_versions_warns(tmp_path, caplog):
    (tmp_path / "notaversion").mkdir()
    (tmp_path / "5").write_text("a file is not a version")
    with caplog.at_level(logging.WARNING):
        assert poll_servable(ServableToMonitor("m", str(tmp_path))) == []
    assert "No versions of servable m found under base path" in caplog.text


def test_poll_returns_paths(tmp_path):
    (tmp_path / "007").mkdir()
    assert poll_servable(ServableToMonitor("m", str(tmp_path))) == [AspiredVersion(7, str(tmp_path / "007"))]


def test_source_polls_and_unaspires_removed_models(tmp_path):
    for name in ("a", "b"):
        (tmp_path / name / "1").mkdir(parents=True)
    calls = []
    source = FileSystemStoragePathSource(
        [ServableToMonitor("a", str(tmp_path / "a")), ServableToMonitor("b", str(tmp_path / "b"))],
        0,
        lambda name, versions: calls.append((name, [v.version for v in versions])),
    )
    source.start()
    assert calls == [("a", [1]), ("b", [1])]
    calls.clear()
    os.mkdir(tmp_path / "a" / "2")
    source.update_config([ServableToMonitor("a", str(tmp_path / "a"))])
    assert calls == [("b", []), ("a", [2])]
    source.stop()


def test_negative_poll_wait_never_polls(tmp_path):
    calls = []
    source = FileSystemStoragePathSource(
        [ServableToMonitor("a", str(tmp_path))], -1, lambda *a: calls.append(a)
    )
    source.start()
    source.stop()
    assert calls == []

"""The aspired-version policies, table-driven: (versions as (version, state, aspired)) -> action."""

import pytest

from runtime import errors
from serving.lifecycle.policy import (
    AVAILABILITY,
    RESOURCE,
    Action,
    HarnessState,
    ServableAction,
    VersionSnapshot,
    next_action,
    parse_policies,
    swap_policies,
)

NEW, LOADING, READY = HarnessState.NEW, HarnessState.LOADING, HarnessState.READY
UNLOADING, DISABLED, ERROR = HarnessState.UNLOADING, HarnessState.DISABLED, HarnessState.ERROR
LOAD, UNLOAD = Action.LOAD, Action.UNLOAD

CASES = {
    "loads the highest new aspired version": (
        [(1, UNLOADING, False), (2, ERROR, False), (3, READY, True), (4, NEW, True), (5, NEW, True)],
        (LOAD, 5),
    ),
    "unloads un-aspired first when an aspired one is ready": (
        [(1, UNLOADING, False), (2, ERROR, False), (3, READY, False), (4, READY, True), (5, NEW, True)],
        (UNLOAD, 3),
    ),
    "unloads when nothing is aspired": (
        [(1, DISABLED, False), (2, READY, False), (3, ERROR, False)],
        (UNLOAD, 2),
    ),
    "nothing to do": (
        [(1, READY, True), (2, ERROR, True), (3, LOADING, True), (4, UNLOADING, False), (5, DISABLED, False)],
        None,
    ),
    "keeps the old version while the new one loads": ([(1, READY, False), (2, LOADING, True)], None),
    "keeps the old version when the new one failed": ([(1, READY, False), (2, ERROR, True)], None),
    "hot swap starts by loading the new version": ([(1, READY, False), (2, NEW, True)], (LOAD, 2)),
    "hot swap ends by unloading the old version": ([(1, READY, False), (2, READY, True)], (UNLOAD, 1)),
    "unloads if another aspired version is ready even while one loads": (
        [(1, READY, False), (2, LOADING, True), (3, READY, True)],
        (UNLOAD, 1),
    ),
    "unloads if another aspired version is ready even if one failed": (
        [(1, READY, False), (2, ERROR, True), (3, READY, True)],
        (UNLOAD, 1),
    ),
    "two un-aspired ready versions: the lowest goes": (
        [(2, READY, False), (1, READY, False), (3, ERROR, True), (4, LOADING, True)],
        (UNLOAD, 1),
    ),
    "model removed from the config": ([(7, READY, False)], (UNLOAD, 7)),
    "empty": ([], None),
    "first load": ([(1, NEW, True)], (LOAD, 1)),
    "all policy loads highest first": ([(1, NEW, True), (2, NEW, True), (3, NEW, True)], (LOAD, 3)),
}


@pytest.mark.parametrize("versions, expected", CASES.values(), ids=CASES.keys())
def test_next_action(versions, expected):
    snapshots = [VersionSnapshot(v, s, a) for v, s, a in versions]
    want = None if expected is None else ServableAction(*expected)
    assert next_action(snapshots) == want


RESOURCE_CASES = {
    "hot swap starts by unloading the old version": ([(1, READY, False), (2, NEW, True)], (UNLOAD, 1)),
    "loads nothing while the old version unloads": ([(1, UNLOADING, False), (2, NEW, True)], None),
    "loads once the old version is gone": ([(1, DISABLED, False), (2, NEW, True)], (LOAD, 2)),
    "an old version that failed holds nothing": ([(1, ERROR, False), (2, NEW, True)], (LOAD, 2)),
    "waits for an un-aspired version still loading": ([(1, LOADING, False), (2, NEW, True)], None),
    "unloads every un-aspired ready version, lowest first": (
        [(2, READY, False), (1, READY, False), (3, NEW, True)],
        (UNLOAD, 1),
    ),
    "aspired versions stay": ([(1, READY, True), (2, NEW, True)], (LOAD, 2)),
    "first load": ([(1, NEW, True)], (LOAD, 1)),
    "nothing to do": ([(1, READY, True), (2, ERROR, True)], None),
    "model removed from the config": ([(7, READY, False)], (UNLOAD, 7)),
}


@pytest.mark.parametrize("versions, expected", RESOURCE_CASES.values(), ids=RESOURCE_CASES.keys())
def test_next_action_resource_preserving(versions, expected):
    snapshots = [VersionSnapshot(v, s, a) for v, s, a in versions]
    want = None if expected is None else ServableAction(*expected)
    assert next_action(snapshots, RESOURCE) == want


def test_the_flag_names_a_policy_for_every_model_and_for_some():
    assert parse_policies("") == (AVAILABILITY, {})
    assert parse_policies("resource") == (RESOURCE, {})
    assert parse_policies("availability_preserving, big=resource_preserving,other=Availability") == (
        AVAILABILITY,
        {"big": RESOURCE, "other": AVAILABILITY},
    )
    policy = swap_policies("resource,small=availability")
    assert (policy("small"), policy("any")) == (AVAILABILITY, RESOURCE)
    with pytest.raises(errors.InvalidArgumentError, match="unknown version swap policy 'fast'"):
        swap_policies("m=fast")

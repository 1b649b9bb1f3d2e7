"""Our ``apis/inference/grpc_predict_v2.proto`` is wire-identical to KServe's published one.

KServe's generated module (the ``kserve`` package, in the v2clients venv) registers the same
``inference.*`` names as ours, so it runs in a process of its own and hands over its
FileDescriptorSet and messages it built: every declaration has the same numbers, types, labels
and oneofs, the service the same methods (and so the same paths), and its messages parse and
re-serialize byte for byte with our module.
"""

from __future__ import annotations

import json

from google.protobuf import unknown_fields

from apis.inference import grpc_predict_v2_pb2 as ours
from tests.apis import descriptors
from tests.apis.oracle_env import run_script


def _published(tmp_path):
    binpb, messages = tmp_path / "v2.binpb", tmp_path / "messages.json"
    run_script("v2clients", "dump_v2_protocol", str(binpb), str(messages))
    return descriptors.read_descriptor_set(binpb), json.loads(messages.read_text())


def test_declarations_and_messages_match_kserves_published_proto(tmp_path):
    files, messages = _published(tmp_path)
    theirs = descriptors.declarations(files)
    mine = descriptors.declarations(
        [f for f in descriptors.our_files() if f.name == "inference/grpc_predict_v2.proto"]
    )
    # KServe's package adds the model repository extension (load and unload over the API),
    # which this server does not offer; everything else is the same, declaration by declaration.
    extension = {name for name in theirs if name.startswith("inference.RepositoryModel")}
    assert extension == {
        f"inference.RepositoryModel{verb}{kind}"
        for verb in ("Load", "Unload")
        for kind in ("Request", "Response")
    }
    assert set(mine) == set(theirs) - extension
    assert len(mine) > 20  # every message, nested message and map entry, and the service
    service = "inference.GRPCInferenceService"
    for name in set(mine) - {service}:
        assert (mine[name].kind, mine[name].summary) == (theirs[name].kind, theirs[name].summary), name
    their_methods = [m for m in theirs[service].summary if not m[0].startswith("RepositoryModel")]
    assert list(mine[service].summary) == their_methods
    assert [f.package for f in files] == ["inference"]
    service = ours.DESCRIPTOR.services_by_name["GRPCInferenceService"]
    assert [m.name for m in service.methods] == [
        "ServerLive", "ServerReady", "ModelReady", "ServerMetadata", "ModelMetadata", "ModelInfer",
    ]  # fmt: skip
    for name, data in messages.items():
        wire = bytes.fromhex(data)
        message = getattr(ours, name).FromString(wire)
        assert not unknown_fields.UnknownFieldSet(message), name  # every field is one of ours
        assert message.SerializeToString(deterministic=True) == wire, name

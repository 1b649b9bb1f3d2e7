"""Descriptor summaries for comparing our generated modules with TensorFlow's.

A summary keeps what decides the wire and text/JSON formats (names, numbers, types,
labels, oneofs, proto3 `optional`, explicit `packed`, explicit `json_name`, defaults,
enum values, service methods) and drops what does not (file options, comments,
declaration order of nested types). File names are compared with our `apis/` prefix
removed.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import descriptor_pb2

REPO_ROOT = Path(__file__).resolve().parents[2]
APIS_DIR = REPO_ROOT / "apis"
PREFIX = "apis/"

FieldProto = descriptor_pb2.FieldDescriptorProto


@dataclass(frozen=True)
class Declaration:
    kind: str  # "message", "enum" or "service"
    file: str  # TF-relative file name, e.g. "tensorflow/core/framework/tensor.proto"
    summary: tuple


def _strip(name: str) -> str:
    return name[len(PREFIX) :] if name.startswith(PREFIX) else name


def our_files() -> list[descriptor_pb2.FileDescriptorProto]:
    """FileDescriptorProtos of every generated module, with `apis/` removed from file names."""
    files = []
    for proto in sorted(APIS_DIR.rglob("*.proto")):
        module_name = ".".join(proto.relative_to(REPO_ROOT).with_suffix("").parts) + "_pb2"
        module = importlib.import_module(module_name)
        file = descriptor_pb2.FileDescriptorProto.FromString(module.DESCRIPTOR.serialized_pb)
        file.name = _strip(file.name)
        file.dependency[:] = [_strip(dep) for dep in file.dependency]
        files.append(file)
    return files


def read_descriptor_set(path: Path) -> list[descriptor_pb2.FileDescriptorProto]:
    return list(descriptor_pb2.FileDescriptorSet.FromString(path.read_bytes()).file)


def file_summary(file: descriptor_pb2.FileDescriptorProto) -> tuple:
    return (
        ("syntax", file.syntax or "proto2"),
        ("package", file.package),
        ("dependencies", tuple(sorted(file.dependency))),
        ("public", tuple(sorted(file.dependency[i] for i in file.public_dependency))),
    )


def _field_summary(message: descriptor_pb2.DescriptorProto, field: FieldProto) -> tuple:
    oneof = message.oneof_decl[field.oneof_index].name if field.HasField("oneof_index") else None
    return (
        ("number", field.number),
        ("type", FieldProto.Type.Name(field.type)),
        ("label", FieldProto.Label.Name(field.label)),
        ("type_name", field.type_name),
        ("oneof", oneof),
        ("proto3_optional", field.proto3_optional),
        ("packed", field.options.packed if field.options.HasField("packed") else None),
        ("default", field.default_value if field.HasField("default_value") else None),
        ("json_name", field.json_name if field.HasField("json_name") else None),
    )


def _message_summary(message: descriptor_pb2.DescriptorProto) -> tuple:
    return (
        ("fields", tuple(sorted((f.name, _field_summary(message, f)) for f in message.field))),
        ("oneofs", tuple(sorted(o.name for o in message.oneof_decl))),
        ("nested", tuple(sorted(n.name for n in message.nested_type))),
        ("enums", tuple(sorted(e.name for e in message.enum_type))),
        ("map_entry", message.options.map_entry),
        ("reserved", tuple(sorted((r.start, r.end) for r in message.reserved_range))),
        ("reserved_names", tuple(sorted(message.reserved_name))),
        ("extensions", len(message.extension_range) + len(message.extension)),
    )


def _enum_summary(enum: descriptor_pb2.EnumDescriptorProto) -> tuple:
    return (
        ("values", tuple((v.name, v.number) for v in enum.value)),
        ("allow_alias", enum.options.allow_alias),
    )


def _service_summary(service: descriptor_pb2.ServiceDescriptorProto) -> tuple:
    return tuple(
        (
            m.name,
            (
                ("input", m.input_type),
                ("output", m.output_type),
                ("client_streaming", m.client_streaming),
                ("server_streaming", m.server_streaming),
            ),
        )
        for m in service.method
    )


def declarations(files: list[descriptor_pb2.FileDescriptorProto]) -> dict[str, Declaration]:
    """Every message, enum and service by full name (no leading dot)."""
    found: dict[str, Declaration] = {}

    def add_enums(scope: str, enums, file: str) -> None:
        for enum in enums:
            found[scope + enum.name] = Declaration("enum", file, _enum_summary(enum))

    def add_messages(scope: str, messages, file: str) -> None:
        for message in messages:
            full = scope + message.name
            found[full] = Declaration("message", file, _message_summary(message))
            add_enums(full + ".", message.enum_type, file)
            add_messages(full + ".", message.nested_type, file)

    for file in files:
        scope = file.package + "." if file.package else ""
        add_enums(scope, file.enum_type, file.name)
        add_messages(scope, file.message_type, file.name)
        for service in file.service:
            found[scope + service.name] = Declaration("service", file.name, _service_summary(service))
    return found


def _flatten(summary: tuple, prefix: str = "") -> dict[str, object]:
    flat: dict[str, object] = {}
    for key, value in summary:
        path = f"{prefix}{key}"
        nested = (
            isinstance(value, tuple)
            and value
            and all(isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str) for v in value)
        )
        if nested:
            flat.update(_flatten(value, path + "."))
        else:
            flat[path] = value
    return flat


def differences(ours: tuple, theirs: tuple) -> list[str]:
    """Human-readable differences between two summaries of the same declaration."""
    a, b = _flatten(ours), _flatten(theirs)

    def show(flat: dict[str, object], key: str) -> str:
        return repr(flat[key]) if key in flat else "<absent>"

    return [
        f"{key}: ours={show(a, key)} tf={show(b, key)}"
        for key in sorted(a.keys() | b.keys())
        if show(a, key) != show(b, key)
    ]

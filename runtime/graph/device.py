"""``DeviceSpec``: TensorFlow's device names, parsed (``/job:w/replica:0/task:1/device:GPU:0``).

Everything runs on the host CPU; device names are kept so graphs round-trip and so
``op.device`` reads as it does in TF. The legacy forms ``/cpu:0`` and ``/gpu:1`` parse too.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

LOCAL_CPU = "/job:localhost/replica:0/task:0/device:CPU:0"


@dataclass(frozen=True)
class DeviceSpec:
    """An immutable, possibly partial device name; unset fields are None."""

    job: str | None = None
    replica: int | None = None
    task: int | None = None
    device_type: str | None = None
    device_index: int | None = None

    @classmethod
    def from_string(cls, spec: str) -> DeviceSpec:
        """Parses a device name; ValueError on a malformed one, as TF raises."""
        fields: dict[str, object] = {}
        for part in (p for p in spec.strip().split("/") if p):
            key, _, rest = part.partition(":")
            lowered = key.lower()
            if lowered in ("job", "replica", "task") and rest:
                fields[lowered] = rest if lowered == "job" else _index(rest, spec)
            elif lowered == "device" and rest:
                kind, _, index = rest.partition(":")
                fields["device_type"] = kind.upper() if kind.lower() in ("cpu", "gpu") else kind
                if index and index != "*":
                    fields["device_index"] = _index(index, spec)
            elif lowered in ("cpu", "gpu", "tpu") or (rest and rest.isdigit() and key.isupper()):
                fields["device_type"] = key.upper()
                if rest and rest != "*":
                    fields["device_index"] = _index(rest, spec)
            else:
                raise ValueError(f"Unknown attribute: '{part}' in '{spec}'")
        return cls(**fields)

    def to_string(self) -> str:
        parts = []
        if self.job is not None:
            parts.append(f"/job:{self.job}")
        if self.replica is not None:
            parts.append(f"/replica:{self.replica}")
        if self.task is not None:
            parts.append(f"/task:{self.task}")
        if self.device_type is not None:
            index = "*" if self.device_index is None else self.device_index
            parts.append(f"/device:{self.device_type}:{index}")
        return "".join(parts)

    def replace(self, **changes) -> DeviceSpec:
        return replace(self, **changes)

    def __str__(self) -> str:
        return self.to_string()


def pinned_to_cpu(device: str) -> bool:
    """Whether ``tf.device`` put an op on a CPU (``/cpu:0``, ``/device:CPU:0``, a full name): with
    a GPU present such an op stays on the CPU, where TF's placer would put the rest on the GPU."""
    return "CPU" in device.upper()


def _index(text: str, spec: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"Malformed device specification: '{spec}'") from None

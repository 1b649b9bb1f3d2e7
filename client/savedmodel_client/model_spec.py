"""Which model, version and signature a call names: one value both transports read."""

from __future__ import annotations

import dataclasses
from urllib.parse import quote


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """TF Serving's ModelSpec: a model, at most one of ``version`` and ``label`` (neither: the
    latest), and a signature ("" for the server's default)."""

    name: str
    version: int | None = None
    label: str | None = None
    signature_name: str = ""

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a model name is required")
        if self.version is not None and self.label is not None:
            raise ValueError("give a version or a label, not both")

    def fill(self, proto, with_signature: bool = True) -> None:
        """Write this spec into a ``tensorflow.serving.ModelSpec`` message."""
        proto.name = self.name
        if self.version is not None:
            proto.version.value = int(self.version)
        elif self.label is not None:
            proto.version_label = self.label
        if with_signature and self.signature_name:
            proto.signature_name = self.signature_name

    def rest_path(self) -> str:
        """``/v1/models/{name}[/versions/{v}|/labels/{l}]``, as TF Serving's REST API names it."""
        path = "/v1/models/" + quote(self.name, safe="")
        if self.version is not None:
            path += f"/versions/{int(self.version)}"
        elif self.label is not None:
            path += "/labels/" + quote(self.label, safe="")
        return path

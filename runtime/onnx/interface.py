"""What a converted cluster and its runner agree on: the cluster node's op type, the input
``Signature`` a model is converted for, and the name of a converted model's guard output; and
how delegation reads the signatures it is told will run (``signature_pairs``).

Apart from the converters (which import onnx) so that a start from the cluster cache, which
installs a stored plan and reads stored models, never imports them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

CLUSTER_OP = "_OrtCluster"
GUARD = "guard"  # the model's last output where converters added guards (``Builder.guard``)


@dataclass(frozen=True)
class Signature:
    """One compiled form of a cluster: the dtype (TF enum) and rank of each input."""

    dtypes: tuple[int, ...]
    ranks: tuple[int, ...]


def signature_pairs(signatures: Iterable) -> list:
    """(feed names, fetch names) per signature; a plain name is a fetch with nothing fed."""
    return [((), [s]) if isinstance(s, str) else s for s in signatures]

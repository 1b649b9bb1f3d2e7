"""What a converted cluster and its runner agree on: the cluster node's op type, the input
``Signature`` a model is converted for, and the name of a converted model's guard output; and
how delegation reads the signatures it is told will run (``signature_pairs``).

Apart from the converters (which import onnx) so that a start from the cluster cache, which
installs a stored plan and reads stored models, never imports them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from runtime.tensor_util import conforms

CLUSTER_OP = "_OrtCluster"
GUARD = "guard"  # the model's last output where converters added guards (``Builder.guard``)


@dataclass(frozen=True)
class Signature:
    """One compiled form of a cluster: the dtype (TF enum) and rank of each input, and the
    shapes its inputs are declared with (``shapes``: per input, TF's static shape, None for an
    unknown dim, or None for no declared dim; empty: none declared).

    Declared dims let onnxruntime's shape inference prove shapes equal: its NCHWc pass then adds
    a residual or branch sum into the convolution before it instead of reshaping both operands
    to 5-D around a separate Add (NASNetMobile b1: 129 Reshapes and 30 Adds fewer, 10% faster).
    TF's C++ Session does not check feeds against static shapes, so a run that breaks them is
    compiled again without (``ClusterRunner``).
    """

    dtypes: tuple[int, ...]
    ranks: tuple[int, ...]
    shapes: tuple[tuple[int | None, ...] | None, ...] = ()


def declared_shapes(static: list, inputs: list) -> tuple:
    """``Signature.shapes`` for ``inputs`` (arrays): each one's static shape from ``static``
    (TF's, per input: a tuple with None for unknown dims, or None) where the input conforms."""
    return tuple(
        shape if shape is not None and conforms(shape, x.shape) else None for shape, x in zip(static, inputs)
    )


def signature_pairs(signatures: Iterable) -> list:
    """(feed names, fetch names) per signature; a plain name is a fetch with nothing fed."""
    return [((), [s]) if isinstance(s, str) else s for s in signatures]

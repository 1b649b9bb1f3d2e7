"""``tf.train.load_checkpoint`` without TensorFlow: a reader over a TensorBundle (V2) checkpoint.

A checkpoint prefix names ``<prefix>.index`` and its ``<prefix>.data-?????-of-?????`` shards (the
format is documented in ``runtime/checkpoint/tensor_bundle.py``); a directory holding a ``checkpoint`` state
file resolves to its latest checkpoint, as TF does::

    reader = load_checkpoint("export/variables/variables")
    reader.get_variable_to_shape_map()   # {"dense/kernel": [4, 2], ...}
    reader.get_tensor("dense/kernel")    # read-only numpy array backed by the mmapped shard

Partitioned variables appear under their full name with their full shape; ``get_tensor`` assembles
their slices. dtypes are TensorFlow ``DataType`` values (see ``runtime.dtypes``).
"""

from __future__ import annotations

import os
import re

import numpy as np

from runtime import errors
from runtime.checkpoint.tensor_bundle import BundleReader


class CheckpointReader:
    """Read access to one checkpoint; immutable and safe to share between threads."""

    def __init__(self, prefix: str):
        self._bundle = BundleReader(prefix)
        self.prefix = prefix

    def has_tensor(self, name: str) -> bool:
        return self._bundle.has_tensor(name)

    def get_tensor(self, name: str) -> np.ndarray | bytes:
        """The tensor's value (a scalar string comes back as ``bytes``, as TF's reader returns it)."""
        value = self._bundle.get_tensor(name)
        if value.dtype == object and value.ndim == 0:
            return value.item()
        return value

    def get_variable_to_shape_map(self) -> dict[str, list[int]]:
        return {name: self._bundle.shape(name) for name in self._bundle.keys()}

    def get_variable_to_dtype_map(self) -> dict[str, int]:
        return {name: self._bundle.dtype(name) for name in self._bundle.keys()}

    @property
    def bundle(self) -> BundleReader:
        return self._bundle


_STATE_LINE = re.compile(r'^model_checkpoint_path:\s*"(.*)"\s*$', re.MULTILINE)


def latest_checkpoint(checkpoint_dir: str) -> str | None:
    """The prefix named by ``<checkpoint_dir>/checkpoint`` (a text CheckpointState), or None."""
    try:
        with open(os.path.join(checkpoint_dir, "checkpoint"), encoding="utf-8") as f:
            match = _STATE_LINE.search(f.read())
    except OSError:
        return None
    if not match:
        return None
    path = match.group(1).encode().decode("unicode_escape")
    return path if os.path.isabs(path) else os.path.join(checkpoint_dir, path)


def load_checkpoint(ckpt_dir_or_file: str) -> CheckpointReader:
    """A ``CheckpointReader`` for a checkpoint prefix, or for the latest checkpoint of a directory."""
    prefix = ckpt_dir_or_file
    if os.path.isdir(prefix):
        prefix = latest_checkpoint(prefix)
        if prefix is None:
            raise ValueError(
                f"Couldn't find 'checkpoint' file or checkpoints in given directory {ckpt_dir_or_file}"
            )
    if not os.path.exists(prefix + ".index"):
        raise errors.NotFoundError(
            None,
            None,
            f"Unsuccessful TensorSliceReader constructor: Failed to find any matching files for {prefix}",
        )
    return CheckpointReader(prefix)

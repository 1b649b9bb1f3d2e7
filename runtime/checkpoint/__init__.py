"""TensorBundle (V2) checkpoints, read without TensorFlow.

``tensor_bundle.py`` reads a bundle's index and data shards (the format is documented at its top),
``table.py`` the SSTable its index is (blocks, snappy, crc32c), ``reader.py`` is
``tf.train.load_checkpoint``'s ``CheckpointReader`` over them.

May import: ``runtime.errors``, ``runtime.dtypes``, ``runtime.wire`` and ``apis``. Restoring a
SavedModel's variables runs the ``RestoreV2`` kernel (``runtime/kernels/io_ops.py``), which reads
through this package.
"""

"""``tf.train.Example`` and ``SequenceExample`` parsing, for the ``ParseExample`` family of kernels.

``specs.py`` says what to parse (a ``Config`` of dense, sparse and ragged specs); ``parser.py`` is
the general path with TF's semantics and error texts; ``fast_path.py`` parses large batches of
canonically encoded Examples column-wise, over the batch's bytes read by ``wire_readers.py``.

May import: ``runtime.errors``, ``runtime.dtypes``, ``runtime.wire`` and ``apis``: it parses bytes
into numpy arrays and knows nothing of graphs, kernels or sessions (``runtime/kernels/parsing_ops.py``
calls it).
"""

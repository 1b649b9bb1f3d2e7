"""TensorFlow as a test oracle: SavedModels and the outputs TensorFlow computes for them.

The server never imports TensorFlow. TensorFlow runs only here, in its own pinned virtual
environments, to build a corpus of SavedModels and to record what TensorFlow's own loader
(``tf.compat.v1.saved_model.loader.load`` + ``Session.run``) returns for fixed inputs.
Conformance tests load the same SavedModels with our loader and runtime and compare.

Commands (run with the main venv's python; this side is stdlib only)::

    python -m tests.oracle build [--force] [--only NAME ...] [-j N]
    python -m tests.oracle list
    python -m tests.oracle models [--only NAME ...]   # rebuild the committed models/ exports

Layout of the oracle directory (``$SMS_ORACLE_DIR``, default ``<repo>/.oracle``, git-ignored)::

    .oracle/
      tf215/  tf221/             pinned venvs; <venv>/sms-requirements.json stamps the pins
      cache/
        .logs/<module>.log       output of the last builder subprocess of each module
        .logs/models-<name>.log  output of the last ``models`` rebuild of models/<name>
        <model>/
          manifest.json
          saved_model/           the export dir (absent for committed example models)
          cases/<i>/<key>.pb     signature inputs of case i
          cases/<i>/out_<key>.pb signature outputs of case i, as computed by TensorFlow
          variables/<n>.pb       every tensor of the variables checkpoint

``manifest.json`` (all relative paths are relative to the manifest's directory)::

    {
      "name": "tf1_half_plus_two",
      "family": "tf1",
      "tf_version": "2.15.1",
      "builder_hash": "<sha256 of the builder sources>",
      "export_dir": "saved_model",          # or e.g. "../../../models/half_plus_two/00000123"
      "meta_graphs": [["serve"], ["serve", "gpu"]],   # tag sets in saved_model.pb, in file order
      "cases": [
        {"tags": ["serve"], "signature": "serving_default",
         "method_name": "tensorflow/serving/regress",
         "inputs": {"inputs": "cases/0/inputs.pb"},
         "outputs": {"outputs": "cases/0/out_outputs.pb"},
         "rtol": 1e-05, "atol": 1e-06}
      ],
      "variables": {"a": "variables/0.pb"}  # checkpoint tensor name -> file; {} without a checkpoint
    }

Every signature of every MetaGraphDef has at least one case (the build fails otherwise).
Keys of ``inputs``/``outputs`` are the signature's input/output keys; file names are those keys
with characters outside ``[A-Za-z0-9_.-]`` replaced by ``_``. Every ``.pb`` file is one serialized
``tensorflow.TensorProto`` made by ``tf.make_tensor_proto`` (strings and tf.Example batches
included: a Classify/Regress/tf.Example input is a DT_STRING tensor of serialized
``tensorflow.Example``). Nothing is pickled. Outputs are every output of the signature, fetched
by tensor name with every signature input fed. Partitioned variables appear once, under their
full name, as the whole tensor the checkpoint reader returns. Outputs compare with
``abs(ours - tf) <= atol + rtol * abs(tf)`` (exact equality for non-float dtypes).

A model is rebuilt when its ``builder_hash`` differs: the hash covers the builder module,
``tfside.py``, the venv's pins and, for committed example models, every file under
``models/<name>/``. ``corpus.py`` reads the cache for tests without TensorFlow.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
ORACLE_DIR_ENV = "SMS_ORACLE_DIR"


def oracle_dir() -> Path:
    """The oracle directory: ``$SMS_ORACLE_DIR`` or ``<repo>/.oracle``."""
    return Path(os.environ.get(ORACLE_DIR_ENV) or REPO_ROOT / ".oracle").resolve()


def cache_dir() -> Path:
    """Where built models, reference outputs and manifests live."""
    return oracle_dir() / "cache"

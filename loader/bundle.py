"""``SavedModelBundle``: a restored, initialised Session plus the MetaGraphDef it came from.

Loading follows TensorFlow's ``loader.load`` / C++ ``LoadSavedModel`` step by step:

1. ``read_saved_model``: parse ``saved_model.pb`` (or ``.pbtxt``);
2. ``select_meta_graph``: the MetaGraphDef whose tag set equals the requested one;
3. import it (graph, function library, collections) into the Session's Graph;
4. restore variables: run ``saver_def.restore_op_name`` with ``variables/variables`` fed to
   ``saver_def.filename_tensor_name``, so ``RestoreV2`` and the assign ops run in the runtime
   (skipped when the export has no ``variables/variables.index`` and its restore op reads no
   key, as in TensorFlow; unlike TensorFlow, a graph that reads keys then fails to load:
   ``loader/restore.py``). The restore function ``tf.saved_model.save`` writes runs by its
   kernels without planning it (``DirectRestore``), with the same values;
5. run the init op -- the ``__saved_model_init_op`` signature, else the ``saved_model_main_op``
   collection, else ``legacy_init_op`` -- with each asset's path fed to its tensor.

Nothing here executes code carried by the model: ``PyFunc``/``EagerPyFunc`` nodes are refused by the
Session with UnimplementedError naming the op. Before step 4, ``runtime/execution/signature_check.py`` walks
what the restore op, the init op and each signature need: a missing op type under the restore or
init op fails the load; a signature needing one is recorded in ``unavailable_signatures`` (the
others serve normally); a model with signatures none of which can run fails to load.
A bundle owns its Session; ``close()`` releases it.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import importlib
import logging
import os
import time
from collections.abc import Iterable, Mapping

import numpy as np

from apis.tensorflow.core.protobuf import fingerprint_pb2, meta_graph_pb2
from loader.assets import resolve_assets
from loader.completeness import check_assets, check_checkpoint
from loader.fingerprint import model_identity, read_fingerprint
from loader.meta_graph import select_meta_graph
from loader.restore import DirectRestore, uninitialized_variables
from loader.saved_model import read_saved_model, variables_prefix
from runtime import errors
from runtime.execution import signature_check
from runtime.execution.gc_pause import gc_paused

logger = logging.getLogger(__name__)

INIT_OP_SIGNATURE_KEY = "__saved_model_init_op"
MAIN_OP_KEY = "saved_model_main_op"
LEGACY_INIT_OP_KEY = "legacy_init_op"


@dataclasses.dataclass
class SavedModelBundle:
    """A loaded SavedModel: ``session`` is restored and initialised, ready for ``session.run``.

    ``signature_defs`` is the MetaGraphDef's signature map (``__saved_model_init_op`` included, as
    in TensorFlow). The Session is safe to run from several threads as far as the runtime's Session
    is; the bundle itself is never mutated after loading.
    """

    session: object
    meta_graph_def: meta_graph_pb2.MetaGraphDef
    export_dir: str
    tags: frozenset[str]
    fingerprint: fingerprint_pb2.FingerprintDef | None = None
    # Signature key -> the UnimplementedError (all missing op types, with counts) a run would hit.
    unavailable_signatures: dict[str, errors.OpError] = dataclasses.field(default_factory=dict)

    @property
    def signature_defs(self) -> Mapping[str, meta_graph_pb2.SignatureDef]:
        return self.meta_graph_def.signature_def

    def check_signature(self, signature_key: str) -> None:
        """Raises the signature's UnimplementedError if it was found unable to run at load."""
        error = self.unavailable_signatures.get(signature_key)
        if error is not None:
            raise copy.copy(error)  # fresh per call: a shared instance would pile up tracebacks

    def close(self) -> None:
        close = getattr(self.session, "close", None)
        if close is not None:
            close()


def _delegate(session, delegation, served, cluster_cache, identity: str, original) -> None:
    """onnxruntime delegation, which only ever speeds a model up: if rewriting the graph fails,
    the model loads with every op on the numpy kernels, and the reason is logged. ``original``
    imports the graph again for the runs the rewrite fails, so the Session need not keep it."""
    try:
        options = None if delegation is True else delegation
        onnx = importlib.import_module("runtime.onnx")  # by name: onnxruntime loads only here
        cache = onnx.ClusterCache(cluster_cache, identity) if cluster_cache is not None else None
        onnx.delegate(session, options, served, cache, original)
    except Exception as exc:  # noqa: BLE001 - a model that runs natively is still served
        logger.warning(
            "onnxruntime delegation failed, every op runs on the numpy kernels: %s: %s",
            type(exc).__name__,
            exc,
        )


def load(sess, tags: Iterable[str], export_dir: str) -> meta_graph_pb2.MetaGraphDef:
    """Load into ``sess`` (whose graph must be empty) as ``tf.compat.v1.saved_model.loader.load``."""
    return _load(sess, tags, export_dir)[0]


def _load(sess, tags, export_dir) -> tuple[meta_graph_pb2.MetaGraphDef, signature_check.GraphIndex]:
    """``load``, and the graph's index for the signature checks after it (walked once)."""
    export_dir = os.fspath(export_dir)
    tags = [tags] if isinstance(tags, str) else list(tags)
    saved_model = read_saved_model(export_dir)
    meta_graph_def = select_meta_graph(saved_model, tags, export_dir)
    _import(sess.graph, meta_graph_def, export_dir, tags)
    index = signature_check.GraphIndex(meta_graph_def.graph_def)
    check_load_ops(meta_graph_def, export_dir, index)
    restore_variables(sess, meta_graph_def, export_dir)
    run_init_op(sess, meta_graph_def, export_dir)
    return meta_graph_def, index


def load_saved_model(
    export_dir: str,
    tags: Iterable[str] = ("serve",),
    session_config=None,
    delegation=True,
    cluster_cache: str | os.PathLike | None = None,
) -> SavedModelBundle:
    """A new Session over a new Graph with the SavedModel loaded, like C++ ``LoadSavedModel``.

    ``delegation``: True (the default, as ``model_server``'s ``--onnx_delegation``) or a
    ``runtime.onnx.DelegationOptions`` rewrites the Session's graph after restore and init so that
    op clusters feeding the signatures run in onnxruntime (``runtime.onnx.delegate``; report in
    ``session.delegation_report``); False (or None) keeps every op on the numpy kernels.
    ``cluster_cache``: a directory keeping that rewrite and the converted, validated clusters,
    keyed by the model's fingerprint and tag set and the converter's version, so that the next
    load of this model (a restart, another replica sharing the directory) skips converting and
    validating (``runtime/onnx/cluster_cache.py``). None: no cache.
    """
    with gc_paused():
        return _load_saved_model(export_dir, tags, session_config, delegation, cluster_cache)


def _load_saved_model(export_dir, tags, session_config, delegation, cluster_cache) -> SavedModelBundle:
    from runtime.execution.session import Session
    from runtime.graph.graph import Graph  # the runtime core; imported here to keep `import loader` light

    start = time.monotonic()
    export_dir = os.fspath(export_dir)
    tags = frozenset([tags] if isinstance(tags, str) else tags)
    logger.info("Reading SavedModel from: %s", export_dir)
    # The C++ Session's feed semantics (no static shape check on feeds), as TF Serving has them.
    session = Session(graph=Graph(), config=session_config, check_feed_shapes=False)
    try:
        meta_graph_def, index = _load(session, tags, export_dir)
        unavailable = signature_check.unavailable_signatures(meta_graph_def, index)
        signature_check.check_some_signature_runs(meta_graph_def, unavailable, export_dir)
        _check_variables(session, meta_graph_def, unavailable, export_dir)
        fingerprint = read_fingerprint(export_dir)
        if delegation:
            served = signature_tensors(meta_graph_def, skip=unavailable)
            identity = ""
            if cluster_cache is not None:
                identity = f"{model_identity(export_dir, fingerprint)} tags {sorted(tags)}"
            original = functools.partial(_imported, meta_graph_def, export_dir, tags)
            _delegate(session, delegation, served, cluster_cache, identity, original)
    except BaseException:
        close = getattr(session, "close", None)
        if close is not None:
            close()
        raise
    logger.info(
        "SavedModel load for tags { %s }; Status: success. Took %d microseconds.",
        " ".join(sorted(tags)),
        (time.monotonic() - start) * 1e6,
    )
    for error in unavailable.values():
        logger.warning("%s", error.message)
    return SavedModelBundle(session, meta_graph_def, export_dir, tags, fingerprint, unavailable)


def _check_variables(session, meta_graph_def, unavailable, export_dir: str) -> None:
    """Every variable the signatures read holds a value after restore and init, or the load fails
    (so that such a version never replaces a good one, and is retried when its files change)."""
    missing = uninitialized_variables(session, signature_tensors(meta_graph_def, skip=unavailable))
    if missing:
        raise errors.FailedPreconditionError(
            None,
            None,
            f"The SavedModel at {export_dir} leaves {len(missing)} variable(s) its signatures read "
            f"without a value after restore and init (first: {missing[0]}). Is it still being written?",
        )


def signature_tensors(
    meta_graph_def: meta_graph_pb2.MetaGraphDef, skip: Iterable[str] = ()
) -> list[tuple[list[str], list[str]]]:
    """(input tensor names, output tensor names) of every serving signature (not the init op's,
    nor those named in ``skip``)."""
    skip = frozenset(skip)
    return [
        (
            sorted(i.name for i in signature.inputs.values() if i.name),
            sorted(o.name for o in signature.outputs.values() if o.name),
        )
        for key, signature in sorted(meta_graph_def.signature_def.items())
        if key != INIT_OP_SIGNATURE_KEY and key not in skip
    ]


def check_load_ops(
    meta_graph_def: meta_graph_pb2.MetaGraphDef,
    export_dir: str,
    index: signature_check.GraphIndex | None = None,
) -> None:
    """UnimplementedError, before anything runs, if the restore or init op needs a missing op type."""
    ops = {}
    saver_def = meta_graph_def.saver_def
    if os.path.exists(variables_prefix(export_dir) + ".index") and saver_def.restore_op_name:
        ops["restore"] = (saver_def.restore_op_name, [saver_def.filename_tensor_name])
    name = init_op_name(meta_graph_def)
    if name is not None:
        ops["init"] = (name, list(resolve_assets(meta_graph_def, export_dir)))
    signature_check.check_load_ops(meta_graph_def, ops, index)


def _imported(meta_graph_def: meta_graph_pb2.MetaGraphDef, export_dir: str, tags):
    """The MetaGraphDef's graph, imported again (a delegated Session's native fallback)."""
    from runtime.graph.graph import Graph

    graph = Graph()
    _import(graph, meta_graph_def, export_dir, tags)
    return graph


def _import(graph, meta_graph_def, export_dir: str, tags) -> None:
    try:
        graph.import_meta_graph(meta_graph_def)
    except errors.OpError:
        raise
    except Exception as e:  # a parsable but malformed graph must still surface as a loader error
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Cannot import the MetaGraphDef with tags {sorted(set(tags))} of {export_dir}: "
            f"{type(e).__name__}: {e}",
        ) from e


def restore_variables(sess, meta_graph_def: meta_graph_pb2.MetaGraphDef, export_dir: str) -> None:
    """Run the saver's restore op with the variables prefix fed; a no-op for exports without variables."""
    check_checkpoint(meta_graph_def, export_dir)
    prefix = variables_prefix(export_dir)
    if not os.path.exists(prefix + ".index"):
        logger.info("The specified SavedModel has no variables; no checkpoints were restored.")
        return
    saver_def = meta_graph_def.saver_def
    if not meta_graph_def.HasField("saver_def") or not saver_def.restore_op_name:
        logger.info("The MetaGraphDef has no saver; no checkpoints were restored.")
        return
    direct = DirectRestore.of(sess.graph, saver_def)
    if direct is not None:
        try:
            direct.run(sess, prefix)
            return
        except Exception as exc:  # noqa: BLE001 - the restore op itself says what is wrong, in TF's words
            logger.info("Restoring by the restore op after its direct run failed: %s", exc)
    feeds = {
        saver_def.filename_tensor_name: np.array(prefix.encode("utf-8", "surrogateescape"), dtype=object)
    }
    _run(sess, saver_def.restore_op_name, feeds, export_dir, "restore")


def init_op_name(meta_graph_def: meta_graph_pb2.MetaGraphDef) -> str | None:
    """The init op TensorFlow would run: signature, then main_op collection, then legacy_init_op."""
    signature = meta_graph_def.signature_def.get(INIT_OP_SIGNATURE_KEY)
    if signature is not None:
        output = signature.outputs.get(INIT_OP_SIGNATURE_KEY)
        if output is not None and output.name:
            return output.name
    for key in (MAIN_OP_KEY, LEGACY_INIT_OP_KEY):
        if key in meta_graph_def.collection_def:
            names = meta_graph_def.collection_def[key].node_list.value
            if len(names) != 1:
                raise errors.InvalidArgumentError(
                    None, None, f"Expected exactly one SavedModel init op. Found {len(names)}: {list(names)}."
                )
            return names[0]
    return None


def run_init_op(sess, meta_graph_def: meta_graph_pb2.MetaGraphDef, export_dir: str) -> None:
    """Run the init op, if any, with every asset path fed to its tensor."""
    name = init_op_name(meta_graph_def)
    if name is None:
        return
    check_assets(meta_graph_def, export_dir)
    assets = resolve_assets(meta_graph_def, export_dir)
    feeds = {
        tensor: np.array(path.encode("utf-8", "surrogateescape"), dtype=object)
        for tensor, path in assets.items()
    }
    _run(sess, name, feeds, export_dir, "init")


def _run(sess, op_name: str, feeds: dict, export_dir: str, what: str) -> None:
    target = op_name[1:] if op_name.startswith("^") else op_name
    if target.endswith(":0"):  # an op stored as a tensor name: run the op itself
        target = target[:-2]
    try:
        sess.run([target], feed_dict=feeds)
    except errors.OpError:
        raise
    except Exception as e:  # noqa: BLE001 - a malformed graph must surface as a loader error
        raise errors.InvalidArgumentError(
            None, None, f"Failed to run the {what} op {op_name!r} of {export_dir}: {type(e).__name__}: {e}"
        ) from e

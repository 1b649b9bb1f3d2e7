"""Batched results equal unbatched ones, request by request, on real models of the oracle
corpus: an MLP and a CNN through Predict, an Estimator's Classify on tf.Examples; and both equal
what TensorFlow computed for the same rows."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from apis.tensorflow.core.framework import tensor_pb2
from apis.tensorflow_serving.apis import classification_pb2, predict_pb2
from serving.batching.bundle import Batching
from serving.batching.session import BatchingSession
from serving.inference import tensor_codec
from serving.inference.bundles import saved_model_load_fn
from serving.inference.classify import run_classify
from serving.inference.predict import run_predict
from serving.lifecycle.servable import Servable, ServableId
from serving.options import ServerOptions
from tests.oracle import corpus

# Padded to allowed sizes, a batch closes at 8 rows or after a second: every request of a
# test lands in one or two batches.
PARAMS = """
max_batch_size { value: 8 }
batch_timeout_micros { value: 1000000 }
allowed_batch_sizes: 4
allowed_batch_sizes: 8
num_batch_threads { value: 2 }
"""
SPLIT = [1, 2, 1, 3, 1]  # rows per request: 8 in all


def read(path: Path) -> np.ndarray:
    return tensor_codec.decode(tensor_pb2.TensorProto.FromString(path.read_bytes()))


@pytest.fixture
def servables(tmp_path):
    made: list[Batching] = []

    def load(name: str, tags=("serve",)):
        params = tmp_path / "batching.txt"
        params.write_text(PARAMS)
        options = ServerOptions(
            enable_batching=True, batching_parameters_file=str(params), saved_model_tags=",".join(tags)
        )
        made.append(Batching(options))
        path = str(corpus.load_manifest(name)["export_path"])
        batched = saved_model_load_fn(options, made[-1])(path, ServableId(name, 1))
        plain = saved_model_load_fn(options)(path, ServableId(name, 1))
        assert isinstance(batched.session, BatchingSession) and not isinstance(plain.session, BatchingSession)
        return Servable(name, 1, batched), Servable(name, 1, plain), made[-1]

    yield load
    for batching in made:
        batching.stop(5)


def concurrently(fn, items) -> list:
    out: list = [None] * len(items)
    threads = [
        threading.Thread(target=lambda i=i: out.__setitem__(i, fn(items[i]))) for i in range(len(items))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return out


def pieces(value: np.ndarray) -> list[np.ndarray]:
    starts = np.cumsum([0, *SPLIT])
    return [value[a:b] for a, b in zip(starts, starts[1:])]


@pytest.mark.parametrize("name", ["batching_mlp", "batching_cnn", "keras_cnn_bn"])
def test_batched_predict_equals_unbatched_request_by_request(servables, name):
    manifest = corpus.load_manifest(name)
    case = next(c for c in manifest["cases"] if c["signature"] == "serving_default")
    ((alias, file),) = case["inputs"].items()
    value = np.concatenate([read(manifest["dir"] / file)] * 4)[:8]
    expected_tf = {k: np.concatenate([read(manifest["dir"] / f)] * 4)[:8] for k, f in case["outputs"].items()}
    batched, plain, batching = servables(name)

    def request(rows: np.ndarray) -> predict_pb2.PredictRequest:
        r = predict_pb2.PredictRequest()
        r.model_spec.name = name
        tensor_codec.encode_content_into(r.inputs[alias], rows)
        return r

    requests = [request(rows) for rows in pieces(value)]
    got = concurrently(lambda r: run_predict(batched, r), requests)
    start = 0
    for r, response in zip(requests, got):
        alone = run_predict(plain, r)
        n = tensor_codec.decode(r.inputs[alias]).shape[0]
        assert set(response.outputs) == set(alone.outputs) == set(expected_tf)
        for key, tensor in response.outputs.items():
            ours = tensor_codec.decode(tensor)
            np.testing.assert_allclose(ours, tensor_codec.decode(alone.outputs[key]), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(
                ours, expected_tf[key][start : start + n], rtol=case["rtol"], atol=case["atol"]
            )
        start += n
    (stats,) = [q.stats for q in batched.bundle.session.queues() if q.stats.tasks]
    assert stats.tasks == len(SPLIT) and stats.batches < len(SPLIT)  # batched, for real


def test_batched_classify_of_an_estimator_equals_unbatched_request_by_request(servables):
    manifest = corpus.load_manifest("est_dnn_classifier")
    case = next(c for c in manifest["cases"] if c["signature"] == "serving_default")
    examples = read(manifest["dir"] / case["inputs"]["inputs"])
    scores = read(manifest["dir"] / case["outputs"]["scores"])
    classes = read(manifest["dir"] / case["outputs"]["classes"])
    n = len(examples)
    batched, plain, _ = servables("est_dnn_classifier")

    def request(rows) -> classification_pb2.ClassificationRequest:
        r = classification_pb2.ClassificationRequest()
        r.model_spec.name = "est_dnn_classifier"
        for item in rows:
            r.input.example_list.examples.add().ParseFromString(item)
        return r

    index = np.arange(8) % n  # the case's examples, cycled to 8 rows
    requests = [request(examples[rows]) for rows in pieces(index)]
    got = concurrently(lambda r: run_classify(batched, r), requests)
    start = 0
    for r, response in zip(requests, got):
        assert response == run_classify(plain, r)  # every score, every label, the model_spec
        for i, classification in enumerate(response.result.classifications):
            row = index[start + i]
            np.testing.assert_allclose(
                [c.score for c in classification.classes], scores[row], rtol=case["rtol"], atol=case["atol"]
            )
            assert [c.label.encode() for c in classification.classes] == classes[row].tolist()
        start += len(r.input.example_list.examples)
    (stats,) = [q.stats for q in batched.bundle.session.queues() if q.stats.tasks]
    assert stats.batches < len(SPLIT)

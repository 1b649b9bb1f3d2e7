"""``saved_model_cli run`` as a process, compared with TF's own ``run`` (tf221's) on the same models.

Exact models (half_plus_two, string and integer signatures) compare TF's printed text line for
line; float models (a CNN, an Estimator over feature columns) compare the arrays ``--outdir``
saved, within the oracle's tolerance, and the printed keys. Inputs reach both CLIs the same way:
``.npy``/``.npz`` files, literals, tf.Example feature dicts. Numpy constructors in
``--input_exprs`` (which TF's literal_eval refuses) are compared with TF fed the same array from
a file.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from .saved_model_cli_support import model_dir, ours, tensorflow

EXAMPLES = (
    '[{"color": ["red"], "city": ["nice"], "tag": ["b"], "age": [33.0]}, {"color": ["green"], "age": [17.0]}]'
)
IRIS = '[{"sepal_length": [5.1], "sepal_width": [3.5], "petal_length": [1.4], "petal_width": [0.2]}]'


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("inputs")
    images = np.random.default_rng(3).normal(size=(2, 12, 12, 3)).astype(np.float32)
    np.savez(folder / "images.npz", image=images, other=np.zeros(3))
    np.save(folder / "ones.npy", np.ones((2, 12, 12, 3), np.float32))
    np.save(folder / "x.npy", np.array([[1.0], [-2.5]], np.float32))
    return folder


def _exact_cases(files) -> list[list[str]]:
    half = model_dir("example_half_plus_two")
    multi = model_dir("tf2_multi_signature")
    return [
        ["run", "--dir", half, "--tag_set", "serve", "--signature_def", "serving_default",
         "--input_exprs", "x=[[1.0], [2.0], [5.0]]"],
        ["run", "--dir", half, "--tag_set", "serve", "--signature_def", "serving_default",
         "--inputs", f"x={files / 'x.npy'}"],
        ["run", "--dir", half, "--tag_set", "serve", "--signature_def", "regress_x_to_y",
         "--input_examples", 'inputs=[{"x": [1.0]}, {"x": [3.0]}, {"x": [-7.5]}]'],
        ["run", "--dir", multi, "--tag_set", "serve", "--signature_def", "strings",
         "--input_exprs", "text=['hello world', '', 'a  b c'];keep=[True, False, True]"],
        ["run", "--dir", multi, "--tag_set", "serve", "--signature_def", "arithmetic",
         "--input_exprs", "a=[1, -20, 3];b=[1099511627776, 5, -1];c=[[1.5, 2.0], [-0.5, 4.0], [1e-3, 1e3]]"],
    ]  # fmt: skip


def _float_cases(files, outdir) -> list[tuple[str, list[str]]]:
    """(name, arguments without --outdir): compared through the arrays each CLI saves."""
    cnn = [
        "run",
        "--dir",
        model_dir("keras_cnn_bn"),
        "--tag_set",
        "serve",
        "--signature_def",
        "serving_default",
    ]
    wide = ["run", "--dir", model_dir("est_wide_deep"), "--tag_set", "serve"]
    iris = ["run", "--dir", model_dir("example_estimator_classifier"), "--tag_set", "serve"]
    return [
        ("cnn_npz", [*cnn, "--inputs", f"image={files / 'images.npz'}[image]"]),
        ("cnn_ones", [*cnn, "--inputs", f"image={files / 'ones.npy'}"]),
        ("wide_predict", [*wide, "--signature_def", "predict", "--input_examples", f"examples={EXAMPLES}"]),
        (
            "wide_classify",
            [*wide, "--signature_def", "classification", "--input_examples", f"inputs={EXAMPLES}"],
        ),
        ("iris", [*iris, "--signature_def", "serving_default", "--input_examples", f"inputs={IRIS}"]),
    ]


@pytest.fixture(scope="module")
def tf_runs(files, tmp_path_factory):
    outdir = tmp_path_factory.mktemp("tf_out")
    commands = _exact_cases(files)
    commands += [[*args, "--outdir", str(outdir / name)] for name, args in _float_cases(files, outdir)]
    cnn_again = [*_float_cases(files, outdir)[0][1], "--outdir", str(outdir / "again")]
    commands += [cnn_again, cnn_again]  # the same outdir twice, without --overwrite: TF refuses
    return tensorflow(commands), outdir, cnn_again


@pytest.mark.parametrize("index", range(5))
def test_run_prints_what_tensorflow_prints(files, tf_runs, index):
    args = _exact_cases(files)[index]
    want = tf_runs[0][tuple(args)]
    assert want["error"] is None, want["error"]
    got = ours(*args)
    assert got.returncode == 0, got.stderr
    assert got.stdout == want["stdout"]


@pytest.mark.parametrize("case", ["cnn_npz", "cnn_ones", "wide_predict", "wide_classify", "iris"])
def test_run_outputs_match_tensorflows_within_tolerance(files, tf_runs, tmp_path, case):
    answers, tf_out, _ = tf_runs
    (args,) = [a for name, a in _float_cases(files, tf_out) if name == case]
    want = answers[(*args, "--outdir", str(tf_out / case))]
    assert want["error"] is None, want["error"]
    got = ours(*args, "--outdir", tmp_path)
    assert got.returncode == 0, got.stderr
    keys = re.findall(r"^Result for output key (\S+):$", got.stdout, re.M)
    assert keys == re.findall(r"^Result for output key (\S+):$", want["stdout"], re.M) and keys
    for key in keys:
        mine, theirs = (
            np.load(tmp_path / f"{key}.npy", allow_pickle=True),
            np.load(tf_out / case / f"{key}.npy", allow_pickle=True),
        )
        assert mine.shape == theirs.shape and mine.dtype == theirs.dtype, key
        if theirs.dtype.kind == "f":
            np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-5, err_msg=key)
        else:
            np.testing.assert_array_equal(mine, theirs, err_msg=key)
        assert f"Output {key} is saved to {tmp_path / (key + '.npy')}" in got.stdout


def test_numpy_constructor_expression_equals_tensorflow_fed_from_a_file(files, tf_runs, tmp_path):
    answers, tf_out, _ = tf_runs
    got = ours(
        "run", "--dir", model_dir("keras_cnn_bn"), "--tag_set", "serve", "--signature_def", "serving_default",
        "--input_exprs", "image=np.ones((2, 12, 12, 3), dtype=np.float32)", "--outdir", tmp_path,
    )  # fmt: skip
    assert got.returncode == 0, got.stderr
    np.testing.assert_allclose(
        np.load(tmp_path / "output_0.npy"),
        np.load(tf_out / "cnn_ones" / "output_0.npy"),
        rtol=1e-5,
        atol=1e-5,
    )


def test_an_existing_output_needs_overwrite_as_in_tensorflow(files, tf_runs, tmp_path):
    answers, _, cnn_again = tf_runs
    want = answers[tuple(cnn_again)]["error"]
    assert want.startswith("RuntimeError: Output file ") and "already exists" in want
    args = [*cnn_again[:-1], str(tmp_path)]
    assert ours(*args).returncode == 0
    again = ours(*args)
    assert again.returncode == 1 and "Traceback" not in again.stderr
    assert again.stderr.strip() == "saved_model_cli: error: " + want.removeprefix("RuntimeError: ").replace(
        str(cnn_again[-1]), str(tmp_path)
    )
    assert ours(*args, "--overwrite").returncode == 0


def test_benchmark_reports_percentiles():
    got = ours(
        "run", "--dir", model_dir("keras_cnn_bn"), "--tag_set", "serve", "--signature_def", "serving_default",
        "--input_exprs", "image=np.zeros((1, 12, 12, 3))", "--benchmark", "25",
    )  # fmt: skip
    assert got.returncode == 0, got.stderr
    assert (
        "Benchmark: 25 runs of signature_def['serving_default'] (onnxruntime delegation on), in ms:"
        in got.stdout
    )
    numbers = dict(re.findall(r"(p50|p90|p99|min|max|mean) (\d+\.\d+)", got.stdout))
    assert set(numbers) == {"p50", "p90", "p99", "min", "max", "mean"}
    values = {k: float(v) for k, v in numbers.items()}
    assert 0 < values["min"] <= values["p50"] <= values["p90"] <= values["p99"] <= values["max"]

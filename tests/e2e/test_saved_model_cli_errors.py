"""Bad input to ``saved_model_cli``: one line on stderr, a non-zero exit, never a traceback.

Where TF's own ``saved_model_cli`` has a message for the same mistake (a missing directory, an
unknown tag-set or SignatureDef key, an input key the signature lacks, no inputs, an existing
output file), ours is TF's message. Refusals that keep untrusted text and files from running code
(``__import__`` in an expression, a pickle without ``--allow_pickle``) are checked not to run it.
"""

from __future__ import annotations

import functools
import os
import pathlib
import re

import numpy as np
import pytest

from .saved_model_cli_support import model_dir, one_line_error, ours, tensorflow


def _half() -> list[str]:
    return ["--dir", model_dir("example_half_plus_two"), "--tag_set", "serve"]


def _tf_cases() -> dict[str, list[str]]:
    half = _half()
    return {
        "missing dir": ["show", "--dir", "/nonexistent/model", "--tag_set", "serve"],
        "unknown tag set": ["show", "--dir", half[1], "--tag_set", "nope", "--signature_def", "x"],
        "unknown signature": ["show", *half, "--signature_def", "nope"],
        "run unknown signature": ["run", *half, "--signature_def", "nope", "--input_exprs", "x=[[1.0]]"],
        "unknown input key": [
            "run",
            *half,
            "--signature_def",
            "serving_default",
            "--input_exprs",
            "z=[[1.0]]",
        ],
        "no inputs": ["run", *half, "--signature_def", "serving_default"],
        "bad --inputs": ["run", *half, "--signature_def", "serving_default", "--inputs", "x"],
    }


@functools.cache
def _tf_errors() -> dict:
    answers = tensorflow(list(_tf_cases().values()))
    return {name: answers[tuple(args)]["error"] for name, args in _tf_cases().items()}


def _canonical(message: str) -> str:
    """The keys TF lists in a protobuf map's order (which changes per process), sorted."""
    match = re.match(r"(.*Please choose from:? )(.*?)((?:, or use --show option\.)?)$", message)
    if not match:
        return message
    keys = sorted(k.strip('"') for k in match.group(2).split(", "))
    return match.group(1) + ", ".join(keys) + match.group(3)


CASES = ["missing dir", "unknown tag set", "unknown signature", "run unknown signature", "unknown input key",
         "no inputs", "bad --inputs"]  # fmt: skip


@pytest.mark.parametrize("case", CASES)
def test_tensorflows_message_in_one_line(case):
    want = _tf_errors()[case]
    assert want is not None
    message = want.split(": ", 1)[1]
    assert _canonical(one_line_error(ours(*_tf_cases()[case]))) == _canonical(message)


@pytest.mark.parametrize(
    "flags,needle",
    [
        (["--input_exprs", "x=[[1.0],"], "invalid syntax"),
        (["--input_exprs", "x=np.ones((2, 1)"], "invalid syntax"),
        (["--input_exprs", "x"], '--input_exprs "x" format is incorrect'),
        (
            ["--input_exprs", "x=np.load('/etc/passwd')"],
            "np.load() is not one of the allowed numpy constructors",
        ),
        (["--input_exprs", "x=().__class__.__base__"], "attribute .__base__ is not allowed"),
        (["--input_exprs", "x=np.ones((100000, 100000))"], "would make 10000000000 elements"),
        (["--input_exprs", "x=[['a'], ['b']]"], "could not convert string to float: 'a'"),
        (
            ["--input_exprs", "x=[1.0, 2.0]"],
            "Cannot feed value of shape (2,) for Tensor x:0, which has shape (None, 1)",
        ),
        (["--input_exprs", "x=[[1.0]]", "--tf_debug"], "--tf_debug needs TensorFlow's debugger"),
        (["--input_exprs", "x=[[1.0]]", "--benchmark", "-3"], "cannot be negative"),
        (["--input_examples", "inputs={'x': [1.0]}"], "tf.Example input must be a list of dictionaries"),
        (["--input_examples", "inputs=[{'x': 1.0}]"], "feature value must be a non-empty list"),
    ],
    ids=repr,
)
def test_bad_run_input_is_one_line(flags, needle):
    signature = "regress_x_to_y" if "--input_examples" in flags else "serving_default"
    message = one_line_error(ours("run", *_half(), "--signature_def", signature, *flags))
    assert needle in message


def test_missing_required_flags_and_tensorflow_only_commands():
    assert "Flag --signature_def must have a value" in one_line_error(
        ours("run", *_half(), "--input_exprs", "x=1")
    )
    assert "Flag --dir must have a value" in one_line_error(ours("show"))
    assert "TensorFlow's saved_model_cli" in one_line_error(ours("convert", "--dir", "x", "tensorrt"))


def test_forbidden_expression_never_runs(tmp_path):
    marker = tmp_path / "ran"
    expression = f"x=__import__('os').system('touch {marker}')"
    message = one_line_error(
        ours("run", *_half(), "--signature_def", "serving_default", "--input_exprs", expression)
    )
    assert "is refused: calling __import__('os').system is not allowed" in message
    assert not marker.exists()


class _Touch:
    """Unpickling this creates a file: what a hostile .npy could do instead."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(self.path),))


@pytest.mark.parametrize("suffix", ["npy", "npz"])
def test_a_pickle_is_refused_without_allow_pickle_and_never_unpickled(tmp_path, suffix):
    marker = tmp_path / "unpickled"
    data = np.array([_Touch(str(marker))], dtype=object)
    path = tmp_path / f"evil.{suffix}"
    np.save(path, data) if suffix == "npy" else np.savez(path, x=data)
    message = one_line_error(
        ours("run", *_half(), "--signature_def", "serving_default", "--inputs", f"x={path}")
    )
    assert "pickled data" in message and "--allow_pickle" in message
    assert not marker.exists()


def test_allow_pickle_loads_an_object_array(tmp_path):
    path = tmp_path / "text.npy"
    np.save(path, np.array([b"hello world", b"a b"], dtype=object))
    args = ["run", "--dir", model_dir("tf2_multi_signature"), "--tag_set", "serve", "--signature_def", "strings",
            "--inputs", f"text={path}", "--input_exprs", "keep=[True, False]"]  # fmt: skip
    assert "pickled data" in one_line_error(ours(*args))
    result = ours(*args, "--allow_pickle")
    assert result.returncode == 0, result.stderr
    assert "Result for output key word_count:\n[2 2]" in result.stdout


def test_npz_without_a_variable_name_needs_a_single_array(tmp_path):
    path = tmp_path / "two.npz"
    np.savez(path, a=np.ones((1, 1), np.float32), b=np.ones((1, 1), np.float32))
    args = ["run", *_half(), "--signature_def", "serving_default"]
    assert "contains more than one ndarrays" in one_line_error(ours(*args, "--inputs", f"x={path}"))
    assert 'does not contain variable with name "c"' in one_line_error(
        ours(*args, "--inputs", f"x={path}[c]")
    )
    assert ours(*args, "--inputs", f"x={path}[b]").returncode == 0
    assert os.path.exists(path)

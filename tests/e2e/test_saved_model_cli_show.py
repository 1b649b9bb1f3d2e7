"""``saved_model_cli show`` as a process, compared line for line with TF's own (tf221's).

Every oracle model's ``show --all`` (the "Concrete Functions" block included; ``cli_functions``
has every kind of argument TF prints), and the narrower forms: tag-sets, SignatureDef keys, one
SignatureDef, ``--list_ops``, multi-tag sets. Lines TF prints in an order that changes from one
process to the next (Python sets, protobuf maps) are compared as sets (``normalize``).
"""

from __future__ import annotations

import functools

import pytest

from tests.oracle import catalog

from .saved_model_cli_support import model_dir, normalize, ours, tensorflow

MODELS = [e.name for e in catalog.discover()]
NARROW = {
    "example_half_plus_two": [
        [],
        ["--tag_set", "serve"],
        ["--tag_set", "serve", "--signature_def", "regress_x_to_y"],
        ["--tag_set", "serve", "--signature_def", "serving_default", "--list_ops"],
        ["--list_ops"],
    ],
    "tf1_multi_metagraph": [
        [],
        ["--tag_set", "serve,gpu"],
        ["--tag_set", "train"],
        ["--tag_set", " gpu , serve", "--signature_def", "serving_default"],
    ],
    "loader_all_dtypes": [["--tag_set", "serve", "--signature_def", "serving_default"]],
    "keras_cnn_bn": [["--tag_set", "serve", "--signature_def", "serving_default"]],
}


@functools.cache
def _tf_outputs() -> dict:
    commands = [["show", "--dir", model_dir(name), "--all"] for name in MODELS]
    commands += [
        ["show", "--dir", model_dir(name), *flags] for name, forms in NARROW.items() for flags in forms
    ]
    return tensorflow(commands)


def _compare(args: list[str]) -> None:
    want = _tf_outputs()[tuple(args)]
    assert want["error"] is None, want["error"]
    got = ours(*args)
    assert got.returncode == 0, got.stderr
    assert normalize(got.stdout) == normalize(want["stdout"])


@pytest.mark.parametrize("name", MODELS)
def test_show_all_is_tensorflows(name):
    _compare(["show", "--dir", model_dir(name), "--all"])


@pytest.mark.parametrize(
    "name,flags", [(name, flags) for name, forms in NARROW.items() for flags in forms], ids=repr
)
def test_show_forms_are_tensorflows(name, flags):
    _compare(["show", "--dir", model_dir(name), *flags])


def test_concrete_functions_block_lists_every_argument_kind():
    """The block is really compared above: cli_functions has options, bools, None, dicts, lists."""
    text = ours("show", "--dir", model_dir("cli_functions"), "--all").stdout
    block = text[text.index("Concrete Functions:") :]
    for needle in (
        "Function Name: 'bare'",
        "Option #3",
        "DType: bool",
        "DType: NoneType",
        "DType: dict",
        "DType: list",
    ):
        assert needle in block


def test_module_entry_point_and_version():
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "serving.saved_model_cli", "show", "--dir", model_dir("tf2_half_plus_two")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0 and "'serve'" in result.stdout
    assert ours("--version").stdout.strip() == "0.1.0"  # TF's saved_model_cli prints the same


def test_the_cli_imports_no_grpc_and_no_server():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from serving.saved_model_cli import main\n"
        f"assert main(['scan', '--dir', {model_dir('keras_cnn_bn')!r}]) == 0\n"
        "bad = [m for m in sys.modules if m.split('.')[0] == 'grpc' or m in ('serving.server', 'serving.lifecycle.manager')]\n"
        "assert not bad, bad\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr

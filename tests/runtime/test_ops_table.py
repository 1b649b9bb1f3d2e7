"""OPS.md is current: regenerated in memory from the registries and the oracle corpus, it must equal
the committed file (``python -m runtime.ops_table`` rewrites it)."""

from __future__ import annotations

import subprocess
import sys

from runtime import kernels, ops_table

HINT = "OPS.md is stale: run `python -m runtime.ops_table` (after `python -m tests.oracle build`)"


def test_ops_md_is_current():
    assert ops_table.OPS_MD.is_file(), HINT
    assert ops_table.OPS_MD.read_text() == ops_table.generate(), HINT


def test_the_seen_table_is_part_of_the_repository():
    """``make test`` on a fresh clone: the generator reads nothing outside the repository."""
    assert ops_table.DEFAULT_SEEN.is_file()
    assert ops_table.DEFAULT_SEEN.is_relative_to(ops_table.REPO_ROOT)
    assert ops_table.seen_ops(ops_table.DEFAULT_SEEN)["Placeholder"] > 0


def test_every_kernel_has_a_row_and_refused_ops_have_no_kernel():
    """Kernels a test registers (``_TestSleep``) or delegation's ``_OrtCluster`` are not TF ops."""
    rows = {
        line.split("|")[1].strip(): line
        for line in ops_table.OPS_MD.read_text().splitlines()
        if line.startswith("| ")
    }
    assert ops_table.kernel_ops() <= set(rows)
    shipped = {op for op, k in kernels.load_all().items() if k.fn.__module__.startswith("runtime.kernels.")}
    assert ops_table.kernel_ops() == shipped - {"PyFunc", "PyFuncStateless", "EagerPyFunc"}
    for op in ("PyFunc", "EagerPyFunc"):
        assert rows[op].split("|")[2].strip() == "no"


def test_render_counts_seen_ops_against_kernels():
    text = ops_table.render({"A", "B"}, {"A"}, {"A"}, {"A": 3, "B": 0, "C": 2, "D": 0}, {"A": "differs"})
    assert "with a numpy kernel: 1 of 2." in text
    assert "still missing (1): C (2)." in text
    assert "and missing: D." in text
    assert "- **A**: differs" in text
    assert "| A | yes | yes | yes | 3 |" in text and "| B | yes | no | no | 0 |" in text


def test_importing_the_generator_leaves_onnxruntime_unloaded():
    code = "import sys, runtime.ops_table\nassert 'onnxruntime' not in sys.modules\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr

"""Corrupted SavedModels fail with a loader error, quickly, and never crash or hang the process.

Seeded mutations (truncations, bit flips, swapped blocks) of ``saved_model.pb``, ``variables.index``
and every data shard of several oracle models. Each case loads every MetaGraphDef the manifest lists
and reads every checkpoint tensor, in-process, and must finish within a second:

- a mutated ``variables.index`` or data shard must raise an ``OpError`` (checksums cover every byte
  TensorFlow writes there);
- a truncated ``saved_model.pb`` must raise an ``OpError``;
- a bit flip or block swap in ``saved_model.pb`` must raise an ``OpError`` or load cleanly: the
  SavedModel proto carries no checksum, so a flip inside a constant or a doc string is a valid,
  different model. Nothing else (no ``KeyError``, ``struct.error``, ``DecodeError``...) may escape.
"""

from __future__ import annotations

import random
import shutil
import time
from pathlib import Path

from loader import load_saved_model, read_saved_model, select_meta_graph
from loader.bundle import _import
from runtime import errors
from runtime.checkpoint.reader import load_checkpoint
from runtime.graph.graph import Graph
from tests.loader.corpus import manifest

MODELS = (
    "loader_all_dtypes",
    "loader_partitioned_sharded",
    "loader_tf2_module",
    "loader_legacy_init_op_assets",
)
SEED = 20261121
TIME_LIMIT_S = 1.0


def _load_everything(export_dir: Path, tag_sets: list[list[str]]) -> None:
    saved_model = read_saved_model(str(export_dir))
    for tags in tag_sets:
        meta_graph = select_meta_graph(saved_model, tags, str(export_dir))
        _import(Graph(), meta_graph, str(export_dir), tags)
    prefix = export_dir / "variables" / "variables"
    if prefix.with_suffix(".index").exists():
        reader = load_checkpoint(str(prefix))
        for name in reader.get_variable_to_shape_map():
            reader.get_tensor(name)
    # Last, the whole path: restore through RestoreV2 in the Session, init op. (Corrupt variables
    # reaching RestoreV2 are covered by test_load.py::test_corrupt_shard_fails_the_restore_op.)
    for tags in tag_sets:
        load_saved_model(str(export_dir), tags, delegation=False).close()


def _mutations(data: bytes, rnd: random.Random, counts=(12, 40, 12)):
    n = len(data)
    for _ in range(counts[0]):
        yield "truncate", data[: rnd.randrange(0, n)]
    for _ in range(counts[1]):
        i = rnd.randrange(n)
        yield "bitflip", data[:i] + bytes([data[i] ^ (1 << rnd.randrange(8))]) + data[i + 1 :]
    for _ in range(counts[2]):
        size = rnd.choice((4, 16, 64))
        if n < 2 * size:
            continue
        a, b = sorted(rnd.sample(range(0, n - size), 2))
        if b - a < size:
            continue
        out = bytearray(data)
        out[a : a + size], out[b : b + size] = data[b : b + size], data[a : a + size]
        yield "swap", bytes(out)


def _cases(tmp_path: Path):
    rnd = random.Random(SEED)
    for name in MODELS:
        m = manifest(name)
        source = m["export_path"]
        targets = [p for p in sorted(source.rglob("*")) if p.is_file() and p.name != "fingerprint.pb"]
        targets = [p for p in targets if p.name.startswith(("saved_model.pb", "variables."))]
        for target in targets:
            original = target.read_bytes()
            for kind, mutated in _mutations(original, rnd):
                if mutated == original:
                    continue
                yield name, m["meta_graphs"], source, target.relative_to(source), kind, mutated


def test_corrupted_models_fail_cleanly_and_quickly(tmp_path):
    outcomes = {"raised": 0, "loaded": 0}
    slowest = 0.0
    count = 0
    for index, (name, tag_sets, source, relative, kind, mutated) in enumerate(_cases(tmp_path)):
        export_dir = tmp_path / f"case{index}"
        shutil.copytree(source, export_dir)
        (export_dir / relative).write_bytes(mutated)
        must_raise = relative.name != "saved_model.pb" or kind == "truncate"
        label = f"{name}: {kind} of {relative} (case {index})"
        start = time.monotonic()
        try:
            _load_everything(export_dir, tag_sets)
        except errors.OpError as e:
            outcomes["raised"] += 1
            if relative.parts[0] == "variables":
                assert str(relative.name) in str(e) or "variables" in str(e), (label, str(e))
        except Exception as e:  # noqa: BLE001 - the point of the test
            raise AssertionError(f"{label}: {type(e).__name__} escaped: {e}") from e
        else:
            outcomes["loaded"] += 1
            assert not must_raise, f"{label}: loaded without an error"
        elapsed = time.monotonic() - start
        slowest = max(slowest, elapsed)
        assert elapsed < TIME_LIMIT_S, f"{label}: took {elapsed:.2f}s"
        shutil.rmtree(export_dir)
        count += 1
    assert count >= 300, count
    print(f"\n{count} corruption cases, {outcomes}, slowest {slowest * 1000:.1f} ms")

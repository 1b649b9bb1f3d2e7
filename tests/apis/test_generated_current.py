"""The committed generated modules are exactly what `python -m apis.generate` produces."""

from __future__ import annotations

import difflib
import importlib
import subprocess
import sys

from apis import generate


def test_generated_modules_are_current():
    fresh = generate.render()
    committed = generate.committed()
    missing = sorted(fresh.keys() - committed.keys())
    stale = sorted(committed.keys() - fresh.keys())
    changed = sorted(rel for rel in fresh.keys() & committed.keys() if fresh[rel] != committed[rel])
    report = [f"missing: {rel}" for rel in missing] + [f"not generated: {rel}" for rel in stale]
    for rel in changed[:3]:
        diff = difflib.unified_diff(
            committed[rel].decode(errors="replace").splitlines(),
            fresh[rel].decode(errors="replace").splitlines(),
            f"committed/{rel}",
            f"generated/{rel}",
            lineterm="",
            n=1,
        )
        report += list(diff)[:20]
    report += [f"changed: {rel}" for rel in changed[3:]]
    assert not report, "run `python -m apis.generate` and commit the result:\n" + "\n".join(report)


def test_every_proto_has_its_modules():
    fresh = generate.render()
    for proto in generate.proto_files():
        stem = proto.relative_to(generate.REPO_ROOT).with_suffix("").as_posix()
        assert f"{stem}_pb2.py" in fresh and f"{stem}_pb2.pyi" in fresh
        module = importlib.import_module(stem.replace("/", ".") + "_pb2")
        has_services = bool(module.DESCRIPTOR.services_by_name)
        assert (f"{stem}_pb2_grpc.py" in fresh) == has_services, proto


def test_importing_apis_pulls_in_nothing():
    code = "import apis, sys; print(sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'grpc', 'google')))"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=generate.REPO_ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"

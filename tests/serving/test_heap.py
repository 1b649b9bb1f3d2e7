"""glibc's arenas capped at start (``serving.resources.heap.limit_arenas``, called first by ``cli.main``):
counted with ``malloc_info`` in a fresh process whose 16 threads each allocate. Without the cap
glibc gives each thread an arena of its own (up to 8 per core), and a swapped version's arrays
freed on another thread than made them left those heaps fragmented (benchmarks/version_swaps.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from serving.resources import heap

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    heap._libc() is None or not hasattr(heap._libc(), "malloc_info"), reason="needs glibc"
)

COUNT_ARENAS = """
import ctypes, sys, tempfile, threading
{setup}
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
held, go = [], threading.Barrier(16)
def allocate():
    go.wait()
    held.append(libc.malloc(64 << 10))
threads = [threading.Thread(target=allocate) for _ in range(16)]
for t in threads: t.start()
for t in threads: t.join()
libc.fopen.restype, libc.fopen.argtypes = ctypes.c_void_p, [ctypes.c_char_p, ctypes.c_char_p]
libc.malloc_info.argtypes, libc.fclose.argtypes = [ctypes.c_int, ctypes.c_void_p], [ctypes.c_void_p]
path = tempfile.mktemp()
f = libc.fopen(path.encode(), b"w")
libc.malloc_info(0, f)
libc.fclose(f)
print(open(path).read().count("<heap nr="))
"""


def arenas(setup: str, env: dict | None = None) -> int:
    environ = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"} | (env or {})
    out = subprocess.run(
        [sys.executable, "-c", COUNT_ARENAS.format(setup=setup)],
        cwd=REPO,
        env=environ | {"PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return int(out.stdout.split()[-1])


def test_without_the_cap_each_thread_gets_an_arena():
    assert arenas("") > heap.ARENAS  # (what the test below would count without the cap)


def test_model_server_caps_arenas_before_its_threads_start():
    setup = "from serving import cli\nassert cli.main(['--version']) == 0"
    assert arenas(setup) <= heap.ARENAS


def test_limit_arenas_caps_and_the_operators_setting_wins():
    assert arenas("from serving.resources import heap\nassert heap.limit_arenas()") <= heap.ARENAS
    assert heap.limit_arenas({"MALLOC_ARENA_MAX": "8"}) is False
    assert arenas("", {"MALLOC_ARENA_MAX": "8"}) > heap.ARENAS  # glibc reads it itself

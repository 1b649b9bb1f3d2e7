"""savedmodel_client from the checkout's client/ when it is not installed into this venv."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

if importlib.util.find_spec("savedmodel_client") is None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "client"))

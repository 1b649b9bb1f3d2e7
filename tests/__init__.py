"""Test suite of savedmodel-server (a package so that ``python -m tests.oracle`` works)."""

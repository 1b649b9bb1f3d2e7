"""Tests of the apis/ package: generated code is current and wire-identical to TF."""

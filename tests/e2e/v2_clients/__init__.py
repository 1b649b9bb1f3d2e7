"""Scripts run in the v2clients venv (tritonclient, kserve), never imported by the tests."""

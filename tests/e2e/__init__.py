"""End-to-end tests: model_server as a real process (see conftest.py for the fixtures)."""

# Developer entry points. `make serve` and `make test` work on a fresh machine with python3 >= 3.10.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PORT ?= 8500

.PHONY: install tools serve test oracle lint protos

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

install: $(BIN)/python
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]' -e ./client

# System tools the tests need: Graphviz's `dot` (saved_model_cli show --graph draws SVG with it).
# Installed with apt-get where it is missing (as root, e.g. in CI); elsewhere install it yourself.
tools:
	@command -v dot >/dev/null 2>&1 || { \
	  echo "installing graphviz (dot) with apt-get"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq graphviz >/dev/null; \
	}

# Serve the bundled TF Serving example (gRPC on $(PORT)).
serve: install
	$(BIN)/model_server --port=$(PORT) --model_name=half_plus_two --model_base_path=$(CURDIR)/models/half_plus_two

# The whole test suite: install, build the TensorFlow oracle corpus (cached in .oracle/), run every test.
# The tests in-process run on every core (pytest-xdist); those that start servers, containers and
# CLI processes run one at a time after them (they measure load and memory of their own).
test: install tools
	$(BIN)/python -m tests.oracle build
	$(BIN)/python -m pytest -q -n auto --ignore=tests/e2e --ignore=tests/deploy
	$(BIN)/python -m pytest -q tests/e2e tests/deploy

oracle: install
	$(BIN)/python -m tests.oracle build

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

protos: install
	$(BIN)/python -m apis.generate

# The README's two commands: `make demo` and `make test`.
# Both create .venv and install everything on a fresh machine (Python 3.11+,
# Java 17+ and Maven for the Kafka jars; see README "Requirements").

VENV   ?= .venv
PYTHON ?= python3
BIN     = $(VENV)/bin

.PHONY: install demo test lint unit integration clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

install: $(BIN)/.installed

# `make demo KEEP=1` keeps the demo's Kafka, Postgres and data and prints the dashboard command.
demo: install
	$(BIN)/judgeflow demo $(if $(KEEP),--keep)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

unit: install
	$(BIN)/pytest -m "not integration" -q

integration: install
	$(BIN)/pytest -m integration -q

test: lint
	$(BIN)/pytest -q -rs --durations=10

clean:
	rm -rf $(VENV) .judgeflow .pytest_cache .mypy_cache .ruff_cache .hypothesis

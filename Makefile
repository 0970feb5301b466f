# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export SPARK_LOCAL_IP := 127.0.0.1
export PYTHONDONTWRITEBYTECODE :=

.PHONY: install demo test lint bench-io bench-nexmark bench-recovery bench-causal lock clean

$(STAMP): pyproject.toml requirements.lock
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/python -m pip install -q uv==0.13.8
	$(BIN)/uv pip install --python $(BIN)/python --compile-bytecode -r requirements.lock
	$(BIN)/uv pip install --python $(BIN)/python --compile-bytecode --no-deps -e .
	@touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/recovery demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check recovery_lib jobs tests dags dashboard

bench-io: $(STAMP)
	$(BIN)/recovery bench io

bench-nexmark: $(STAMP)
	$(BIN)/recovery bench nexmark --query q1 --query q3 --query q8 --query q12

bench-recovery: $(STAMP)
	$(BIN)/recovery bench recovery --out docs/benchmarks/bench_recovery

bench-causal: $(STAMP)
	$(BIN)/recovery bench causal --out docs/benchmarks/bench_causal

lock:
	$(BIN)/uv pip compile pyproject.toml --extra dev --python-version 3.11 -o requirements.lock

clean:
	rm -rf .recovery reports .pytest_cache

# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
KAFKA_LIBS := $(VENV)/share/kafka/libs
SPARK_KAFKA_LIBS := $(VENV)/share/spark-kafka
# The connector's jars pyspark does not ship (recovery_lib/spark/kafka_connector_pom.xml).
SPARK_KAFKA_JARS := spark-sql-kafka-0-10_2.13,spark-token-provider-kafka-0-10_2.13,kafka-clients,commons-pool2
export SPARK_LOCAL_IP := 127.0.0.1
export PYTHONDONTWRITEBYTECODE :=

.PHONY: install demo ops ops-down test test-all test-flaky browser dashboard dashboard-screenshots lint docs-api bench-io bench-realtime bench-nexmark bench-recovery bench-causal bench-campaign bench-release-campaign bench-sinks bench-cec bench-protocols bench-replication lock clean

$(STAMP): pyproject.toml requirements.lock recovery_lib/spark/worker_bytecode.py recovery_lib/kafka/_block_consumer.c recovery_lib/kafka/pom.xml recovery_lib/spark/kafka_connector_pom.xml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/python -m pip install -q uv==0.13.8
	$(BIN)/uv pip install --python $(BIN)/python --compile-bytecode -r requirements.lock
	$(BIN)/uv pip install --python $(BIN)/python --compile-bytecode --no-deps -e .
	$(BIN)/recovery spark archive || echo "no class-data archive: jobs start without it"
	$(BIN)/recovery spark worker-bytecode
	@# Apache Kafka's jars from Maven Central, checksums verified (-C).
	rm -rf $(KAFKA_LIBS)
	@if command -v mvn >/dev/null 2>&1; then \
		mvn -q -B -C -Dstyle.color=never -f recovery_lib/kafka/pom.xml dependency:copy-dependencies \
			-DincludeScope=runtime -DoutputDirectory="$(abspath $(KAFKA_LIBS))"; \
	else echo "warning: no mvn: Apache Kafka is not installed (RECOVERY_BROKER_KIND=tansu works)"; fi
	@# Spark's Kafka connector (format("kafka")) and the jars it needs beyond pyspark's.
	rm -rf $(SPARK_KAFKA_LIBS)
	@if command -v mvn >/dev/null 2>&1; then \
		mvn -q -B -C -Dstyle.color=never -f recovery_lib/spark/kafka_connector_pom.xml \
			dependency:copy-dependencies -DincludeScope=runtime \
			-DincludeArtifactIds=$(SPARK_KAFKA_JARS) -DoutputDirectory="$(abspath $(SPARK_KAFKA_LIBS))"; \
	else echo "warning: no mvn: Spark's Kafka connector is not installed"; fi
	@touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/recovery demo

# Broker, Airflow (api-server, scheduler, dag-processor, triggerer) and the dashboard, detached.
ops: $(STAMP)
	$(BIN)/recovery ops up

ops-down: $(STAMP)
	$(BIN)/recovery ops down

dashboard: $(STAMP)
	$(BIN)/streamlit run dashboard/app.py --server.address 127.0.0.1 --server.headless true

# The dashboard's screenshots in docs/dashboard/, taken by its Chromium test.
dashboard-screenshots: $(STAMP) browser
	RECOVERY_SCREENSHOTS_DIR=docs/dashboard $(BIN)/python -m pytest -q tests/test_dashboard.py -k chromium

# The dashboard's browser test drives Debian's chromium (not on a fresh machine).
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
browser:
	@command -v chromium >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# CI's tier (under 30 min here): unit, property and Spark tests, and one real-kill end-to-end
# test per mechanism. test-all adds campaigns, cluster runs, repeated kills and duplicated
# coverage (marker `long`): run it before resolving an issue that touches a mechanism.
test: $(STAMP) browser
	$(BIN)/python -m pytest -q -m "not long" --durations=15

test-all: $(STAMP) browser
	$(BIN)/python -m pytest -q --durations=15

# Flakiness check: every unit test FLAKY_COUNT times, in random order; lists (and writes to
# reports/flaky.json) each test that failed at least once.
FLAKY_COUNT ?= 20
test-flaky: $(STAMP)
	$(BIN)/python -m pytest -q tests/unit -p tests.flaky -p randomly --count $(FLAKY_COUNT) \
		-p no:cacheprovider

lint: $(STAMP)
	$(BIN)/ruff check recovery_lib jobs tests dags dashboard

# The public API's reference, docs/api/ (pdoc; a warning fails it). tests/unit/test_api_docs.py
# fails when the checked-in pages are not what the docstrings give.
docs-api: $(STAMP)
	$(BIN)/python docs/api_reference.py docs/api

bench-io: $(STAMP)
	$(BIN)/recovery bench io

bench-realtime: $(STAMP)
	$(BIN)/recovery bench realtime --out docs/benchmarks/bench_realtime

bench-nexmark: $(STAMP)
	$(BIN)/recovery bench nexmark --query q1 --query q3 --query q8 --query q12

bench-recovery: $(STAMP)
	$(BIN)/recovery bench recovery --mst-step 1.5 --mst-duration 30 --out docs/benchmarks/bench_recovery

bench-campaign: $(STAMP)
	$(BIN)/recovery bench campaign --suite causal --out docs/benchmarks/causal_campaign

bench-release-campaign: $(STAMP)
	$(BIN)/recovery bench campaign --suite release --out docs/benchmarks/release_campaign

bench-sinks: $(STAMP)
	$(BIN)/recovery bench sinks --out docs/benchmarks/bench_sinks

bench-cec: $(STAMP)
	$(BIN)/recovery bench cec --out docs/benchmarks/bench_cec

bench-protocols: $(STAMP)
	$(BIN)/recovery bench protocols --suite uniform --suite recovery --suite cyclic --suite skew --out docs/benchmarks/bench_protocols

bench-replication: $(STAMP)
	$(BIN)/recovery bench replication --out docs/benchmarks/bench_replication

bench-causal: $(STAMP)
	$(BIN)/recovery bench causal --out docs/benchmarks/bench_causal

lock:
	$(BIN)/uv pip compile pyproject.toml --extra dev --python-version 3.11 -o requirements.lock

clean:
	rm -rf .recovery reports .pytest_cache

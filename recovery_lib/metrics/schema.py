"""The metrics store's schema: the contract the dashboard, the DAGs and the benchmarks read.

Times are epoch milliseconds (BIGINT) unless a name says otherwise.

runs            one row per job run: query, mode ('native', later 'causal', 'standby', ...),
                config (JSON), started_ms, stopped_ms, status ('running'|'finished'|'failed')
micro_batches   one row per streaming progress event: batch id, input rows and rates,
                duration parts (ms), state rows and memory, dead letters seen in the batch,
                the state stores' commit time (ms), their custom metrics summed over the
                stateful operators (JSON: RocksDB's load and changelog-replay latency, SST
                size, ...; the HDFS-backed store's cache hits and size)
latency_samples one row per sampled output record: visible_ms (record's time at the sink)
                minus ingest_ms (ingest time of the newest input it depends on)
throughput      per run and second: input events and output records
events          what happened to a run: start, stop, failure_injected, failure_detected,
                restart, ready, ... with a JSON detail
consistency_reports  the oracle's verdict on a run against its reference run: lost,
                duplicated, divergent and unexpected outputs, the full report as JSON
job_status      what the job supervisor daemon saw, one row per check of a long-running job:
                status ('starting'|'running'|'restarting'|'failed'|'stopped'), pids, restarts,
                last heartbeat, last committed batch, standby lag (batches, bytes) when shipped
gc_runs         one row per checkpoint-GC pass: job, dry run or not, what it kept (recovery
                line, oldest kept batch), files and bytes removed, determinant low-water mark
expectation_results  one row per Great Expectations suite run: suite, target (topic or
                table), success, evaluated / failed expectations, failures as JSON
standby_shipments    one row per state-shipping round (DAG, CLI): job, copy number, batch,
                bytes of the copy and bytes new in it, lag behind the primary after the round
"""

from __future__ import annotations

SCHEMA_VERSION = 6

DDL = [
    """CREATE TABLE IF NOT EXISTS runs (
        run_id VARCHAR PRIMARY KEY,
        query VARCHAR NOT NULL,
        mode VARCHAR NOT NULL,
        config JSON,
        started_ms BIGINT NOT NULL,
        stopped_ms BIGINT,
        status VARCHAR NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS micro_batches (
        run_id VARCHAR NOT NULL,
        query_name VARCHAR,
        batch_id BIGINT NOT NULL,
        ts_ms BIGINT NOT NULL,
        input_rows BIGINT,
        input_rows_per_s DOUBLE,
        processed_rows_per_s DOUBLE,
        trigger_ms BIGINT,
        add_batch_ms BIGINT,
        latest_offset_ms BIGINT,
        planning_ms BIGINT,
        wal_commit_ms BIGINT,
        commit_offsets_ms BIGINT,
        state_rows BIGINT,
        state_memory_bytes BIGINT,
        dead_letters BIGINT
    )""",
    """CREATE TABLE IF NOT EXISTS latency_samples (
        run_id VARCHAR NOT NULL,
        visible_ms BIGINT NOT NULL,
        ingest_ms BIGINT NOT NULL,
        latency_ms BIGINT NOT NULL,
        output_id VARCHAR
    )""",
    """CREATE TABLE IF NOT EXISTS throughput (
        run_id VARCHAR NOT NULL,
        second BIGINT NOT NULL,
        input_events BIGINT NOT NULL,
        output_records BIGINT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS events (
        run_id VARCHAR NOT NULL,
        ts_ms BIGINT NOT NULL,
        kind VARCHAR NOT NULL,
        detail JSON
    )""",
    """CREATE TABLE IF NOT EXISTS consistency_reports (
        run_id VARCHAR NOT NULL,
        reference_run_id VARCHAR,
        query VARCHAR NOT NULL,
        ts_ms BIGINT NOT NULL,
        verdict VARCHAR NOT NULL,
        outputs BIGINT,
        reference_outputs BIGINT,
        lost BIGINT,
        duplicated BIGINT,
        divergent BIGINT,
        unexpected BIGINT,
        report JSON
    )""",
    """CREATE TABLE IF NOT EXISTS job_status (
        job VARCHAR NOT NULL,
        ts_ms BIGINT NOT NULL,
        status VARCHAR NOT NULL,
        run_id VARCHAR,
        supervisor_pid BIGINT,
        job_pid BIGINT,
        restarts INTEGER,
        heartbeat_ms BIGINT,
        committed_batch BIGINT,
        standby_lag_batches BIGINT,
        standby_lag_bytes BIGINT,
        message VARCHAR
    )""",
    """CREATE TABLE IF NOT EXISTS gc_runs (
        job VARCHAR NOT NULL,
        ts_ms BIGINT NOT NULL,
        dry_run BOOLEAN NOT NULL,
        recovery_line BIGINT,
        oldest_kept_batch BIGINT,
        files_removed BIGINT,
        bytes_freed BIGINT,
        determinant_low_water BIGINT,
        detail JSON
    )""",
    """CREATE TABLE IF NOT EXISTS expectation_results (
        run_id VARCHAR,
        suite VARCHAR NOT NULL,
        target VARCHAR NOT NULL,
        ts_ms BIGINT NOT NULL,
        success BOOLEAN NOT NULL,
        evaluated INTEGER,
        failed INTEGER,
        failures JSON
    )""",
    """CREATE TABLE IF NOT EXISTS standby_shipments (
        job VARCHAR NOT NULL,
        ts_ms BIGINT NOT NULL,
        copy_seq BIGINT,
        batch BIGINT,
        bytes_total BIGINT,
        bytes_copied BIGINT,
        lag_batches BIGINT,
        lag_bytes BIGINT,
        detail JSON
    )""",
    """CREATE TABLE IF NOT EXISTS schema_info (version INTEGER)""",
    # v5: the state stores' commit time per batch (a stage's snapshot in checkpoint protocols)
    """ALTER TABLE micro_batches ADD COLUMN IF NOT EXISTS state_commit_ms BIGINT""",
    # v6: the state stores' own metrics (a restart's state load time is among them)
    """ALTER TABLE micro_batches ADD COLUMN IF NOT EXISTS state_custom JSON""",
]

TABLES = (
    "runs",
    "micro_batches",
    "latency_samples",
    "throughput",
    "events",
    "consistency_reports",
    "job_status",
    "gc_runs",
    "expectation_results",
    "standby_shipments",
)

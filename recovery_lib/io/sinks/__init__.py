"""Sinks whose output carries deterministic ids: the Kafka sink (modes at_least_once, dedup,
transactional) and idempotent table sinks (DuckDB, Parquet) keyed by (batch id, partition)."""

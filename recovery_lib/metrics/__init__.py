"""The metrics store: one DuckDB file, one schema (schema.py), one writer module (store.py)."""

"""NexMark: a deterministic event generator (persons, auctions, bids), the queries' shared
parsing, and reference results computed in DuckDB."""

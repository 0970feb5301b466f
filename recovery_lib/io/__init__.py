"""The way in and out of Spark: a Kafka streaming source with pluggable batch cuts, and sinks
whose records carry deterministic ids."""

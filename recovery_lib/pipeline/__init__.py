"""Pipelines of stages: several Spark queries chained by Kafka topics, each stage a job of the
public job API in its own process, checkpointed by one of recovery_lib/protocols (COOR, UNC,
CIC). ``spec`` reads the pipelines file, ``runner`` runs and recovers a pipeline."""

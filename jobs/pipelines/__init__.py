"""Stages of pipelines (recovery_lib/pipeline): ordinary jobs of the public job API, chained
by Kafka topics in dags/pipelines.yaml."""

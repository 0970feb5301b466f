"""Kafka plumbing: the embedded broker, client configuration, topic administration."""

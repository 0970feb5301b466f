"""Faults beyond a killed process: a fault proxy between Kafka clients and the broker
(proxy.py), and a private broker behind it that can also be paused (network.py)."""

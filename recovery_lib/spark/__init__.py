"""Spark set-up: sessions bound to loopback with our data sources registered."""

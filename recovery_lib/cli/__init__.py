"""The ``recovery`` command line."""

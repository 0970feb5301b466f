"""Spark streaming job entry points: each module builds its query from library pieces and has a
``main()`` that works under spark-submit."""

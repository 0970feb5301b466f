"""Operations layer: the configured long-running jobs (config.py), their supervisor daemon
(daemon.py), checkpoint garbage collection (gc.py) and consistency reports (reports.py). The
Airflow DAGs in dags/ and the ``recovery job|gc|report`` commands are thin callers."""

"""``chaos``: one fault at random against a running soak (``recovery soak``), on a schedule.

The soak starts its job on a broker behind a fault proxy and serves a control endpoint on
127.0.0.1 (recovery_lib/ops/chaos.py); every run of this DAG picks a kind (network reset,
blackhole, added latency, broker pause, unwritable checkpoint, driver kill; seeded by the run's
logical date) and asks the soak to inject it. Without a soak running the run is skipped. The
DAG starts paused: the soak unpauses it, and pauses it again when it ends.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, Param, task

from recovery_lib.settings import get_settings

with DAG(
    dag_id="chaos",
    description="A random fault against the running soak (network, broker, disk, driver)",
    schedule=timedelta(minutes=get_settings().chaos_every_min),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    is_paused_upon_creation=True,
    params={"kind": Param("random", type="string", description="A chaos kind, or random")},
    tags=["chaos", "soak"],
    doc_md=__doc__,
) as dag:

    @task
    def inject(params: dict | None = None, logical_date=None) -> dict:  # noqa: ANN001
        import json
        import logging
        import random

        import httpx
        from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

        from recovery_lib.ops.chaos import control_file

        path = control_file()
        if not path.exists():
            raise AirflowSkipException(f"no soak is running here ({path} is missing)")
        control = json.loads(path.read_text())
        kind = (params or {}).get("kind", "random")
        if kind == "random":
            seed = int(logical_date.timestamp()) if logical_date is not None else None
            kind = random.Random(seed).choice(control["kinds"])
        answer = httpx.post(f"{control['url']}/fault", json={"kind": kind}, timeout=30)
        if answer.status_code != 200:
            raise AirflowFailException(f"the soak refused {kind}: {answer.text}")
        event = answer.json()
        logging.getLogger("chaos").info(
            "chaos: %s %s %s", kind, "fired" if event["fired"] else "skipped", event["detail"]
        )
        return event

    inject()

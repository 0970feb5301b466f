"""CEC end to end: a Spark job whose aggregate keeps its windows only as footprints in its
output log, killed for real (a torn footprint then SIGKILL, a SIGKILL between the log's
records), recovered by the backward scan and the replay from T, and judged by the oracle
against the same aggregate computed on Spark's state store (an independent implementation)."""

from __future__ import annotations

from collections import Counter

import pytest

from recovery_lib.cec.aggregate import replay_floor
from recovery_lib.cec.log import OutputLog
from recovery_lib.cec.records import KIND_HEADER
from recovery_lib.cec.spark import recoveries_logged
from recovery_lib.experiment.runner import Experiment, ExperimentConfig
from recovery_lib.io.sinks.dedup_reader import read_topic
from recovery_lib.kafka.clients import client_config
from recovery_lib.runtime.checkpoint import committed_offsets
from recovery_lib.settings import get_settings

pytestmark = [pytest.mark.slow, pytest.mark.broker]


def _recoveries(experiment: str) -> list[dict]:
    log = get_settings().home / "experiments" / experiment / "faulty" / "job.log"
    return recoveries_logged(log.read_text())


def test_cec_aggregate_exactly_once_through_a_torn_footprint_and_a_kill(kafka_bootstrap):
    # torn-write: in the middle of a batch's records, a footprint is written damaged and the
    # driver SIGKILLed (a mid-write kill whose last write is torn).
    cfg = ExperimentConfig(
        query="avgprice", mode="cec", fail="torn-write", fail_at_s=10.0, rate=800.0, duration_s=26.0
    )
    report = Experiment(cfg).run()
    c = report["consistency"]
    assert [f["fired"] for f in report["failures"]] == [True], report["failures"]
    assert len(report["restarts"]) == 1
    assert c["verdict"] == "consistent" and c["guarantee"] == "exactly-once", c
    assert c["outputs"] == c["reference_outputs"] > 0
    # A plain consumer: every result once in the raw log; footprints only when asked for.
    faulty = report["out_topics"]["faulty"]
    results = Counter(r.id for r in read_topic(faulty))
    assert max(results.values()) == 1
    kinds = Counter(dict(r.headers)[KIND_HEADER].decode() for r in read_topic(faulty, control=True))
    assert kinds["open"] > 0 and kinds["R"] == sum(results.values())
    # The restart rebuilt the open windows from the log, skipping the torn footprint.
    first, recovery = _recoveries(report["experiment"])
    assert first["open_windows"] == 0  # a fresh start: an empty log
    assert recovery["torn"] == 1
    assert recovery["open_windows"] > 0
    assert recovery["extent"] >= recovery["open_windows"]
    assert recovery["replayed"] > 0
    # What GC may delete of the input: below T of the log's eventual checkpoint, never more.
    floor = replay_floor(OutputLog(faulty, client_config()))
    ends = committed_input_ends(report)
    assert floor and all(0 <= floor[p] <= ends[p] for p in floor)


def committed_input_ends(report: dict) -> dict[int, int]:
    ck = get_settings().home / "experiments" / report["experiment"] / "faulty" / "ck" / "avgprice"
    (parts,) = committed_offsets(ck).values()
    return {int(p): o for p, o in parts.items()}


@pytest.mark.long
def test_cec_time_windows_exactly_once_through_driver_and_mid_write_kills(kafka_bootstrap):
    # (count windows through an executor kill and a mid-write kill: tests/test_cluster_e2e.py)
    """Sliding event-time windows (hotbids): compared up to the windows every run must have
    closed, the rest left out on both sides and counted."""
    cfg = ExperimentConfig(
        query="hotbids",
        mode="cec",
        fail="driver-kill,mid-write",
        repeat=2,
        every_s=15.0,
        fail_at_s=12.0,
        rate=800.0,
        duration_s=40.0,
        inject_grace_s=120.0,  # a slow restart must not leave the second kill out
    )
    report = Experiment(cfg).run()
    c = report["consistency"]
    assert [f["fired"] for f in report["failures"]] == [True, True], report["failures"]
    assert c["verdict"] == "consistent" and c["guarantee"] == "exactly-once", c
    assert c["outputs"] > 1_000

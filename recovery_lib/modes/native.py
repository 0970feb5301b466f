"""The modes that restart the job's process on its own checkpoint: native Spark recovery,
causal logging (its nondeterminism replayed), and continuous eventual checkpointing (a CEC
aggregate's windows recovered from its output log)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from recovery_lib.cec.aggregate import replay_floor
from recovery_lib.cec.log import OutputLog
from recovery_lib.kafka.clients import client_config
from recovery_lib.modes.base import GcNeeds, JobPlace, ModeRequest, RecoveryMode
from recovery_lib.runtime.launch import ProcessMode
from recovery_lib.runtime.supervisor import Supervisor

if TYPE_CHECKING:
    from recovery_lib.metrics.store import MetricsStore
    from recovery_lib.runtime.supervision import JobSupervisor
    from recovery_lib.runtime.supervisor import ProcessSpec


class NativeMode(RecoveryMode):
    name = "native"
    summary = "Spark's own recovery: restart the same job on the same checkpoint"
    outage_rank = 0
    compute = "one Spark application, restarted from its checkpoint"
    parks_poison = True

    def with_causal_logging(self, causal: bool) -> str:
        return CausalMode.name if causal else self.name

    def process_mode(self, request: ModeRequest) -> ProcessMode:
        return ProcessMode.NATIVE  # causal logging is mode causal (it parks no poison)

    def supervisor(
        self,
        spec: ProcessSpec,
        request: ModeRequest,
        workdir: Path,
        store: MetricsStore | None,
        run_id: str | None,
    ) -> JobSupervisor:
        return Supervisor(
            spec, workdir, store, run_id, spare=request.spare_process, settings=request.settings
        )


class CausalMode(NativeMode):
    name = "causal"
    summary = (
        "causal logging (recovery_lib/causal): the job logs its nondeterminism and a native "
        "restart replays it"
    )
    outage_rank = None
    # A probe of the query would log determinants (or need the causal clock): not yet.
    parks_poison = False
    own_sink_refusal = (
        "causal logging replays what a job logs through recovery_lib.causal, and an unchanged "
        "job logs nothing; run it native or standby, or declare it as a JobSpec that calls "
        "causal.* where it is nondeterministic"
    )

    def with_causal_logging(self, causal: bool) -> str:
        return self.name

    def process_mode(self, request: ModeRequest) -> ProcessMode:
        return ProcessMode.CAUSAL


class CECMode(NativeMode):
    name = "cec"
    summary = (
        "continuous eventual checkpointing (recovery_lib/cec): a CEC aggregate's windows live "
        "in its output log and are recovered from it; the restart itself is native"
    )
    keeps_own_log = True
    outage_rank = None
    parks_poison = False  # its build starts its own query: no probe
    writes_tables = False
    own_sink_refusal = "mode cec needs a job whose build returns recovery_lib.cec.cec_aggregate"

    def process_mode(self, request: ModeRequest) -> ProcessMode:
        return ProcessMode.CEC

    def problem(self, request: ModeRequest) -> str | None:
        if "write-retry" in request.failures:
            return (
                "write-retry fails a sink task; a CEC aggregate writes its log in the driver. "
                "Use driver-kill, mid-write (a kill between the log's records), torn-write, "
                "task-retry or executor-kill"
            )
        if request.sink_mode != "dedup":
            return (
                "mode cec writes its output log itself and recovers from it; "
                f"{request.surface.sink('dedup')} (its default)"
            )
        return None

    def gc_needs(self, place: JobPlace, keep_batches: int, input_records: bool) -> GcNeeds:
        """A CEC job's output topic is its checkpoint (GC never truncates it), and its input
        is replayed from the eventual checkpoint's start T: nothing below T is deleted."""
        needs = super().gc_needs(place, keep_batches, input_records)
        if not input_records:
            return needs

        (topic,) = place.input_topics.values()  # a CEC job has a single input
        floor = {topic: replay_floor(OutputLog(place.out_topic, client_config()))}
        return GcNeeds(needs.checkpoints, input_floor=floor)

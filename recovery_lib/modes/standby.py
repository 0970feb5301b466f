"""A warm standby fed by shipped checkpoints takes over when the primary's lease expires; the
old primary is fenced (recovery_lib/ha/standby)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from recovery_lib.ha.standby.pair import StandbyPair
from recovery_lib.modes.base import GcNeeds, JobPlace, ModeRequest, RecoveryMode
from recovery_lib.runtime.checkpoint_gc import shipped_batch
from recovery_lib.runtime.launch import JobLaunch, ProcessMode, StandbyRole

if TYPE_CHECKING:
    from recovery_lib.metrics.store import MetricsStore
    from recovery_lib.runtime.supervision import JobSupervisor
    from recovery_lib.runtime.supervisor import ProcessSpec


def replay_process_mode(request: ModeRequest) -> ProcessMode:
    """A mode that re-executes batches on another process (a standby's takeover, a replica)
    runs a job that declares nondeterminism or an order-sensitive operator causal, unless the
    user chose."""
    if request.process is not None:
        return request.process
    return ProcessMode.CAUSAL if request.job.contract.replay_needs_causal else ProcessMode.NATIVE


class StandbyMode(RecoveryMode):
    name = "standby"
    summary = (
        "a warm standby fed by shipped checkpoints takes over when the primary's lease "
        "expires; the old primary is fenced"
    )
    outage_rank = 1
    compute = "a warm standby application that takes over"

    def process_mode(self, request: ModeRequest) -> ProcessMode:
        return replay_process_mode(request)

    def node_launch(
        self, base: JobLaunch, checkpoints: str, epochs: str, watch: StandbyRole | None
    ) -> JobLaunch:
        """A node of the pair: the primary under fencing (each incarnation a new epoch), or the
        standby that watches it and receives its shipped checkpoints."""
        if watch is None:
            return base.as_primary(checkpoints, epochs)
        return base.as_standby(checkpoints, epochs, watch)

    def problem(self, request: ModeRequest) -> str | None:
        if self.process_mode(request).own_log:
            return "mode cec writes its output log itself and recovers from it; leave standby off"
        if "executor-kill" in request.failures:
            return (
                "executor-kill is not a standby experiment: the primary and its standby share "
                "the cluster's workers, and Spark recovers lost executors itself. Use "
                "driver-kill, mid-write or pause (a paused primary is fenced)"
            )
        return super().problem(request)

    def supervisor(
        self,
        spec: ProcessSpec,
        request: ModeRequest,
        workdir: Path,
        store: MetricsStore | None,
        run_id: str | None,
    ) -> JobSupervisor:
        return StandbyPair(
            spec,
            workdir,
            store,
            run_id,
            node_launch=self.node_launch,
            settings=request.settings,
        )

    def checkpoint_roots(self, workdir: Path) -> list[Path]:
        # The current primary's (the pair keeps the link up to date).
        return [self.supervisor_home(workdir) / "primary" / "ck"]

    def standby_dir(self, workdir: Path) -> Path | None:
        return self.supervisor_home(workdir) / "standby" / "ship"

    def gc_needs(self, place: JobPlace, keep_batches: int, input_records: bool) -> GcNeeds:
        """Never past the newest copy the standby holds completely: it resumes from it."""

        needs = super().gc_needs(place, keep_batches, input_records)
        return GcNeeds(needs.checkpoints, shipped=shipped_batch(self.standby_dir(place.workdir)))

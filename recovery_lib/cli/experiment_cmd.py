"""``recovery experiment run``: a reference run and a faulty run on the same input, judged by the
oracle (experiment/runner.py)."""

from __future__ import annotations

import json

import typer

from recovery_lib.cli.output import EXIT_INCONCLUSIVE, abort, console
from recovery_lib.errors import ConfigurationError
from recovery_lib.kafka import broker as broker_mod
from recovery_lib.kafka.exceptions import KafkaLayerError
from recovery_lib.modes.registry import mode_names

experiment_app = typer.Typer(help="Recovery experiments with real failures.", no_args_is_help=True)


def _offsets(text: str | None, option: str) -> dict[str, dict[int, int]] | None:
    if not text:
        return None
    try:
        raw = json.loads(text)
        return {t: {int(p): int(o) for p, o in parts.items()} for t, parts in raw.items()}
    except (ValueError, AttributeError, TypeError) as exc:
        raise ConfigurationError(
            f'{option} takes JSON {{"topic": {{"0": 42}}}}, got {text!r}'
        ) from exc


@experiment_app.command("run")
def experiment_run(
    job: str = typer.Option(
        None,
        help="The job: module:attr of a JobSpec (its directory on PYTHONPATH), or a job of "
        "this repository's jobs/ by name (q1 ... q12, prices, lastbids).",
    ),
    query: str = typer.Option("q3", help="Same as --job (a name of jobs/)."),
    replay: list[str] = typer.Option(
        None,
        help="input=topic: replay records of an existing topic as the job's input instead of "
        "generated NexMark events (repeat per input).",
    ),
    replay_from: str = typer.Option(
        None, help='Offsets to replay from, JSON {"topic": {"0": 42}} (default: the start).'
    ),
    replay_to: str = typer.Option(
        None, help="Offsets to replay up to (exclusive), JSON (default: the end)."
    ),
    keys: int = typer.Option(
        None,
        help="Generate keyed events {account, amount} over this many distinct keys instead of "
        "NexMark events (every key once in the warm-up), for a job with one such input (e.g. "
        "keyed_state).",
    ),
    catch_up_timeout: float = typer.Option(
        300.0, help="Seconds the warm-up's processing and the final drain may take."
    ),
    param: list[str] = typer.Option(None, help="name=value for the job (repeat)."),
    mode: str = typer.Option(
        "native",
        help="Recovery mode: "
        + " | ".join(mode_names())
        + " (the replicated ones run two live replicas; their sink defaults to release).",
    ),
    fail: str = typer.Option(
        "driver-kill",
        help="driver-kill | mid-write | executor-kill | task-retry | write-retry | pause | "
        "pause-mid-write | torn-write | net-reset | net-blackhole | net-latency | broker-pause "
        "| broker-restart | broker-kill | checkpoint-unwritable | poison | none; several, "
        "comma-separated, take turns when --repeat > 1. The net-* and broker-* kinds run the "
        "experiment on its own broker behind a fault proxy; broker-kill on its own three-node "
        "Kafka cluster (SIGKILL of the node leading most of the job's partitions).",
    ),
    fail_at: float = typer.Option(20.0, help="Seconds into the faulty run."),
    pause: float = typer.Option(
        5.0,
        help="pause, pause-mid-write: seconds the job (a replica) stays stopped; net-blackhole, "
        "net-latency, broker-pause, checkpoint-unwritable: seconds the fault lasts; "
        "broker-restart, broker-kill: seconds the killed broker (node) stays down.",
    ),
    net_latency_ms: float = typer.Option(200.0, help="net-latency: added latency (ms)."),
    net_jitter_ms: float = typer.Option(50.0, help="net-latency: up to this much more (ms)."),
    net_reset_api: str = typer.Option(
        "produce", help="net-reset: the request whose answer is cut off: produce | fetch | any."
    ),
    repeat: int = typer.Option(1, help="Number of failures in the faulty run."),
    every: float = typer.Option(20.0, help="Seconds between repeated failures."),
    jitter: float = typer.Option(0.0, help="Each failure up to this many seconds later."),
    inject_grace: float = typer.Option(
        0.0,
        "--inject-grace",
        help="Failures still due when the input ends (the job still recovering from the last "
        "one) get up to this many seconds more input to come in.",
    ),
    rate: float = typer.Option(2000.0, help="Input events per second."),
    duration: float = typer.Option(60.0, help="Seconds of input."),
    seed: int = typer.Option(42),
    sink: str = typer.Option(
        None,
        help="How outputs reach consumers: at-least-once | dedup (readers dedup by id) | "
        "release (a plain consumer sees each once) | two-phase (visible at batch commit) | "
        "transactional (a Kafka transaction per task; Apache Kafka only) | delta | iceberg "
        "(a lakehouse table, one commit per batch, never twice). "
        f"Default: dedup, release for {' and '.join(mode_names(replicated=True))}.",
    ),
    table: str = typer.Option(
        None,
        help="--sink delta | iceberg: the table's path (iceberg: the catalog and warehouse "
        "root; add #namespace.table to name it). Default: under the experiment's directory.",
    ),
    victim: str = typer.Option(
        None,
        help=f"{' | '.join(mode_names(replicated=True))}: the replica a failure hits: leader or "
        "follower (leader-based), a or b (default: the leader; replica a when leaderless).",
    ),
    heartbeat_period: float = typer.Option(
        None, help="liverobin: seconds between heartbeats (the batch interval)."
    ),
    replace_after: float = typer.Option(
        None,
        help=f"{' | '.join(mode_names(replicated=True))}: seconds after a replica's death its "
        "replacement starts.",
    ),
    cluster: bool = typer.Option(
        False, help="Run against a standalone cluster (started if needed)."
    ),
    executor_cores: int = typer.Option(
        None, help="Cluster: cores per executor (1 = one executor per worker core)."
    ),
    keep_input: bool = typer.Option(
        False, help="Keep the generated input topics (deleted by default; outputs are kept)."
    ),
    report: str = typer.Option(
        "reports/experiment.json", help="JSON report; the PNG goes beside it."
    ),
) -> None:
    """A reference run and a faulty run on the same input, judged by the oracle."""
    from recovery_lib.experiment.runner import Experiment, ExperimentConfig, write_report
    from recovery_lib.runtime.launch import parse_pairs
    from recovery_lib.runtime.progress import status_lines

    try:
        replay_map = parse_pairs(replay or [], "--replay", require_value=True)
        params = parse_pairs(param or [], "--param", require_value=True)
        replay_start = _offsets(replay_from, "--replay-from")
        replay_end = _offsets(replay_to, "--replay-to")
    except ValueError as exc:
        abort(exc)
        return
    cfg = ExperimentConfig(
        query=job or query.lower(),
        replay=replay_map or None,
        replay_start=replay_start,
        replay_end=replay_end,
        keys=keys,
        catch_up_timeout_s=catch_up_timeout,
        params=params or None,
        mode=mode,
        fail=None if fail == "none" else fail,
        fail_at_s=fail_at,
        pause_s=pause,
        net_latency_ms=net_latency_ms,
        net_jitter_ms=net_jitter_ms,
        net_reset_api=net_reset_api,
        repeat=repeat,
        every_s=every,
        jitter_s=jitter,
        inject_grace_s=inject_grace,
        rate=rate,
        duration_s=duration,
        seed=seed,
        sink=sink or _default_sink(mode),
        table=table,
        victim=victim,
        heartbeat_period_s=heartbeat_period,
        replace_after_s=replace_after,
        cluster=cluster,
        executor_cores=executor_cores,
        keep_input=keep_input,
    )
    try:
        cfg.validate()  # what to fix, before a broker starts
    except ValueError as exc:
        abort(exc)
        return
    try:
        with (
            broker_mod.broker_for_run(console.print),
            status_lines(console) as status,
        ):

            def show(message: str) -> None:
                status(message)  # a Live line on a terminal, throttled lines in a pipe
                if console.is_terminal and (
                    message.startswith("verdict") or "never fired" in message
                ):
                    console.print(message)  # stays on screen

            result = Experiment(cfg, console, progress=show).run()
    except (ValueError, KafkaLayerError) as exc:
        abort(exc)
        return
    path = write_report(result, report)
    c = result["consistency"]
    console.print_json(
        json.dumps(
            {
                k: result.get(k)
                for k in (
                    "query",
                    "mode",
                    "failures",
                    "throughput_eps",
                    "latency_ms",
                    "restart_time_s",
                    "recovery_time_s",
                    "output_gap_s",
                    "p99_after_over_before",
                )
            }
            | {
                "consistency": {
                    k: c[k]
                    for k in (
                        "outputs",
                        "reference_outputs",
                        "lost",
                        "duplicated",
                        "divergent",
                        "extra",
                        "guarantee",
                        "verdict",
                        "inconclusive_because",
                    )
                }
            },
            default=str,
        )
    )
    console.print(f"report: {path}, timeline: {path.with_suffix('.png')}")
    if c["verdict"] == "inconclusive":
        raise typer.Exit(code=EXIT_INCONCLUSIVE)
    if c["verdict"] != "consistent":
        raise typer.Exit(code=2)


def _default_sink(mode: str) -> str:
    """Replicas write through the release sink and the replica gate; the rest dedup."""
    from recovery_lib.modes import MODES

    replicated = mode in MODES and MODES[mode].replicated
    return "release" if replicated else "dedup"

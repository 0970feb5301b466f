"""Apache Kafka from its Maven Central jars (``kafka/pom.xml``, fetched by ``make install``):
KRaft nodes that are broker and controller in one JVM, one or three on 127.0.0.1, each with a
durable log dir. This module knows Kafka's files and commands; kafka/broker.py runs the nodes.

A log dir (``<home>/kafka`` by default) holds ``layout.json`` (the cluster id and each node's
ports, fixed when the dir is first formatted so a restarted node keeps its address),
``log4j2.properties`` and ``node-<id>/`` (``server.properties``, ``data/``).

A node can also take clients on a secured listener (``SecuredListener``: SASL_SSL, SCRAM-SHA-512,
a PEM certificate), beside its PLAINTEXT one; the controller and the nodes among themselves
stay PLAINTEXT.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from recovery_lib.kafka.exceptions import BrokerBinaryNotFound, BrokerStartError
from recovery_lib.settings import Settings

KAFKA_VERSION = "4.4.0"  # kafka/pom.xml pins the same
MAIN_CLASS = "kafka.Kafka"
STORAGE_TOOL = "kafka.tools.StorageTool"
# A cluster of three tolerates one node down without losing a committed record.
CLUSTER_NODES = 3
CLUSTER_MIN_INSYNC = 2

LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = out
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.state.name = state.change.logger
logger.state.level = WARN
"""


# The secured listener's name (its security protocol too) and its one SASL mechanism.
SECURED_LISTENER = "SASL_SSL"
SCRAM_MECHANISM = "SCRAM-SHA-512"


@dataclass(frozen=True)
class SecuredListener:
    """A client listener with TLS and SCRAM logins beside a node's PLAINTEXT one.

    ``user`` / ``password``: the SCRAM-SHA-512 credential made when the log dir is first
    formatted (a dir formatted without one is refused: its cluster has no such user).
    ``cert_chain_pem_path``: the node's certificate, then its CA's (PEM); ``key_pem_path``: its
    private key (PEM, PKCS#8, not encrypted). Both are copied into each node's
    ``server.properties``. ``port``: the first node's port (None: a free one); every node's is
    recorded in layout.json at the first start and kept by later ones.
    """

    user: str
    password: str = field(repr=False)
    cert_chain_pem_path: Path
    key_pem_path: Path
    port: int | None = None

    def __post_init__(self) -> None:
        # The format tool's --add-scram syntax quotes them: a quote or backslash would end it.
        for name, value in (("user", self.user), ("password", self.password)):
            if not value or any(c in value for c in '"\\'):
                raise BrokerStartError(
                    f"the secured listener's {name} must be non-empty, without \" or \\"
                )

    @property
    def scram_credential(self) -> str:
        """The ``--add-scram`` argument of Kafka's format tool."""
        return f'{SCRAM_MECHANISM}=[name="{self.user}",password="{self.password}"]'


@dataclass(frozen=True)
class KafkaNodeLayout:
    """One node of a Kafka log dir: its KRaft id, client port, controller port and the port
    of its secured listener (None: the dir was formatted without one)."""

    node_id: int
    port: int
    controller_port: int
    secured_port: int | None = None


@dataclass(frozen=True)
class KafkaLayout:
    """The cluster a Kafka log dir holds; ``<dir>/layout.json``, written before the first
    format and read on every later start."""

    cluster_id: str
    nodes: tuple[KafkaNodeLayout, ...]

    @property
    def replication_factor(self) -> int:
        return len(self.nodes)

    @property
    def min_insync(self) -> int:
        return CLUSTER_MIN_INSYNC if len(self.nodes) >= CLUSTER_NODES else 1

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=1))

    @classmethod
    def load(cls, path: Path) -> KafkaLayout:
        try:
            raw = json.loads(path.read_text())
            return cls(raw["cluster_id"], tuple(KafkaNodeLayout(**n) for n in raw["nodes"]))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise BrokerStartError(
                f"{path} is unreadable ({exc}): the Kafka log dir is damaged. Remove "
                f"{path.parent} to start an empty cluster (its topics are lost)"
            ) from exc


def libs_dir(settings: Settings) -> Path:
    return settings.kafka_libs_dir or Path(sys.prefix) / "share" / "kafka" / "libs"


def classpath(settings: Settings) -> str:
    libs = libs_dir(settings)
    if not (libs / f"kafka_2.13-{KAFKA_VERSION}.jar").is_file():
        raise BrokerBinaryNotFound(
            f"Apache Kafka {KAFKA_VERSION}'s jars are not in {libs}: run `make install` (it "
            "fetches them from Maven Central with mvn), set RECOVERY_KAFKA_LIBS_DIR to where "
            "they are, or use RECOVERY_BROKER_KIND=tansu"
        )
    return f"{libs}/*"


def java_binary() -> str:
    home = os.environ.get("JAVA_HOME")
    candidate = Path(home) / "bin" / "java" if home else None
    if candidate is not None and candidate.is_file():
        return str(candidate)
    found = shutil.which("java")
    if found is None:
        raise BrokerBinaryNotFound(
            "no java on PATH and no JAVA_HOME: Apache Kafka needs a JDK 17 or newer; install "
            "one (e.g. apt-get install openjdk-17-jdk-headless) or use RECOVERY_BROKER_KIND=tansu"
        )
    return found


def new_cluster_id() -> str:
    """Kafka's own form (``Uuid.randomUuid().toString()``) without a JVM start for it."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):  # Kafka avoids ids that read as a command-line flag
            return text


def node_dir(root: Path, node_id: int) -> Path:
    return root / f"node-{node_id}"


def _properties_value(text: str) -> str:
    """``text`` as one line of a .properties file (Java's loader turns ``\\n`` back)."""
    return text.strip().replace("\\", "\\\\").replace("\r", "").replace("\n", "\\n")


def secured_properties(secured: SecuredListener) -> dict[str, object]:
    """The secured listener's part of server.properties (its address is in ``listeners``)."""
    prefix = f"listener.name.{SECURED_LISTENER.lower()}"
    return {
        "sasl.enabled.mechanisms": SCRAM_MECHANISM,
        f"{prefix}.sasl.enabled.mechanisms": SCRAM_MECHANISM,
        f"{prefix}.{SCRAM_MECHANISM.lower()}.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        ),
        f"{prefix}.ssl.keystore.type": "PEM",
        f"{prefix}.ssl.keystore.certificate.chain": _properties_value(
            Path(secured.cert_chain_pem_path).read_text()
        ),
        f"{prefix}.ssl.keystore.key": _properties_value(Path(secured.key_pem_path).read_text()),
    }


def server_properties(
    layout: KafkaLayout,
    node: KafkaNodeLayout,
    root: Path,
    host: str,
    advertised_port: int | None,
    secured: SecuredListener | None = None,
) -> str:
    voters = ",".join(f"{n.node_id}@{host}:{n.controller_port}" for n in layout.nodes)
    rf, isr = layout.replication_factor, layout.min_insync
    listeners = [f"PLAINTEXT://{host}:{node.port}", f"CONTROLLER://{host}:{node.controller_port}"]
    advertised = [f"PLAINTEXT://{host}:{advertised_port or node.port}"]
    protocols = ["CONTROLLER:PLAINTEXT", "PLAINTEXT:PLAINTEXT"]
    if secured is not None and node.secured_port is not None:
        listeners.append(f"{SECURED_LISTENER}://{host}:{node.secured_port}")
        advertised.append(f"{SECURED_LISTENER}://{host}:{node.secured_port}")
        protocols.append(f"{SECURED_LISTENER}:{SECURED_LISTENER}")
    props: dict[str, object] = {
        "process.roles": "broker,controller",
        "node.id": node.node_id,
        "controller.quorum.voters": voters,
        "listeners": ",".join(listeners),
        "advertised.listeners": ",".join(advertised),
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": ",".join(protocols),
        "log.dirs": node_dir(root, node.node_id) / "data",
        "num.partitions": 1,
        "default.replication.factor": rf,
        "min.insync.replicas": isr,
        "offsets.topic.replication.factor": rf,
        "offsets.topic.num.partitions": 10,
        "transaction.state.log.replication.factor": rf,
        "transaction.state.log.min.isr": isr,
        "transaction.state.log.num.partitions": 10,
        "share.coordinator.state.topic.replication.factor": rf,
        "share.coordinator.state.topic.min.isr": isr,
        "unclean.leader.election.enable": "false",
        "group.initial.rebalance.delay.ms": 0,
        "auto.create.topics.enable": "true",
    }
    if secured is not None and node.secured_port is not None:
        props.update(secured_properties(secured))
    return "".join(f"{k}={v}\n" for k, v in props.items())


def _free_ports(count: int, host: str, free_port: Callable[[str], int]) -> list[int]:
    ports: set[int] = set()
    while len(ports) < count:
        ports.add(free_port(host))
    return sorted(ports)


def prepare(
    root: Path,
    nodes: int,
    host: str,
    settings: Settings,
    free_port: Callable[[str], int],
    first_port: int | None = None,
    advertised_port: int | None = None,
    secured: SecuredListener | None = None,
) -> KafkaLayout:
    """The log dir ready to start: its layout (made on the first start) and every node's
    storage formatted. A dir that a format left half done, that holds another number of nodes,
    or that was formatted without the ``secured`` listener asked for, is refused with what to
    do."""
    root.mkdir(parents=True, exist_ok=True)
    layout_file = root / "layout.json"
    if layout_file.exists():
        layout = KafkaLayout.load(layout_file)
        if len(layout.nodes) != nodes:
            raise BrokerStartError(
                f"{root} holds a {len(layout.nodes)}-node Kafka cluster, not {nodes}: start it "
                f"with --nodes {len(layout.nodes)}, or remove {root} for an empty one"
            )
        if secured is not None:
            _check_secured(layout, secured, root)
    else:
        strays = [p.name for p in root.glob("node-*")]
        if strays:
            raise BrokerStartError(
                f"{root} has node dirs ({', '.join(sorted(strays))}) but no layout.json: a "
                f"start was interrupted before the cluster was recorded. Remove {root}"
            )
        layout = _new_layout(nodes, host, free_port, first_port, secured)
        layout.save(layout_file)
    (root / "log4j2.properties").write_text(LOG4J2)
    for node in layout.nodes:
        directory = node_dir(root, node.node_id)
        directory.mkdir(exist_ok=True)
        (directory / "server.properties").write_text(
            server_properties(
                layout, node, root, host, advertised_port if node.node_id == 1 else None, secured
            )
        )
    # Each format is a JVM start (~2.5 s): the nodes' run side by side.
    with ThreadPoolExecutor(len(layout.nodes)) as pool:
        for done in [
            pool.submit(_format, layout, node, node_dir(root, node.node_id), settings, secured)
            for node in layout.nodes
        ]:
            done.result()
    return layout


def _new_layout(
    nodes: int,
    host: str,
    free_port: Callable[[str], int],
    first_port: int | None,
    secured: SecuredListener | None,
) -> KafkaLayout:
    """A new cluster's id and ports; ``first_port`` and ``secured.port`` are the first
    node's client and secured ports (the others free ones)."""
    fixed = [p for p in (first_port, secured.port if secured else None) if p is not None]
    if len(set(fixed)) < len(fixed):
        raise BrokerStartError(f"port {fixed[0]} given for both the PLAINTEXT and the secured one")
    per_node = 3 if secured is not None else 2
    pool = iter(
        p for p in _free_ports(per_node * nodes + len(fixed), host, free_port) if p not in fixed
    )

    def port(given: int | None, first: bool) -> int:
        return given if first and given is not None else next(pool)

    clients = [port(first_port, i == 0) for i in range(nodes)]
    controllers = [next(pool) for _ in range(nodes)]
    secured_ports = [
        port(secured.port, i == 0) if secured is not None else None for i in range(nodes)
    ]
    return KafkaLayout(
        new_cluster_id(),
        tuple(
            KafkaNodeLayout(i + 1, clients[i], controllers[i], secured_ports[i])
            for i in range(nodes)
        ),
    )


def _check_secured(layout: KafkaLayout, secured: SecuredListener, root: Path) -> None:
    """A restart with a secured listener: the dir was formatted with one (its SCRAM user made
    then), on the port asked for."""
    first = layout.nodes[0]
    if any(n.secured_port is None for n in layout.nodes):
        raise BrokerStartError(
            f"{root} was formatted without a secured listener, so its cluster has no SCRAM "
            f"user: start it without one, or remove {root} for a new cluster with it"
        )
    if secured.port is not None and secured.port != first.secured_port:
        raise BrokerStartError(
            f"{root} recorded its secured listener on port {first.secured_port}, not "
            f"{secured.port}: start it on {first.secured_port} (or without a port), or remove "
            f"{root} for a new cluster"
        )


def _format(
    layout: KafkaLayout,
    node: KafkaNodeLayout,
    directory: Path,
    settings: Settings,
    secured: SecuredListener | None = None,
) -> None:
    data = directory / "data"
    meta = data / "meta.properties"
    if meta.is_file():
        found = dict(
            line.split("=", 1) for line in meta.read_text().splitlines() if "=" in line
        ).get("cluster.id")
        if found != layout.cluster_id:
            raise BrokerStartError(
                f"{data} belongs to Kafka cluster {found}, not {layout.cluster_id} "
                f"({directory.parent / 'layout.json'}): remove {directory.parent} to start afresh"
            )
        return
    if data.exists() and any(data.iterdir()):
        raise BrokerStartError(
            f"node {node.node_id}'s log dir {data} is half-formatted (files, no "
            f"meta.properties): a format was interrupted. Remove {directory.parent} to start an "
            "empty cluster (its topics are lost)"
        )
    done = subprocess.run(
        [
            java_binary(),
            "-cp",
            classpath(settings),
            STORAGE_TOOL,
            "format",
            "-t",
            layout.cluster_id,
            "-c",
            str(directory / "server.properties"),
            # The listener's SCRAM user, in the cluster's metadata from its first record on.
            *(["--add-scram", secured.scram_credential] if secured is not None else []),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "KAFKA_LOG4J_OPTS": ""},
        check=False,
    )
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip()[-500:]
        if secured is not None:
            said = said.replace(secured.password, "***")
        raise BrokerStartError(
            f"formatting node {node.node_id}'s log dir {data} failed (exit {done.returncode}): "
            f"{said}"
        )


def node_command(settings: Settings, root: Path, node_id: int) -> list[str]:
    heap = settings.kafka_heap_mb
    return [
        java_binary(),
        f"-Xms{min(heap, 256)}m",
        f"-Xmx{heap}m",
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={root / 'log4j2.properties'}",
        "-cp",
        classpath(settings),
        MAIN_CLASS,
        str(node_dir(root, node_id) / "server.properties"),
    ]

"""The fault proxy's scripts against a stand-in broker that answers every Kafka-framed request
with its correlation id: latency keeps frames in order, a reset hits exactly the api it names
after the broker got the request, a blackhole drops bytes and breaks the connections that lost
some, a bandwidth cap throttles."""

from __future__ import annotations

import socket
import socketserver
import struct
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from recovery_lib.chaos.proxy import Api, FaultProxy


class _Answer(socketserver.BaseRequestHandler):
    """Reads request frames; answers each with (correlation id, the request's body)."""

    def handle(self) -> None:
        sock: socket.socket = self.request
        while True:
            head = _recv(sock, 4)
            if head is None:
                return
            body = _recv(sock, struct.unpack(">i", head)[0])
            if body is None:
                return
            api, _version, correlation = struct.unpack_from(">hhi", body)
            self.server.received.append((api, correlation))  # type: ignore[attr-defined]
            answer = struct.pack(">i", correlation) + body[8:]
            sock.sendall(struct.pack(">i", len(answer)) + answer)


def _recv(sock: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


@pytest.fixture()
def broker() -> Iterator[socketserver.ThreadingTCPServer]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Answer)
    server.daemon_threads = True
    server.received = []  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture()
def proxy(broker: socketserver.ThreadingTCPServer) -> Iterator[FaultProxy]:
    with FaultProxy(broker.server_address) as started:  # type: ignore[arg-type]
        yield started


def request(api: Api, correlation: int, payload: bytes = b"x") -> bytes:
    body = struct.pack(">hhi", api, 0, correlation) + payload
    return struct.pack(">i", len(body)) + body


def answer(sock: socket.socket) -> tuple[int, bytes]:
    head = _recv(sock, 4)
    assert head is not None, "the connection closed"
    frame = _recv(sock, struct.unpack(">i", head)[0])
    assert frame is not None
    return struct.unpack_from(">i", frame)[0], frame[4:]


def _until(done: Callable[[], bool], what: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def connect(proxy: FaultProxy) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
    return sock


def test_frames_pass_unchanged_and_in_order_under_latency_and_jitter(proxy, broker) -> None:
    proxy.set_latency(0.05, jitter_s=0.05)
    sock = connect(proxy)
    sent = time.monotonic()
    sock.sendall(b"".join(request(Api.FETCH, i, f"p{i}".encode()) for i in range(20)))
    answers = [answer(sock) for _ in range(20)]
    took = time.monotonic() - sent
    assert answers == [(i, f"p{i}".encode()) for i in range(20)]  # all, in order
    assert took >= 0.1  # at least the latency each way (a lower bound, not a speed claim)
    assert proxy.stats.delayed_frames == 40 and proxy.stats.frames_up == 20
    sock.close()


def test_a_reset_hits_the_named_api_after_the_broker_got_the_request(proxy, broker) -> None:
    proxy.reset_next(Api.PRODUCE, count=1)
    sock = connect(proxy)
    sock.sendall(request(Api.FETCH, 1))
    assert answer(sock)[0] == 1  # another api passes
    sock.sendall(request(Api.PRODUCE, 2))
    with pytest.raises((ConnectionResetError, AssertionError)):
        answer(sock)  # reset (RST), or closed, before the answer
    assert (Api.PRODUCE, 2) in broker.received  # the broker did get the produce
    assert [r.api for r in proxy.stats.resets] == ["produce"] and proxy.pending_resets == 0
    again = connect(proxy)  # the client's retry on a new connection goes through
    again.sendall(request(Api.PRODUCE, 3))
    assert answer(again)[0] == 3
    again.close()


def test_a_blackhole_drops_bytes_then_breaks_the_connections_that_lost_some(proxy, broker):
    sock = connect(proxy)
    sock.sendall(request(Api.FETCH, 1))
    assert answer(sock)[0] == 1
    proxy.blackhole(300)  # ended below, once both requests were dropped
    sock.sendall(request(Api.FETCH, 2))
    fresh = connect(proxy)  # accepted during the blackhole; its bytes are dropped too
    fresh.sendall(request(Api.METADATA, 3))
    fired = proxy.stats.blackholes[0]
    _until(lambda: fired.dropped_frames >= 2, "the blackhole to drop both requests")
    proxy.clear()
    sock.settimeout(10)
    with pytest.raises((ConnectionResetError, AssertionError)):
        answer(sock)  # nothing came back, and the connection was reset when it ended
    _until(lambda: fired.reset_connections >= 2, "both connections to be reset")
    assert [c for _, c in broker.received] == [1]  # nothing reached the broker
    assert fired.dropped_frames == 2 and fired.reset_connections == 2
    after = connect(proxy)  # healed: a new connection works
    after.sendall(request(Api.FETCH, 4))
    assert answer(after)[0] == 4
    for s in (sock, fresh, after):
        s.close()


def test_a_bandwidth_cap_throttles_and_clear_lifts_every_fault(proxy, broker) -> None:
    proxy.set_bandwidth(20_000)  # bytes per second, each way
    sock = connect(proxy)
    payload = b"y" * 10_000
    for i in range(6):
        sock.sendall(request(Api.PRODUCE, i, payload))
        assert answer(sock) == (i, payload)
    assert proxy.stats.throttled_s > 0  # 60 kB each way at 20 kB/s: the cap made it wait
    proxy.clear()
    waited = proxy.stats.throttled_s
    sock.sendall(request(Api.PRODUCE, 9, payload))
    assert answer(sock)[0] == 9 and proxy.stats.throttled_s == waited
    sock.close()


def test_the_proxy_refuses_nothing_but_reports_a_broker_that_is_gone() -> None:
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    port = dead.getsockname()[1]
    dead.close()  # nothing listens there
    with FaultProxy(("127.0.0.1", port)) as proxy:
        sock = connect(proxy)
        sock.settimeout(5)
        try:
            data = sock.recv(1)
        except ConnectionResetError:
            data = b""
        assert data == b""  # closed: the client sees a broken broker, not a hang
        sock.close()

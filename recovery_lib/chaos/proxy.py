"""A fault proxy between Kafka clients and one broker: the network faults an experiment scripts.

The broker advertises the proxy's address (chaos/network.py), so every client, after its
bootstrap, talks to the broker through here. The proxy forwards whole Kafka frames (a 4-byte
size, then the frame): it reads the api key and correlation id of each request, so that it can
fail exactly the exchanges a fault names. The faults, each switched on and off from any thread:

- latency (+ jitter): every frame is delivered ``latency + U(0, jitter)`` after it arrived,
  in order, without limiting how many are in flight (a long link, not a slow one);
- reset: the next ``count`` requests of an api (produce, fetch or any) reach the broker, and
  their connection is reset (RST) before the response comes back. A producer then does not
  know whether its records were written: the retry that follows is where duplicates come from;
- blackhole for N seconds: connections are accepted and every byte is dropped, both ways; a
  connection that lost bytes is reset when the blackhole ends (its stream is broken, as after a
  TCP retransmission timeout);
- bandwidth cap: bytes per second per direction, over all connections.

``stats`` says what fired and when (a fault armed but never met is not a fault that happened).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from enum import IntEnum

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_REQUEST_HEAD = struct.Struct(">hhi")  # api key, api version, correlation id
_CORRELATION = struct.Struct(">i")
MAX_FRAME_BYTES = 256 * 1024 * 1024  # a size above this is not Kafka: the stream is broken


class Api(IntEnum):
    """The Kafka api keys a fault can name."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class ResetFired:
    """One connection reset before the response to a request reached its client."""

    ts_ms: int
    api: str


@dataclass
class BlackholeFired:
    start_ms: int
    end_ms: int
    dropped_frames: int = 0
    reset_connections: int = 0


@dataclass
class ProxyStats:
    """What went through the proxy and which faults fired, with their times."""

    connections: int = 0
    frames_up: int = 0  # client -> broker
    frames_down: int = 0
    delayed_frames: int = 0
    resets: list[ResetFired] = field(default_factory=list)
    blackholes: list[BlackholeFired] = field(default_factory=list)
    throttled_s: float = 0.0  # time writers waited for the bandwidth cap


class _Bucket:
    """A token bucket: ``rate`` bytes per second, a burst of one second's worth."""

    def __init__(self) -> None:
        self.rate: float | None = None
        self._tokens = 0.0
        self._at = time.monotonic()

    def wait_s(self, nbytes: int) -> float:
        """Take ``nbytes``; the time to wait before sending them (0 without a cap)."""
        if self.rate is None:
            return 0.0
        now = time.monotonic()
        self._tokens = min(self.rate, self._tokens + (now - self._at) * self.rate)
        self._at = now
        self._tokens -= nbytes
        return 0.0 if self._tokens >= 0 else -self._tokens / self.rate


class _Connection:
    """One client connection and its broker connection."""

    def __init__(self, client: asyncio.StreamWriter, broker: asyncio.StreamWriter) -> None:
        self.client, self.broker = client, broker
        self.doomed: dict[int, str] = {}  # correlation id -> api: reset before its response
        self.lost_bytes = False  # a blackhole dropped some of its frames
        self.closed = False

    def reset(self) -> None:
        """Close both sides with an RST (SO_LINGER 0), not an orderly FIN."""
        if self.closed:
            return
        self.closed = True
        for writer in (self.client, self.broker):
            sock = writer.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()


class FaultProxy:
    """Forwards 127.0.0.1:``port`` to ``upstream``; the faults are set from any thread."""

    def __init__(
        self, upstream: tuple[str, int], port: int = 0, host: str = "127.0.0.1", seed: int = 0
    ) -> None:
        self.upstream = upstream
        self.host, self.port = host, port
        self.stats = ProxyStats()
        self.latency_s = 0.0
        self.jitter_s = 0.0
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._reset_api: Api | None = None  # None with a count: any api
        self._reset_count = 0
        self._blackhole_until = 0.0  # monotonic
        self._up, self._down = _Bucket(), _Bucket()
        self._connections: set[_Connection] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None

    # -- life ------------------------------------------------------------------------------

    def start(self) -> int:
        """Listen (in a thread of its own) and return the port."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                self._server = loop.run_until_complete(
                    asyncio.start_server(self._serve, self.host, self.port)
                )
                self.port = self._server.sockets[0].getsockname()[1]
            except BaseException as exc:  # noqa: BLE001 - raised again in start()
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name=f"fault-proxy-{self.port}", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            raise failure[0]
        log.info("fault proxy on %s:%d -> %s:%d", self.host, self.port, *self.upstream)
        return self.port

    def stop(self) -> None:
        """Close the listener and every connection; safe to call twice."""
        loop = self._loop
        if loop is None or self._thread is None:
            return

        async def shutdown() -> None:
            if self._server is not None:
                self._server.close()
            for conn in list(self._connections):
                conn.reset()

        with contextlib.suppress(RuntimeError):  # the loop already stopped
            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(timeout=5)
            loop.call_soon_threadsafe(loop.stop)
        self._thread.join(timeout=5)
        self._loop = None

    def __enter__(self) -> FaultProxy:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- faults ----------------------------------------------------------------------------

    def set_latency(self, latency_s: float, jitter_s: float = 0.0) -> None:
        self.latency_s, self.jitter_s = latency_s, jitter_s

    def reset_next(self, api: Api | None = None, count: int = 1) -> None:
        """Reset the connections of the next ``count`` requests of ``api`` (None: any)
        after the broker got them, before their responses reach the client."""
        with self._lock:
            self._reset_api, self._reset_count = api, count

    def blackhole(self, seconds: float) -> None:
        """Drop every byte for ``seconds`` from now; reset the connections that lost bytes
        when it ends."""
        end = time.monotonic() + seconds
        self._blackhole_until = end
        self.stats.blackholes.append(BlackholeFired(now_ms(), now_ms() + int(seconds * 1000)))
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.call_later, seconds, self._heal)

    def set_bandwidth(self, bytes_per_s: float | None) -> None:
        self._up.rate = self._down.rate = bytes_per_s

    def clear(self) -> None:
        """No fault from now on (a blackhole in progress ends now)."""
        self.set_latency(0.0)
        self.set_bandwidth(None)
        self.reset_next(None, 0)
        if self._blackhole_until > time.monotonic():
            self._blackhole_until = 0.0
            if self._loop is not None:
                self._loop.call_soon_threadsafe(self._heal)

    @property
    def pending_resets(self) -> int:
        return self._reset_count

    # -- forwarding ------------------------------------------------------------------------

    def _in_blackhole(self) -> bool:
        return time.monotonic() < self._blackhole_until

    def _heal(self) -> None:
        if self._in_blackhole():  # a later blackhole extended this one
            return
        lost = [c for c in self._connections if c.lost_bytes]
        for conn in lost:
            conn.reset()
        if self.stats.blackholes:
            self.stats.blackholes[-1].reset_connections += len(lost)
            self.stats.blackholes[-1].end_ms = now_ms()

    def _take_reset(self, api: int) -> str | None:
        """Whether the request of ``api`` is one an armed reset names (and count it)."""
        with self._lock:
            if self._reset_count <= 0:
                return None
            if self._reset_api is not None and api != self._reset_api:
                return None
            self._reset_count -= 1
        try:
            return Api(api).name.lower()
        except ValueError:
            return f"api {api}"

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        self.stats.connections += 1
        try:
            broker_r, broker_w = await asyncio.open_connection(*self.upstream)
        except OSError as exc:
            log.warning("fault proxy: the broker at %s:%d refused: %s", *self.upstream, exc)
            client_w.transport.abort()
            return
        conn = _Connection(client_w, broker_w)
        self._connections.add(conn)
        try:
            await asyncio.gather(
                self._pump(conn, client_r, broker_w, self._up, upward=True),
                self._pump(conn, broker_r, client_w, self._down, upward=False),
            )
        finally:
            self._connections.discard(conn)
            if conn.lost_bytes:
                conn.reset()
            for writer in (client_w, broker_w):
                writer.close()

    async def _pump(
        self,
        conn: _Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        bucket: _Bucket,
        upward: bool,
    ) -> None:
        """Frames from ``reader`` to ``writer``, each due at its arrival plus the latency; a
        writer task keeps them in order."""
        queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue()
        sender = asyncio.ensure_future(self._send(conn, queue, writer, bucket))
        last_due = 0.0
        try:
            while not conn.closed:
                frame = await self._read_frame(reader)
                if frame is None:
                    break
                if self._in_blackhole():
                    conn.lost_bytes = True
                    if self.stats.blackholes:
                        self.stats.blackholes[-1].dropped_frames += 1
                    continue
                if not self._pass(conn, frame, upward):
                    break
                delay = self.latency_s + (
                    self._random.uniform(0, self.jitter_s) if self.jitter_s else 0
                )
                if delay > 0:
                    self.stats.delayed_frames += 1
                last_due = max(last_due, time.monotonic() + delay)  # in order, whatever jitter
                queue.put_nowait((last_due, frame))
        except (ConnectionError, asyncio.IncompleteReadError, OSError):
            pass
        finally:
            queue.put_nowait(None)
            with contextlib.suppress(Exception):
                await sender
            if not conn.closed:
                with contextlib.suppress(Exception):
                    writer.write_eof()

    def _pass(self, conn: _Connection, frame: bytes, upward: bool) -> bool:
        """Count the frame and apply a reset it meets; False when the connection was reset."""
        if upward:
            self.stats.frames_up += 1
            if len(frame) >= 4 + _REQUEST_HEAD.size:
                api, _version, correlation = _REQUEST_HEAD.unpack_from(frame, 4)
                doomed = self._take_reset(api)
                if doomed is not None:
                    conn.doomed[correlation] = doomed
            return True
        self.stats.frames_down += 1
        if conn.doomed and len(frame) >= 8:
            (correlation,) = _CORRELATION.unpack_from(frame, 4)
            api = conn.doomed.pop(correlation, None)
            if api is not None:  # the broker answered: the client must not hear it
                self.stats.resets.append(ResetFired(now_ms(), api))
                log.info("fault proxy: reset a connection before its %s response", api)
                conn.reset()
                return False
        return True

    @staticmethod
    async def _read_frame(reader: asyncio.StreamReader) -> bytes | None:
        try:
            head = await reader.readexactly(4)
        except asyncio.IncompleteReadError:
            return None
        (size,) = _SIZE.unpack(head)
        if not 0 <= size <= MAX_FRAME_BYTES:
            raise ConnectionError(f"a frame of {size} bytes: not a Kafka stream")
        return head + await reader.readexactly(size)

    async def _send(
        self,
        conn: _Connection,
        queue: asyncio.Queue[tuple[float, bytes] | None],
        writer: asyncio.StreamWriter,
        bucket: _Bucket,
    ) -> None:
        while True:
            item = await queue.get()
            if item is None or conn.closed:
                return
            due, frame = item
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            throttle = bucket.wait_s(len(frame))
            if throttle > 0:
                self.stats.throttled_s += throttle
                await asyncio.sleep(throttle)
            if self._in_blackhole():  # due during a blackhole: dropped too
                conn.lost_bytes = True
                continue
            if conn.closed:
                return
            writer.write(frame)
            await writer.drain()

"""A real local HTTP price service whose answers change over time: an external call that a
re-executed batch cannot reproduce. ``GET /rate?item=<id>`` returns JSON ``{"rate": float}``.

Started on 127.0.0.1 and a free port, in a thread (tests) or as a process
(``python -m recovery_lib.runtime.price_service --port N``).
"""

from __future__ import annotations

import argparse
import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        query = parse_qs(urlparse(self.path).query)
        item = int(query.get("item", ["0"])[0])
        # Moves every 10 ms: two calls for the same item a moment apart disagree.
        rate = 1.0 + ((time.time_ns() // 10_000_000 + item) % 1000) / 10_000
        body = json.dumps({"item": item, "rate": rate}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


class PriceService:
    def __init__(self, port: int = 0) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> PriceService:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    with PriceService(args.port) as service:
        logging.getLogger(__name__).info("price service at %s", service.url)
        threading.Event().wait()

"""A TCP proxy in front of a real server that misbehaves on demand, the ways a network or an
overloaded server does: answers held back, bodies trickled, requests swallowed, huge bodies.

Modes (`proxy.mode`), applied to every `every`-th answer:
- "pass": forward both ways untouched;
- "stall": swallow the request, never answer (the connection stays open);
- "hold": forward the answer only after `hold` seconds;
- "trickle": forward the answer `chunk` bytes at a time, `gap` seconds apart;
- "huge": answer 200 at once with an endless JSON body, never asking the server.

`open_connections` counts client connections the proxy still holds open, so a test can see the
client closed the ones it gave up on.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time

HUGE_HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000000000\r\n\r\n"
             b'{"results": [')


class SlowProxy:
    def __init__(self, upstream: tuple[str, int], *, mode: str = "pass", every: int = 1, hold: float = 2.0,
                 chunk: int = 64, gap: float = 0.05) -> None:
        self.upstream = upstream
        self.mode, self.every, self.hold, self.chunk, self.gap = mode, every, hold, chunk, gap
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.requests = 0
        self.open_connections = 0
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, name="slow-proxy", daemon=True).start()

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self.listener.close()

    def wait_closed(self, timeout: float = 2.0) -> int:
        """Open client connections once they are all closed, or after `timeout`."""
        end = time.monotonic() + timeout
        while self.open_connections and time.monotonic() < end:
            time.sleep(0.01)
        return self.open_connections

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self._lock:
                self.open_connections += 1
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        answer: dict[str, object] = {"mode": "pass", "fresh": False}  # how the latest request's answer is sent
        try:
            upstream = socket.create_connection(self.upstream)
            threading.Thread(target=self._answers, args=(upstream, client, answer), daemon=True).start()
            while data := client.recv(65536):
                if data[:4] in (b"POST", b"GET ", b"PUT ", b"DELE"):
                    with self._lock:
                        self.requests += 1
                        misbehave = self.requests % self.every == 0
                    answer.update(mode=self.mode if misbehave else "pass", fresh=True)
                    if answer["mode"] == "huge":
                        threading.Thread(target=self._huge, args=(client,), daemon=True).start()
                        continue
                if answer["mode"] in ("stall", "huge"):
                    continue  # swallowed: the server never hears of it
                upstream.sendall(data)
        except OSError:
            pass
        finally:
            for s in (client, upstream):
                if s is not None:
                    with contextlib.suppress(OSError):
                        s.shutdown(socket.SHUT_RDWR)
                    s.close()
            with self._lock:
                self.open_connections -= 1

    def _answers(self, upstream: socket.socket, client: socket.socket, answer: dict[str, object]) -> None:
        try:
            while data := upstream.recv(65536):
                mode, fresh = answer["mode"], answer["fresh"]
                answer["fresh"] = False
                if mode == "hold" and fresh:
                    time.sleep(self.hold)
                if mode == "trickle":
                    for i in range(0, len(data), self.chunk):
                        client.sendall(data[i:i + self.chunk])
                        time.sleep(self.gap)
                else:
                    client.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            client.shutdown(socket.SHUT_RDWR)

    @staticmethod
    def _huge(client: socket.socket) -> None:
        try:
            client.sendall(HUGE_HEAD)
            filler = b'{"id": "x", "text": "", "type": "world"},' * 1000
            while True:
                client.sendall(filler)
        except OSError:
            pass

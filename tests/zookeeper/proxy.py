"""A TCP proxy a test can cut: a kazoo client connected through it loses its
connection (SUSPENDED) while its session lives on in ZooKeeper."""

from __future__ import annotations

import contextlib
import socket
import threading


class Proxy:
    def __init__(self, target_port: int) -> None:
        self.target = ("127.0.0.1", target_port)
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen()
        self.port = int(self.listener.getsockname()[1])
        self.sockets: list[socket.socket] = []
        self.open = True
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # cut: the listener is closed
            server = socket.create_connection(self.target)
            self.sockets += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        """Every connection through it closed, and no new one taken."""
        self.open = False
        # shutdown, not close alone: it wakes the accept() blocked in another thread.
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        for each in self.sockets:
            with contextlib.suppress(OSError):
                each.shutdown(socket.SHUT_RDWR)
            each.close()

    def close(self) -> None:
        if self.open:
            self.cut()

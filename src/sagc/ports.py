"""A free TCP port on this machine, for a rendezvous that nothing else assigned."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port the OS reports free now (bound to port 0 and released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]

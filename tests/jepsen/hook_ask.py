"""What the hook scripts run by batonctl (restart_node.py, upgrade_node.py)
share: one request to the test that started them, over its Unix socket.
Only the standard library's socket module, so that a hook costs batonctl
little."""

import socket


def ask(path, line, timeout_s):
    """Send one line to the Unix socket at path and return the answer (up
    to its newline, or what came before the test closed the connection),
    stripped; "" for no answer. OSError if the socket cannot be reached or
    the answer takes more than timeout_s."""
    reply = b""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout_s)
        s.connect(path)
        s.sendall((line + "\n").encode())
        while not reply.endswith(b"\n"):
            chunk = s.recv(4096)
            if not chunk:
                break
            reply += chunk
    return reply.decode(errors="replace").strip()

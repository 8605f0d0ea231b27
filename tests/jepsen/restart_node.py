#!/usr/bin/python3
"""The restart command the fault harness gives `batonctl roll`
(`--roll-binaries`, tests/jepsen/roll.py):

    restart_node.py SOCKET ID

asks the harness, over its Unix socket, to restart node ID on the new
binary, and returns once the node answers PING again (exit 0) or the
harness says why it could not (exit 1, the reason on stderr). The harness
keeps owning every node's PID and starts the nodes from its main thread
(PR_SET_PDEATHSIG follows the starting thread); this script starts
nothing. It imports only the standard library's socket module so that
each restart costs batonctl as little as possible.
"""

import socket
import sys

ANSWER_TIMEOUT_S = 40.0  # above the harness's SIGTERM grace + start bound


def main(argv):
    if len(argv) != 2 or not argv[1].isdigit():
        print("usage: restart_node.py SOCKET ID", file=sys.stderr)
        return 2
    path, node_id = argv
    reply = b""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(ANSWER_TIMEOUT_S)
            s.connect(path)
            s.sendall(f"restart {node_id}\n".encode())
            while not reply.endswith(b"\n"):
                chunk = s.recv(4096)
                if not chunk:
                    break
                reply += chunk
    except OSError as e:
        print(f"restart_node.py: cannot reach the harness at {path}: {e}",
              file=sys.stderr)
        return 1
    text = reply.decode(errors="replace").strip()
    if text != "ok":
        why = text or "the harness closed the connection without an answer"
        print(f"restart_node.py: node {node_id}: {why}", file=sys.stderr)
        return 1
    print(f"node {node_id} restarted on the new binary, answers PING")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

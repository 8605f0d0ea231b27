#!/usr/bin/python3
"""The restart command the fault harness gives `batonctl roll`
(`--roll-binaries`, tests/jepsen/roll.py):

    restart_node.py SOCKET ID

asks the harness, over its Unix socket, to restart node ID on the new
binary, and returns once the node answers PING again (exit 0) or the
harness says why it could not (exit 1, the reason on stderr). The harness
keeps owning every node's PID and starts the nodes from its main thread
(PR_SET_PDEATHSIG follows the starting thread); this script starts
nothing. It imports only the standard library's socket module (through
hook_ask.py) so that each restart costs batonctl as little as possible.
"""

import sys

import hook_ask

ANSWER_TIMEOUT_S = 40.0  # above the harness's SIGTERM grace + start bound


def main(argv):
    if len(argv) != 2 or not argv[1].isdigit():
        print("usage: restart_node.py SOCKET ID", file=sys.stderr)
        return 2
    path, node_id = argv
    try:
        text = hook_ask.ask(path, f"restart {node_id}", ANSWER_TIMEOUT_S)
    except OSError as e:
        print(f"restart_node.py: cannot reach the harness at {path}: {e}",
              file=sys.stderr)
        return 1
    if text != "ok":
        why = text or "the harness closed the connection without an answer"
        print(f"restart_node.py: node {node_id}: {why}", file=sys.stderr)
        return 1
    print(f"node {node_id} restarted on the new binary, answers PING")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

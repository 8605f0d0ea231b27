#!/usr/bin/python3
"""The commands tests/jepsen/test_upgrade_path.py gives `batonctl upgrade`
(--restart, --start-new, --stop-old):

    upgrade_node.py SOCKET VERB ID [RELEASE]

asks the test, over its Unix socket, to restart node ID on RELEASE
(restart), start new node ID (start) or stop old node ID (stop), and
returns once the test answers: exit 0 on "ok", 1 with the test's reason on
stderr otherwise. The test owns every node's PID and starts the nodes from
its main thread; this script starts nothing.
"""

import sys

import hook_ask

ANSWER_TIMEOUT_S = 50.0  # above the test's stop grace + start bound


def main(argv):
    if len(argv) not in (3, 4) or not argv[2].isdigit():
        print("usage: upgrade_node.py SOCKET VERB ID [RELEASE]",
              file=sys.stderr)
        return 2
    path = argv[0]
    try:
        text = hook_ask.ask(path, " ".join(argv[1:]), ANSWER_TIMEOUT_S)
    except OSError as e:
        print(f"upgrade_node.py: cannot reach the test at {path}: {e}",
              file=sys.stderr)
        return 1
    if text != "ok":
        print(f"upgrade_node.py: {' '.join(argv[1:])}: "
              f"{text or 'no answer'}", file=sys.stderr)
        return 1
    print(f"{argv[1]} node {argv[2]}: done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

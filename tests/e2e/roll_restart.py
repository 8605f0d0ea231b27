#!/usr/bin/python3
"""The restart command test_roll.py gives `batonctl roll`:

    roll_restart.py DIR ID [RELEASE]

asks the test process, which owns the node processes, to restart node ID
(at RELEASE when given, batonctl roll's {release}; else at the release the
test chose):
it writes a request file into DIR and waits (bounded) for the test's
answer file, then exits with the status the test wrote (0: restarted).
The test keeps owning every PID it started; this script starts nothing.
"""

import os
import sys
import time

ANSWER_TIMEOUT_S = 60.0
POLL_S = 0.05


def main():
    if len(sys.argv) not in (3, 4) or not sys.argv[2].isdigit():
        print("usage: roll_restart.py DIR ID [RELEASE]", file=sys.stderr)
        return 2
    folder, node_id = sys.argv[1], sys.argv[2]
    release = sys.argv[3] if len(sys.argv) == 4 else None
    name = f"{node_id}-{os.getpid()}-{time.monotonic_ns()}"
    request = os.path.join(folder, name + ".req")
    answer = os.path.join(folder, name + ".done")
    with open(request + ".tmp", "w") as f:
        f.write(node_id if release is None else f"{node_id} {release}")
    os.rename(request + ".tmp", request)  # the test sees it whole
    end = time.monotonic() + ANSWER_TIMEOUT_S
    while time.monotonic() < end:
        try:
            with open(answer) as f:
                code, _, message = f.read().partition(" ")
        except FileNotFoundError:
            time.sleep(POLL_S)
            continue
        print(message.strip() or f"node {node_id}: status {code}")
        return int(code)
    print(f"the test did not restart node {node_id} within "
          f"{ANSWER_TIMEOUT_S:.0f} s")
    return 1


if __name__ == "__main__":
    sys.exit(main())

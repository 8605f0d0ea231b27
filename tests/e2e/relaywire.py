"""The relay protocol (docs/relay-protocol.md) in Python, written from the
specification with struct and sockets, apart from the C codec, so that the
end-to-end tests check baton-relay against the document, not against its own
code. The checksum is XXH3-64 from the system's libxxhash."""

import ctypes
import ctypes.util
import socket
import struct
import time

_xxh = ctypes.CDLL(ctypes.util.find_library("xxhash") or "libxxhash.so.0")
_xxh.XXH3_64bits_withSeed.restype = ctypes.c_uint64
_xxh.XXH3_64bits_withSeed.argtypes = [ctypes.c_char_p, ctypes.c_size_t,
                                      ctypes.c_uint64]

MAGIC = b"\xbaRLY"
HEADER = struct.Struct("<4sHHIQ")

HELLO, WELCOME, VIEW, LEAVE, DATA, ACK, ACTIVATE, DEACTIVATE = range(1, 9)
STATUS, STATUS_REPLY, PING, PONG, ERROR = range(9, 14)
NAMES = {1: "HELLO", 2: "WELCOME", 3: "VIEW", 4: "LEAVE", 5: "DATA",
         6: "ACK", 7: "ACTIVATE", 8: "DEACTIVATE", 9: "STATUS",
         10: "STATUS_REPLY", 11: "PING", 12: "PONG", 13: "ERROR"}

BAD_MAGIC, BAD_TYPE, CHECKSUM = 1, 2, 7
NOT_REGISTERED, UNEXPECTED, REPLACED, TIMEOUT = 32, 33, 34, 39


def xxh3(data, seed=0):
    return _xxh.XXH3_64bits_withSeed(bytes(data), len(data), seed)


def frame(ftype, body):
    head = MAGIC + struct.pack("<HHI", ftype, 0, len(body))
    checksum = xxh3(body, xxh3(head))
    return head + struct.pack("<Q", checksum) + body


def s(text):
    b = text.encode() if isinstance(text, str) else text
    return struct.pack("<H", len(b)) + b


def peer(cluster, node, incarnation):
    return s(cluster) + struct.pack("<QQ", node, incarnation)


def hello(cluster, node, incarnation, release=(1, 3, 0), address=None):
    address = address or f"127.0.0.1:{7000 + node}"
    return frame(HELLO, s(cluster) + struct.pack("<QQ", node, incarnation) +
                 struct.pack("<HHH", *release) + s(address))


def data(kind, to, seq, first, payload):
    body = (bytes([kind]) + peer(*to) + struct.pack("<QQ", seq, first) +
            struct.pack("<QI", xxh3(payload), len(payload)) + payload)
    return frame(DATA, body)


def ack(kind, source, seq):
    return frame(ACK, bytes([kind]) + peer(*source) + struct.pack("<Q", seq))


def leave(reason):
    return frame(LEAVE, s(reason))


class Reader:
    def __init__(self, body):
        self.b, self.p = body, 0

    def take(self, fmt):
        v = struct.unpack_from("<" + fmt, self.b, self.p)
        self.p += struct.calcsize("<" + fmt)
        return v if len(v) > 1 else v[0]

    def str(self):
        n = self.take("H")
        self.p += n
        return self.b[self.p - n:self.p].decode(errors="replace")

    def peer(self):
        return (self.str(), self.take("Q"), self.take("Q"))


def entry(tag, value):
    """One extension entry: tag, length, value."""
    return struct.pack("<HH", tag, len(value)) + value


def entries(area):
    """The {tag: value} of an extension area."""
    out, p = {}, 0
    while p < len(area):
        tag, n = struct.unpack_from("<HH", area, p)
        out[tag] = area[p + 4:p + 4 + n]
        p += 4 + n
    return out


# Allocated tags (docs/relay-protocol.md "Allocated tags").
ADMIN_REQUEST, ADMIN_RESULT, NODE_STATE = 0x0101, 0x0102, 0x0103
ADMIN_ACTIVATE, ADMIN_DEACTIVATE = 1, 2


def admin_request(secret, op, relay_incarnation, nonce=None, ts_ms=None):
    """An ADMIN_REQUEST entry proven with the admin secret's bytes, computed
    from the document with Python's hmac."""
    import hashlib
    import hmac
    import os
    nonce = nonce if nonce is not None else os.urandom(16)
    ts_ms = ts_ms if ts_ms is not None else int(time.time() * 1000)
    key = hmac.new(secret, b"baton relay admin key v1\0",
                   hashlib.sha256).digest()
    fields = (bytes([op]) + struct.pack("<Q", relay_incarnation) + nonce +
              struct.pack("<Q", ts_ms))
    mac = hmac.new(key, b"baton relay admin v1\0" + fields,
                   hashlib.sha256).digest()
    return entry(ADMIN_REQUEST, fields + mac)


def admin_result(status_reply):
    """(code, text) of a STATUS_REPLY's ADMIN_RESULT, or None."""
    v = entries(status_reply["ext"]).get(ADMIN_RESULT)
    if v is None:
        return None
    return struct.unpack_from("<H", v)[0], v[2:].decode(errors="replace")


def decode(ftype, body):
    """A dict of the fields of a frame sent to a node."""
    r = Reader(body)
    f = {"type": NAMES[ftype]}
    if ftype == WELCOME:
        f.update(code=r.take("H"), incarnation=r.take("Q"), reason=r.str())
    elif ftype == VIEW:
        f.update(number=r.take("Q"), nodes=[])
        for _ in range(r.take("H")):
            end = r.take("H") + r.p
            f["nodes"].append(dict(cluster=r.str(), node=r.take("Q"),
                                   incarnation=r.take("Q"),
                                   release=r.take("HHH"), address=r.str(),
                                   connected=r.take("B")))
            r.p = end
    elif ftype in (DATA, ACK):
        f.update(kind=r.take("B"), peer=r.peer(), seq=r.take("Q"))
        if ftype == DATA:
            f.update(first=r.take("Q"), checksum=r.take("Q"))
            n = r.take("I")
            f["payload"] = body[r.p:r.p + n]
            assert f["checksum"] == xxh3(f["payload"]), "payload checksum"
    elif ftype == STATUS_REPLY:
        f.update(incarnation=r.take("Q"), view=r.take("Q"),
                 active=r.take("B"), relayed=r.take("Q"), bytes=r.take("Q"),
                 dropped=r.take("Q"), nodes=[])
        for _ in range(r.take("H")):
            end = r.take("H") + r.p
            f["nodes"].append(dict(cluster=r.str(), node=r.take("Q"),
                                   incarnation=r.take("Q"),
                                   connected=r.take("B"),
                                   queue_messages=r.take("I"),
                                   queue_bytes=r.take("Q"),
                                   messages_in=r.take("Q"),
                                   messages_out=r.take("Q")))
            r.p = end
        f["ext"] = body[r.p:]
    elif ftype in (PING, PONG):
        f["token"] = r.take("Q")
    elif ftype == ERROR:
        f.update(code=r.take("H"), frame_type=r.take("H"), text=r.str())
    return f


class Conn:
    """One TCP connection to the relay; every wait is bounded."""

    def __init__(self, port, host="127.0.0.1", timeout=10.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.timeout = timeout
        self.buf = b""

    def send(self, raw):
        self.sock.sendall(raw)

    def _fill(self, n, deadline):
        while len(self.buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no frame within {self.timeout} s")
            self.sock.settimeout(left)
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed by the relay")
            self.buf += chunk

    def recv(self, answer_pings=True):
        """The next frame (a dict), answering the relay's PINGs."""
        deadline = time.monotonic() + self.timeout
        while True:
            self._fill(HEADER.size, deadline)
            magic, ftype, flags, blen, checksum = HEADER.unpack_from(self.buf)
            assert magic == MAGIC and flags == 0, self.buf[:20]
            self._fill(HEADER.size + blen, deadline)
            body = self.buf[HEADER.size:HEADER.size + blen]
            assert checksum == xxh3(body, xxh3(self.buf[:12])), "checksum"
            self.buf = self.buf[HEADER.size + blen:]
            f = decode(ftype, body)
            if ftype == PING and answer_pings:
                self.send(frame(PONG, struct.pack("<Q", f["token"])))
                continue
            return f

    def expect(self, ftype):
        f = self.recv()
        assert f["type"] == NAMES[ftype], f
        return f

    def closed(self):
        """True once the relay closed the connection (bounded wait)."""
        try:
            self._fill(len(self.buf) + 1, time.monotonic() + self.timeout)
        except ConnectionError:
            return True
        return False

    def close(self):
        self.sock.close()

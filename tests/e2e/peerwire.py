"""Just enough of the peer protocol (proto/peer.proto) to talk to a node's
peer port from a test: frames are a 4-byte little-endian length and one
protobuf Envelope. Hand-rolled protobuf (varints and length-delimited
fields only), since python3-protobuf is not among the project's packages."""

import socket
import struct

VARINT, LEN = 0, 2


def varint(n):
    assert n >= 0
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field_varint(number, value):
    return varint(number << 3 | VARINT) + varint(value)


def field_bytes(number, value):
    if isinstance(value, str):
        value = value.encode()
    return varint(number << 3 | LEN) + varint(len(value)) + value


def handshake_frame(cluster_id, node_id, proto_min, proto_max,
                    release=(0, 1, 0), machine_max=1,
                    peer_addr="127.0.0.1:1"):
    """A framed Envelope{handshake: Handshake{...}}."""
    rel = (field_varint(1, release[0]) + field_varint(2, release[1]) +
           field_varint(3, release[2]))
    profile = (field_bytes(1, rel) + field_varint(2, proto_min) +
               field_varint(3, proto_max) + field_varint(4, machine_max))
    hs = (field_bytes(1, cluster_id) + field_varint(2, node_id) +
          field_bytes(3, profile) + field_bytes(4, peer_addr))
    env = field_bytes(1, hs)
    return struct.pack("<I", len(env)) + env


def read_varint(buf, pos):
    shift = value = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ValueError("bad varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, pos


def decode_fields(buf):
    """{field number: last value} of a message's varint and
    length-delimited fields (others are skipped or rejected)."""
    out, pos = {}, 0
    while pos < len(buf):
        key, pos = read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == VARINT:
            out[number], pos = read_varint(buf, pos)
        elif wire == LEN:
            n, pos = read_varint(buf, pos)
            out[number] = bytes(buf[pos:pos + n])
            pos += n
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise ValueError(f"wire type {wire}")
    return out


def recv_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def read_handshake_reply(sock):
    """The HandshakeReply a node answers with, as a dict (accepted, proto,
    reason), or None if it closed the connection without one."""
    head = recv_exact(sock, 4)
    if head is None:
        return None
    (n,) = struct.unpack("<I", head)
    assert n < 1 << 20, f"reply frame of {n} bytes"
    body = recv_exact(sock, n)
    if body is None:
        return None
    env = decode_fields(body)
    assert 2 in env, f"not a handshake reply: {env}"
    r = decode_fields(env[2])
    return {"accepted": bool(r.get(1, 0)), "proto": r.get(2, 0),
            "reason": r.get(3, b"").decode(errors="replace")}


def connect(port, timeout=5.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.settimeout(timeout)
    return s

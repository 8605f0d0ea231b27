"""Just enough of the peer protocol (proto/peer.proto) to talk to a node's
peer port from a test: frames are a 4-byte little-endian length and one
protobuf Envelope, and from protocol 4 on the frames after the handshake
end with XXH3-64 of both (8 bytes, little-endian; computed with
libxxhash through ctypes, the library batond links). Hand-rolled protobuf
(varints and length-delimited fields only), since python3-protobuf is not
among the project's packages.

Unless told otherwise it speaks as the tree's own release (the newest row
of src/core/version.c, conftest.release_profiles()): TREE_RELEASE, its
protocol range and machine_max, and frames after the handshake in
TREE_PROTO, the highest protocol it speaks.

Every field number used here comes from FIELDS, which
test_bad_input.py::test_peerwire_matches_the_proto checks against
proto/peer.proto, so this encoder cannot drift from the schema."""

import ctypes
import ctypes.util
import hashlib
import hmac
import os
import socket
import struct

from conftest import release_profiles, release_table

VARINT, LEN = 0, 2

# message -> field name -> (number, wire type), as in proto/peer.proto.
FIELDS = {
    "Release": {"major": (1, VARINT), "minor": (2, VARINT),
                "patch": (3, VARINT)},
    "Profile": {"release": (1, LEN), "proto_min": (2, VARINT),
                "proto_max": (3, VARINT), "machine_max": (4, VARINT)},
    "Handshake": {"cluster_id": (1, LEN), "node_id": (2, VARINT),
                  "profile": (3, LEN), "peer_addr": (4, LEN),
                  "auth_nonce": (5, LEN), "cluster_uuid": (6, LEN)},
    "HandshakeReply": {"accepted": (1, VARINT), "proto": (2, VARINT),
                       "reason": (3, LEN), "self": (4, LEN),
                       "cluster": (5, LEN), "auth_mac": (6, LEN)},
    "HandshakeAuth": {"mac": (1, LEN)},
    "ClusterView": {"leader_id": (1, VARINT), "leader_peer_addr": (2, LEN),
                    "versions": (3, LEN), "strict_release": (4, LEN)},
    "JoinRequest": {"node_id": (1, VARINT), "peer_addr": (2, LEN),
                    "client_addr": (3, LEN), "profile": (4, LEN)},
    "JoinReply": {"accepted": (1, VARINT), "reason": (2, LEN),
                  "leader_id": (3, VARINT), "leader_peer_addr": (4, LEN),
                  "leader_client_addr": (5, LEN), "leader": (6, LEN)},
    "Member": {"id": (1, VARINT), "role": (2, VARINT)},
    "MemberVersions": {"id": (1, VARINT), "profile": (2, LEN)},
    "VersionState": {"machine": (1, VARINT), "floor": (2, LEN),
                     "members": (3, LEN)},
    "SnapshotMeta": {"index": (1, VARINT), "term": (2, VARINT),
                     "members": (3, LEN), "config_index": (4, VARINT),
                     "versions": (5, LEN), "versions_index": (6, VARINT)},
    "Snapshot": {"meta": (1, LEN), "total_len": (2, VARINT),
                 "offset": (3, VARINT), "chunk": (4, LEN),
                 "last_chunk": (5, VARINT)},
    "Vote": {"last_log_index": (1, VARINT), "last_log_term": (2, VARINT),
             "pre_vote": (3, VARINT)},
    "Append": {"prev_index": (1, VARINT), "prev_term": (2, VARINT),
               "leader_commit": (3, VARINT)},
    "Raft": {"type": (1, VARINT), "term": (2, VARINT), "from": (3, VARINT),
             "to": (4, VARINT), "vote": (5, LEN), "append": (7, LEN),
             "snapshot": (9, LEN)},
    "Command": {"argv": (1, LEN)},
    "Forward": {"request_id": (1, VARINT), "argv": (2, LEN),
                "commands": (3, LEN), "client_auth": (6, LEN)},
    "ForwardReply": {"request_id": (1, VARINT), "resp_reply": (2, LEN),
                     "error": (3, LEN)},
    "Envelope": {"handshake": (1, LEN), "handshake_reply": (2, LEN),
                 "raft": (3, LEN), "forward": (4, LEN),
                 "forward_reply": (5, LEN), "join": (6, LEN),
                 "join_reply": (7, LEN), "handshake_auth": (8, LEN)},
}

RAFT_VOTE, RAFT_APPEND, RAFT_SNAPSHOT = 1, 3, 5  # enum baton_msg_type
VOTER = 1


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


def message(name, **values):
    """Encode message `name` from field values (ints, bools, str or bytes
    for scalars; bytes of an encoded submessage; a list for a repeated
    field). Fields are written in the order given; None is left out."""
    out = b""
    for key, value in values.items():
        number, wire = FIELDS[name][key.rstrip("_")]
        for v in value if isinstance(value, list) else [value]:
            if v is None:
                continue
            if wire == VARINT:
                out += field_varint(number, int(v))
            else:
                out += field_bytes(number, v)
    return out


TREE_RELEASE = tuple(int(x) for x in release_table()[-1].split("."))
TREE_PROTO_MIN, TREE_PROTO_MAX, TREE_MACHINE_MAX = \
    release_profiles()[release_table()[-1]]
TREE_PROTO = TREE_PROTO_MAX
CHECKSUMMED_SINCE = 4  # protocol 4: every frame after the handshake

_xxhash = ctypes.CDLL(ctypes.util.find_library("xxhash") or "libxxhash.so.0")
_xxhash.XXH3_64bits.restype = ctypes.c_uint64
_xxhash.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]


def checksum(data):
    """XXH3-64 of data (src/util/checksum.c's baton__checksum)."""
    return _xxhash.XXH3_64bits(data, len(data))


def frame(env, proto=0):
    """One frame: the length prefix and the envelope, then, in protocol 4
    and later (`proto`; 0: a frozen handshake frame), their checksum."""
    out = struct.pack("<I", len(env)) + env
    if proto >= CHECKSUMMED_SINCE:
        out += struct.pack("<Q", checksum(out))
    return out


def profile(release=(0, 1, 0), proto_min=1, proto_max=1, machine_max=1):
    rel = message("Release", major=release[0], minor=release[1],
                  patch=release[2])
    return message("Profile", release=rel, proto_min=proto_min,
                   proto_max=proto_max, machine_max=machine_max)


def handshake(cluster_id, node_id, proto_min, proto_max, release=(0, 1, 0),
              machine_max=1, peer_addr="127.0.0.1:1", nonce=None,
              cluster_uuid=None):
    """An encoded Handshake; `nonce` (32 bytes) offers peer
    authentication; `cluster_uuid` (16 bytes) claims a cluster."""
    return message("Handshake", cluster_id=cluster_id, node_id=node_id,
                   profile=profile(release, proto_min, proto_max,
                                   machine_max),
                   peer_addr=peer_addr, auth_nonce=nonce,
                   cluster_uuid=cluster_uuid)


def handshake_frame(cluster_id, node_id, proto_min, proto_max,
                    release=(0, 1, 0), machine_max=1,
                    peer_addr="127.0.0.1:1", nonce=None, cluster_uuid=None):
    """A framed Envelope{handshake: Handshake{...}}."""
    return frame(message("Envelope", handshake=handshake(
        cluster_id, node_id, proto_min, proto_max, release, machine_max,
        peer_addr, nonce, cluster_uuid)))


# ---- peer authentication (docs/peer-protocol.md, "Peer authentication") ---

NONCE_LEN = 32


def auth_mac(secret, role, cluster_id, dialler, acceptor, nonce_dialler,
             nonce_acceptor):
    """The proof of `role` ("dialler" or "acceptor"): HMAC-SHA-256 under the
    secret over the label, the cluster id, both node ids and both
    nonces."""
    cid = cluster_id.encode()
    msg = (f"baton peer auth v1 {role}".encode() + b"\0" + bytes([len(cid)])
           + cid + struct.pack("<QQ", dialler, acceptor) + nonce_dialler
           + nonce_acceptor)
    return hmac.new(secret, msg, hashlib.sha256).digest()


def handshake_auth_frame(mac):
    """A framed Envelope{handshake_auth: HandshakeAuth{mac}}."""
    return frame(message("Envelope", handshake_auth=message(
        "HandshakeAuth", mac=mac)))


def client_auth_proof(password):
    """What a forward carries to prove its client gave `password`."""
    return hashlib.sha256(b"baton client auth v1\0"
                          + password.encode()).digest()


def open_peer(port, node_id, secret=None, cluster_id="baton",
              proto_min=TREE_PROTO_MIN, proto_max=TREE_PROTO_MAX,
              release=TREE_RELEASE, machine_max=TREE_MACHINE_MAX, nonce=None,
              timeout=5.0):
    """Dial a node's peer port as node `node_id` and run the handshake:
    with `secret` (bytes), offer a nonce and, if the node proves it holds
    the same secret, send our proof. Returns (socket, reply dict with
    "proven": whether the node's proof checked out); the caller closes
    the socket. `nonce` without `secret` offers authentication and stops
    after the node's reply (the caller sends what follows)."""
    s = connect(port, timeout)
    if secret is not None and nonce is None:
        nonce = os.urandom(NONCE_LEN)
    s.sendall(handshake_frame(cluster_id, node_id, proto_min, proto_max,
                              release, machine_max, nonce=nonce))
    reply = read_handshake_reply(s)
    if reply is None or not reply["accepted"] or nonce is None:
        return s, reply
    if secret is None:
        return s, reply  # the caller says what comes next
    theirs = reply["self"]["auth_nonce"]
    want = auth_mac(secret, "acceptor", cluster_id, node_id,
                    reply["self"]["node_id"], nonce, theirs)
    reply["proven"] = hmac.compare_digest(want, reply["auth_mac"])
    if reply["proven"]:
        s.sendall(handshake_auth_frame(auth_mac(
            secret, "dialler", cluster_id, node_id,
            reply["self"]["node_id"], nonce, theirs)))
    return s, reply


def raft_frame(type_, term, from_id, to_id, body, proto=TREE_PROTO):
    """A framed Raft message of `type_` (RAFT_VOTE or RAFT_APPEND) with its
    encoded body (vote() or append()), in protocol `proto`'s frame."""
    key = {RAFT_VOTE: "vote", RAFT_APPEND: "append"}[type_]
    raft = message("Raft", type=type_, term=term, from_=from_id, to=to_id,
                   **{key: body})
    return frame(message("Envelope", raft=raft), proto)


def append(prev_index=0, prev_term=0, leader_commit=0):
    return message("Append", prev_index=prev_index, prev_term=prev_term,
                   leader_commit=leader_commit)


def vote(last_log_index=0, last_log_term=0):
    return message("Vote", last_log_index=last_log_index,
                   last_log_term=last_log_term)


def forward_frame(request_id, argv, client_auth=None, proto=TREE_PROTO):
    """A framed Forward of one command, in the form of protocol 3 and later
    (the `commands` list), in protocol `proto`'s frame."""
    cmd = message("Command", argv=[a if isinstance(a, bytes) else a.encode()
                                   for a in argv])
    return frame(message("Envelope", forward=message(
        "Forward", request_id=request_id, commands=cmd,
        client_auth=client_auth)), proto)


def read_forward_reply(sock, proto=TREE_PROTO):
    """The next ForwardReply on a ready connection of protocol `proto`, as
    (request_id, RESP bytes or None, error text or None), or None if the
    connection closed first. Other frames (Raft) are skipped."""
    while True:
        env = read_envelope(sock, proto)
        if env is None:
            return None
        if "forward_reply" not in env:
            continue
        r = fields("ForwardReply", env["forward_reply"])
        err = r.get("error")
        return (r.get("request_id", 0), r.get("resp_reply"),
                None if err is None else err.decode(errors="replace"))


def handshake_reply_frame(accepted, proto, reason, self_handshake):
    """A framed Envelope{handshake_reply: HandshakeReply{...}};
    `self_handshake` is an encoded Handshake (see handshake())."""
    return frame(message("Envelope", handshake_reply=message(
        "HandshakeReply", accepted=accepted, proto=proto, reason=reason,
        self=self_handshake)))


def version_state(machine, floor=None, rows=()):
    """VersionState; rows are (id, encoded Profile)."""
    fl = None if floor is None else message(
        "Release", major=floor[0], minor=floor[1], patch=floor[2])
    return message("VersionState", machine=machine, floor=fl,
                   members=[message("MemberVersions", id=i, profile=p)
                            for i, p in rows])


def snapshot_frame(term, from_id, to_id, index, members, versions=None,
                   versions_index=None, chunk=b"", last_chunk=True,
                   proto=TREE_PROTO):
    """A framed Raft Snapshot message (in protocol `proto`'s frame): one
    chunk of a snapshot of total_len len(chunk) at `index`, configuration
    `members` (voter ids), with the given encoded VersionState (None: leave
    the field out)."""
    meta = message("SnapshotMeta", index=index, term=term,
                   members=[message("Member", id=m, role=VOTER)
                            for m in members],
                   config_index=1, versions=versions,
                   versions_index=versions_index)
    snap = message("Snapshot", meta=meta, total_len=len(chunk),
                   chunk=chunk, last_chunk=last_chunk)
    raft = message("Raft", type=RAFT_SNAPSHOT, term=term, from_=from_id,
                   to=to_id, snapshot=snap)
    return frame(message("Envelope", raft=raft), proto)


def join_frame(node_id, peer_addr, client_addr, release=TREE_RELEASE,
               proto_min=TREE_PROTO_MIN, proto_max=TREE_PROTO_MAX,
               machine_max=TREE_MACHINE_MAX, proto=TREE_PROTO):
    """A framed Envelope{join: JoinRequest{...}} (every protocol version
    reads it alike; from 4 on the frame ends with its checksum)."""
    return frame(message("Envelope", join=message(
        "JoinRequest", node_id=node_id, peer_addr=peer_addr,
        client_addr=client_addr,
        profile=profile(release, proto_min, proto_max, machine_max))), proto)


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


def repeated(buf, number):
    """Every value of length-delimited field `number`, in order."""
    out, pos = [], 0
    while pos < len(buf):
        key, pos = read_varint(buf, pos)
        num, wire = key >> 3, key & 7
        if wire == VARINT:
            _, pos = read_varint(buf, pos)
        elif wire == LEN:
            n, pos = read_varint(buf, pos)
            if num == number:
                out.append(bytes(buf[pos:pos + n]))
            pos += n
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        else:
            raise ValueError(f"wire type {wire}")
    return out


def fields(name, buf):
    """A message's fields by name (see FIELDS), absent ones left out."""
    raw = decode_fields(buf)
    return {key: raw[number] for key, (number, _) in FIELDS[name].items()
            if number in raw}


def recv_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def read_envelope(sock, proto=0):
    """The next frame's Envelope fields by name, or None if the
    connection closed (or was reset) first. `proto`: the connection's
    protocol once its handshake is done (0 before: the handshake's frames);
    from 4 on the frame's checksum must match."""
    try:
        return _read_envelope(sock, proto)
    except ConnectionResetError:
        return None


def _read_envelope(sock, proto):
    head = recv_exact(sock, 4)
    if head is None:
        return None
    (n,) = struct.unpack("<I", head)
    assert n < 1 << 20, f"frame of {n} bytes"
    body = recv_exact(sock, n)
    if body is None:
        return None
    if proto >= CHECKSUMMED_SINCE:
        tail = recv_exact(sock, 8)
        if tail is None:
            return None
        assert struct.unpack("<Q", tail)[0] == checksum(head + body), \
            "a frame whose checksum differs"
    return fields("Envelope", body)


def parse_release(buf):
    r = fields("Release", buf)
    return (r.get("major", 0), r.get("minor", 0), r.get("patch", 0))


def parse_profile(buf):
    p = fields("Profile", buf)
    return {"release": parse_release(p.get("release", b"")),
            "proto_min": p.get("proto_min", 0),
            "proto_max": p.get("proto_max", 0),
            "machine_max": p.get("machine_max", 0)}


def parse_handshake(buf):
    h = fields("Handshake", buf)
    out = {"cluster_id": h.get("cluster_id", b"").decode(),
           "node_id": h.get("node_id", 0),
           "auth_nonce": h.get("auth_nonce"),
           "cluster_uuid": h.get("cluster_uuid")}
    out.update(parse_profile(h.get("profile", b"")))
    return out


def parse_cluster_view(buf):
    """A ClusterView as a dict: leader_id, leader_peer_addr, machine (the
    effective machine version), floor, strict_release (None if mixed
    releases are allowed) and rows ({id: profile dict})."""
    v = fields("ClusterView", buf)
    st = v.get("versions", b"")
    s = fields("VersionState", st)
    rows = {}
    for row in repeated(st, FIELDS["VersionState"]["members"][0]):
        r = fields("MemberVersions", row)
        rows[r.get("id", 0)] = parse_profile(r.get("profile", b""))
    strict = v.get("strict_release")
    return {"leader_id": v.get("leader_id", 0),
            "leader_peer_addr": v.get("leader_peer_addr", b"").decode(),
            "machine": s.get("machine", 0),
            "floor": parse_release(s.get("floor", b"")),
            "strict_release": None if strict is None
            else parse_release(strict),
            "rows": rows}


def read_handshake(sock):
    """The Handshake a dialling node opens with, as a dict, or None."""
    env = read_envelope(sock)
    if env is None:
        return None
    assert "handshake" in env, f"not a handshake: {env}"
    return parse_handshake(env["handshake"])


def read_handshake_reply(sock):
    """The HandshakeReply a node answers with, as a dict (accepted, proto,
    reason, self), or None if it closed the connection without one."""
    env = read_envelope(sock)
    if env is None:
        return None
    assert "handshake_reply" in env, f"not a handshake reply: {env}"
    r = fields("HandshakeReply", env["handshake_reply"])
    cluster = r.get("cluster")
    return {"accepted": bool(r.get("accepted", 0)),
            "proto": r.get("proto", 0),
            "reason": r.get("reason", b"").decode(errors="replace"),
            "self": parse_handshake(r.get("self", b"")),
            "cluster": None if cluster is None
            else parse_cluster_view(cluster),
            "auth_mac": r.get("auth_mac")}


def read_join_reply(sock, proto=TREE_PROTO):
    """The next JoinReply on a ready connection of protocol `proto`, as a
    dict, or None if the connection closed first. Other frames (Raft) are
    skipped."""
    while True:
        env = read_envelope(sock, proto)
        if env is None:
            return None
        if "join_reply" not in env:
            continue
        r = fields("JoinReply", env["join_reply"])
        return {"accepted": bool(r.get("accepted", 0)),
                "reason": r.get("reason", b"").decode(errors="replace"),
                "leader_id": r.get("leader_id", 0),
                "leader_peer_addr":
                    r.get("leader_peer_addr", b"").decode(),
                "leader_client_addr":
                    r.get("leader_client_addr", b"").decode(),
                "leader": parse_profile(r.get("leader", b""))}


def connect(port, timeout=5.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.settimeout(timeout)
    return s

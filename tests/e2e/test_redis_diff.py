"""A differential test of baton against redis-server 7.0, the key-value
commands (docs/kv.md): the same commands sent to both over raw RESP2 and
RESP3 (redisdiff.py compares reply types exactly: simple string vs bulk,
integer vs bulk, null vs empty array, maps, sets, nulls), every reply
compared.

Hand-written edge cases (wrong arity, WRONGTYPE, bad and overflowing
numbers, GETRANGE/SETRANGE ranges, expiry in the past, binary and empty
keys and values, RENAME to itself, COPY onto a key, SCAN's options, glob
patterns, large values, transactions), and seeded random sequences over
every command with option lists, wrong arity, mixed case and short
transactions (the seed is in every failure message). The differences
baton intends are in redisdiff.ALLOWED, each with its documented reason;
everything else is a bug. The connection commands are in
test_redis_diff_connection.py.
"""

import random

import pytest

pytest.register_assert_rewrite("redisdiff")
from redisdiff import (BIG, BIN, SMALL, Conn, check,  # noqa: E402
                       name_of, sorted_pairs)

# The fixtures redis_port, baton_port and pair.
pytest_plugins = ("redisdiff",)

RANDOM_SEEDS = tuple(range(1, 9))
RANDOM_COMMANDS = 2000  # per seed


# ---- hand-written edge cases ------------------------------------------------


def test_strings_and_numbers(pair):
    check(pair, [
        ("SET", "s", "v"), ("GET", "s"), ("GET", "nokey"), ("SET", "", ""),
        ("GET", ""), ("STRLEN", ""), ("EXISTS", "", "s", "s", "x"),
        ("SET", BIN, BIN), ("GET", BIN), ("STRLEN", BIN), ("MGET", BIN, "s",
                                                           "nokey"),
        ("SET", "s"), ("GET",), ("GET", "a", "b"), ("MGET",), ("MSET", "a"),
        ("MSET", "a", "1", "b"), ("MSET", "a", "1", "a", "2"), ("GET", "a"),
        ("SET", "s", "v", "NX"), ("SET", "s", "w", "XX"), ("GET", "s"),
        ("SET", "t", "v", "XX"), ("SET", "s", "v", "NX", "XX"),
        ("SET", "s", "v", "BOGUS"), ("SET", "s", "v", "GET"),
        ("SET", "nokey2", "v", "GET"), ("SET", "s", "v2", "NX", "GET"),
        ("SET", "s", "v3", "XX", "GET"), ("SET", "s", "v", "EX"),
        ("SET", "s", "v", "EX", "0"), ("SET", "s", "v", "EX", "-1"),
        ("SET", "s", "v", "EX", "x"), ("SET", "s", "v", "PX", "0"),
        ("SET", "s", "v", "EX", "10", "PX", "100"),
        ("SET", "s", "v", "EX", "10", "KEEPTTL"),
        ("SET", "s", "v", "EX", BIG), ("SET", "s", "v", "PX", BIG),
        ("SET", "s", "v", "EXAT", BIG), ("SET", "s", "v", "PXAT", BIG),
        ("SET", "s", "v", "EX", "1000"), ("TTL", "s"),
        ("SET", "s", "w", "KEEPTTL"), ("TTL", "s"), ("SET", "s", "x"),
        ("TTL", "s"), ("SET", "p", "v", "EXAT", "1"), ("EXISTS", "p"),
        ("SET", "p", "v", "PXAT", "1", "GET"), ("SET", "p", "v", "PXAT", "1"),
        ("GET", "p"), ("SET", "p", "v", "EXAT", "0"),
        ("INCR", "n"), ("INCR", "n"), ("INCRBY", "n", "10"),
        ("DECR", "n"), ("DECRBY", "n", "-5"), ("GET", "n"),
        ("INCRBY", "n", "x"), ("INCRBY", "n", "1.5"), ("INCRBY", "n", ""),
        ("INCRBY", "n", BIG), ("INCRBY", "n", BIG),
        ("SET", "n", BIG), ("INCR", "n"), ("SET", "n", SMALL), ("DECR", "n"),
        ("DECRBY", "n", SMALL), ("DECRBY", "z", SMALL),
        ("INCRBY", "z", "99999999999999999999"),
        ("SET", "n", " 1"), ("INCR", "n"), ("SET", "n", "01"), ("INCR", "n"),
        ("SET", "n", "+1"), ("INCR", "n"), ("SET", "n", "-0"), ("INCR", "n"),
        ("SET", "n", ""), ("INCR", "n"), ("INCR", "s"), ("INCR",),
        ("APPEND", "ap", ""), ("EXISTS", "ap"), ("APPEND", "ap", "ab"),
        ("APPEND", "ap", BIN), ("GET", "ap"), ("STRLEN", "ap"),
        ("APPEND", "ap"), ("STRLEN", "nokey"),
        ("DEL",), ("DEL", "nokey"), ("DEL", "ap", "ap", "s"),
        ("UNLINK", "a", "nokey", "a"), ("UNLINK",), ("DBSIZE",),
        ("DBSIZE", "x"), ("EXISTS",),
    ])


def test_more_string_commands(pair):
    check(pair, [
        ("GETSET", "g", "1"), ("GETSET", "g", "2"), ("GETSET", "g"),
        ("SET", "g", "v", "EX", "100"), ("GETSET", "g", "w"), ("TTL", "g"),
        ("GETDEL", "g"), ("GETDEL", "g"), ("GETDEL",),
        ("SETNX", "x", "1"), ("SETNX", "x", "2"), ("GET", "x"), ("SETNX", "x"),
        ("SETEX", "e", "100", "v"), ("TTL", "e"), ("SETEX", "e", "0", "v"),
        ("SETEX", "e", "-1", "v"), ("SETEX", "e", "x", "v"),
        ("SETEX", "e", BIG, "v"), ("SETEX", "e", "1.5", "v"),
        ("SETEX", "e", "100"), ("PSETEX", "e", "100000", "v"), ("PTTL", "e"),
        ("PSETEX", "e", "0", "v"), ("PSETEX", "e", BIG, "v"),
        ("PSETEX", "e", "-5", "v"), ("GET", "e"),
        ("MSETNX", "m1", "a", "m2", "b"), ("MSETNX", "m2", "c", "m3", "d"),
        ("MGET", "m1", "m2", "m3"), ("MSETNX", "m1"), ("MSETNX", "m4", "a",
                                                        "m5"),
        ("MSETNX", "m6", "a", "m6", "b"), ("GET", "m6"),
        ("SET", "r", "Hello World"),
        ("GETRANGE", "r", "0", "4"), ("GETRANGE", "r", "-3", "-1"),
        ("GETRANGE", "r", "0", "-1"), ("GETRANGE", "r", "10", "100"),
        ("GETRANGE", "r", "5", "3"), ("GETRANGE", "r", "-100", "-50"),
        ("GETRANGE", "r", "-100", "100"), ("GETRANGE", "r", "100", "200"),
        ("GETRANGE", "r", "-1", "-5"), ("GETRANGE", "r", "0", "0"),
        ("GETRANGE", "r", "-1", "0"), ("GETRANGE", "r", SMALL, BIG),
        ("GETRANGE", "r", BIG, SMALL), ("GETRANGE", "r", "x", "1"),
        ("GETRANGE", "r", "0", "99999999999999999999"),
        ("GETRANGE", "nokey", "0", "-1"), ("GETRANGE", "nokey", "x", "1"),
        ("GETRANGE", "r", "0"), ("SET", "emp", ""),
        ("GETRANGE", "emp", "0", "-1"), ("GETRANGE", "emp", "-1", "-1"),
        ("SETRANGE", "r", "6", "Redis"), ("GET", "r"),
        ("SETRANGE", "r", "20", "x"), ("GET", "r"),
        ("SETRANGE", "sr", "3", BIN), ("GET", "sr"),
        ("SETRANGE", "sr2", "0", ""), ("EXISTS", "sr2"),
        ("SETRANGE", "sr2", "10", ""), ("EXISTS", "sr2"),
        ("SETRANGE", "r", "0", ""), ("SETRANGE", "r", "-1", "x"),
        ("SETRANGE", "r", "x", "x"), ("SETRANGE", "r", BIG, "x"),
        ("SETRANGE", "r", "536870911", "xx"),
        ("SETRANGE", "r", "536870912", ""),
        ("SETRANGE", "r", "536870912", "x"), ("SETRANGE", "r", "1"),
        ("SET", "sx", "v", "EX", "100"), ("SETRANGE", "sx", "1", "w"),
        ("TTL", "sx"),
        ("INCRBYFLOAT", "f", "10.5"), ("INCRBYFLOAT", "f", "0.1"),
        ("INCRBYFLOAT", "f", "-5.0e3"), ("INCRBYFLOAT", "f", "1e400"),
        ("INCRBYFLOAT", "f", "x"), ("INCRBYFLOAT", "f", ""),
        ("INCRBYFLOAT", "f", " 1"), ("INCRBYFLOAT", "f", "nan"),
        ("INCRBYFLOAT", "f", "inf"), ("INCRBYFLOAT", "g2", "inf"),
        ("INCRBYFLOAT", "f", "0x10"), ("INCRBYFLOAT", "f", "1.0000"),
        ("SET", "f2", "2.1"), ("INCRBYFLOAT", "f2", "5000"),
        ("SET", "f3", "abc"), ("INCRBYFLOAT", "f3", "1"),
        ("SET", "f4", "5"), ("INCRBYFLOAT", "f4", "-5"), ("GET", "f4"),
        ("SET", "f5", "-0"), ("INCRBYFLOAT", "f5", "0"),
        ("SET", "f6", "1e3"), ("INCRBYFLOAT", "f6", "1.5e-3"),
        ("SET", "f7", "3.0e1000"), ("INCRBYFLOAT", "f7", "1"),
        ("INCRBYFLOAT", "f"), ("SET", "f8", "10"), ("EXPIRE", "f8", "100"),
        ("INCRBYFLOAT", "f8", "1"), ("TTL", "f8"),
    ])


def test_rename_copy_flushdb(pair):
    check(pair, [
        ("SET", "a", "1", "EX", "100"), ("RENAME", "a", "b"), ("TTL", "b"),
        ("GET", "a"), ("RENAME", "nokey", "c"), ("RENAME", "b", "b"),
        ("RENAMENX", "b", "b"), ("RENAMENX", "nokey", "b"),
        ("SET", "c", "3"), ("RENAMENX", "b", "c"), ("RENAMENX", "b", "d"),
        ("RENAME", "d", "c"), ("GET", "c"), ("TTL", "c"), ("RENAME", "c"),
        ("HSET", "h", "f", "v"), ("RENAME", "h", "h2"), ("TYPE", "h2"),
        ("RENAME", "h2", "c"), ("HGETALL", "c"), ("TYPE", "c"),
        ("SET", "x", "1"), ("COPY", "x", "y"), ("COPY", "x", "y"),
        ("COPY", "x", "y", "REPLACE"), ("COPY", "x", "x"),
        ("COPY", "x", "x", "REPLACE"), ("COPY", "nokey", "y"),
        ("COPY", "nokey", "nokey"), ("COPY", "x", "y", "DB", "0"),
        ("COPY", "x", "z", "DB", "1"), ("COPY", "x", "z", "DB", "x"),
        ("COPY", "x", "z", "DB"), ("COPY", "x", "z", "BOGUS"),
        ("COPY", "x", "z", "REPLACE", "REPLACE"), ("COPY", "x"),
        ("COPY", "c", "hc"), ("HGETALL", "hc"), ("HSET", "hc", "g", "w"),
        ("HGETALL", "c"), ("SET", "t", "v", "PX", "100000"),
        ("COPY", "t", "t2"), ("PTTL", "t2"), ("COPY", "x", "t2", "REPLACE"),
        ("TTL", "t2"), ("COPY", "c", "x", "REPLACE"), ("TYPE", "x"),
        ("DBSIZE",), ("FLUSHDB", "ASYNC"), ("DBSIZE",), ("SET", "a", "1"),
        ("FLUSHDB", "SYNC"), ("FLUSHDB", "BOGUS"), ("FLUSHDB", "a", "b"),
        ("FLUSHALL", "BOGUS"), ("FLUSHDB",), ("FLUSHALL",),
    ])


def test_expiry(pair):
    check(pair, [
        ("SET", "k", "v"), ("TTL", "k"), ("PTTL", "k"), ("TTL", "nokey"),
        ("PTTL", "nokey"), ("EXPIRETIME", "k"), ("PEXPIRETIME", "nokey"),
        ("EXPIRE", "k", "100"), ("TTL", "k"), ("EXPIRE", "k", "200", "NX"),
        ("EXPIRE", "k", "200", "XX"), ("EXPIRE", "k", "50", "GT"),
        ("EXPIRE", "k", "50", "LT"), ("TTL", "k"),
        ("EXPIRE", "k", "50", "NX", "XX"), ("EXPIRE", "k", "50", "GT", "LT"),
        ("EXPIRE", "k", "50", "BOGUS"), ("EXPIRE", "k", "x"),
        ("EXPIRE", "k", BIG), ("PEXPIRE", "k", BIG), ("EXPIREAT", "k", BIG),
        ("PEXPIREAT", "k", BIG), ("EXPIRE", "k", "1.5"),
        ("PERSIST", "k"), ("PERSIST", "k"), ("PERSIST", "nokey"),
        ("EXPIRE", "nokey", "10"), ("EXPIRE", "k", "10", "XX"),
        ("EXPIRE", "k", "10", "GT"), ("EXPIRE", "k", "10", "LT"),
        ("TTL", "k"), ("PEXPIRE", "k", "100000"), ("PTTL", "k"),
        ("EXPIREAT", "k", "4102444800"), ("EXPIRETIME", "k"),
        ("PEXPIREAT", "k", "4102444800123"), ("PEXPIRETIME", "k"),
        ("EXPIRETIME", "k"), ("TTL", "k"),
        ("EXPIRE", "k", "-1"), ("EXISTS", "k"), ("SET", "k", "v"),
        ("EXPIREAT", "k", "1"), ("GET", "k"), ("SET", "k", "v"),
        ("PEXPIRE", "k", "0"), ("GET", "k"), ("SET", "k", "v"),
        ("PEXPIREAT", "k", "0"), ("GET", "k"), ("EXPIRE", "k"),
        ("SET", "k", "v"), ("GETEX", "k"), ("GETEX", "k", "EX", "100"),
        ("TTL", "k"), ("GETEX", "k", "PERSIST"), ("TTL", "k"),
        ("GETEX", "k", "EX", "0"), ("GETEX", "k", "EX", "-1"),
        ("GETEX", "k", "EX"), ("GETEX", "k", "BOGUS"),
        ("GETEX", "k", "EX", "10", "PX", "10"), ("GETEX", "nokey", "EX", "x"),
        ("GETEX", "k", "PXAT", "1"), ("EXISTS", "k"), ("GETEX",),
        ("TTL",), ("PERSIST",),
    ])


def test_hashes_and_types(pair):
    check(pair, [
        ("HSET", "h", "a", "1", "b", "2"), ("HSET", "h", "a", "3"),
        ("HSET", "h", "c", "4", "c", "5"), ("HSET", "h", "a"),
        ("HSET", "h"), ("HGET", "h", "a"), ("HGET", "h", "zz"),
        ("HGET", "nokey", "a"), ("HMGET", "h", "a", "zz", "c"),
        ("HMGET", "nokey", "a"), ("HEXISTS", "h", "a"),
        ("HEXISTS", "h", "zz"), ("HLEN", "h"), ("HLEN", "nokey"),
        ("HGETALL", "h"), ("HGETALL", "nokey"), ("HKEYS", "h"),
        ("HVALS", "h"), ("HKEYS", "nokey"),
        ("HINCRBY", "h", "n", "5"), ("HINCRBY", "h", "n", "x"),
        ("HINCRBY", "h", "a", "1"), ("HINCRBY", "h", "n", BIG),
        ("HSET", "h", "str", "abc"), ("HINCRBY", "h", "str", "1"),
        ("HINCRBY", "h", "n"), ("HDEL", "h", "a", "zz", "a"),
        ("HDEL", "h"), ("HDEL", "nokey", "a"),
        ("HSET", "h", "", ""), ("HGET", "h", ""), ("HSET", "h", BIN, BIN),
        ("HGET", "h", BIN), ("TYPE", "h"), ("TYPE", "nokey"),
        ("SET", "s", "v"), ("TYPE", "s"), ("TYPE",),
        ("HSET", "s", "f", "v"), ("HGET", "s", "f"), ("HGETALL", "s"),
        ("HLEN", "s"), ("HDEL", "s", "f"), ("HINCRBY", "s", "f", "1"),
        ("HMGET", "s", "f"), ("HKEYS", "s"), ("HEXISTS", "s", "f"),
        ("HSCAN", "s", "0"),
        ("GET", "h"), ("STRLEN", "h"), ("APPEND", "h", "x"),
        ("INCR", "h"), ("DECRBY", "h", "1"), ("GETSET", "h", "x"),
        ("GETDEL", "h"), ("GETRANGE", "h", "0", "1"),
        ("SETRANGE", "h", "0", "x"), ("INCRBYFLOAT", "h", "1"),
        ("GETEX", "h"), ("SET", "h", "x", "GET"), ("MGET", "h", "s"),
        ("SETNX", "h", "x"), ("MSETNX", "h", "x"), ("EXISTS", "h"),
        ("EXPIRE", "h", "100"), ("TTL", "h"), ("HSET", "h", "q", "1"),
        ("TTL", "h"), ("HDEL", "h", "q"), ("TTL", "h"),
        ("HDEL", "h", "c", "n", "str", "", BIN, "b"), ("EXISTS", "h"),
        ("HSET", "h2", "f", "v"), ("SETEX", "h2", "100", "v"),
        ("TYPE", "h2"), ("HSET", "h3", "f", "v"), ("SET", "h3", "v"),
        ("TYPE", "h3"), ("HSET", "h4", "f", "v"), ("MSET", "h4", "v"),
        ("TYPE", "h4"), ("HSET", "h5", "f", "v"), ("SET", "h5", "v", "NX"),
        ("HINCRBY", "hn", "f", "-3"), ("HGETALL", "hn"),
        ("HSCAN", "hn", "0"), ("HSCAN", "hn", "0", "COUNT", "0"),
        ("HSCAN", "hn", "x"), ("HSCAN", "nokey", "0", "BOGUS"),
        ("HSCAN", "hn", "0", "MATCH", "f*"), ("HSCAN", "hn", "0", "MATCH",
                                              "g*"),
        ("HSCAN", "hn", "0", "BOGUS"), ("HSCAN", "hn", "0", "COUNT"),
        ("HSCAN", "hn", "0", "COUNT", "x"), ("HSCAN", "hn"),
    ])


def test_scan_options(pair):
    keys = [f"key:{i}" for i in range(40)] + ["other", "", BIN]
    setup = [("SET", k, "v") for k in keys] + [
        ("HSET", f"hash:{i}", "f", "v") for i in range(10)] + [
        ("HSET", "big", *[x for i in range(300) for x in (f"f{i}", i)])]
    check(pair, setup + [
        ("SCAN", "0"), ("SCAN", "0", "COUNT", "5"), ("SCAN", "0", "COUNT",
                                                       "1000"),
        ("SCAN", "0", "MATCH", "key:1*"), ("SCAN", "0", "MATCH", "*:*",
                                           "COUNT", "3"),
        ("SCAN", "0", "TYPE", "hash"), ("SCAN", "0", "TYPE", "string"),
        ("SCAN", "0", "TYPE", "list"), ("SCAN", "0", "TYPE", "HASH"),
        ("SCAN", "0", "MATCH", "hash:*", "TYPE", "string"),
        ("SCAN", "0", "MATCH", "\x00*"), ("SCAN", "0", "MATCH", "[a-k]*"),
        ("SCAN", "0", "COUNT", "0"), ("SCAN", "0", "COUNT", "-1"),
        ("SCAN", "0", "COUNT", "x"), ("SCAN", "0", "COUNT"),
        ("SCAN", "0", "MATCH"), ("SCAN", "0", "BOGUS", "1"),
        ("SCAN", "x"), ("SCAN", "-1"), ("SCAN", "18446744073709551616"),
        ("SCAN",), ("KEYS", "*"), ("KEYS", "key:?"), ("KEYS", "nomatch*"),
        ("KEYS", "[o]ther"), ("KEYS",), ("KEYS", "a", "b"),
        ("HSCAN", "big", "0"), ("HSCAN", "big", "0", "COUNT", "7"),
        ("HSCAN", "big", "0", "MATCH", "f1*"), ("HSCAN", "big", "0",
                                                "NOVALUES"),
        ("HSCAN", "big", "0", "TYPE", "string"), ("DBSIZE",),
    ])


# ---- seeded random sequences ------------------------------------------------


# Inside MULTI, EXEC's array is compared reply by reply: no SCAN (its
# cursors are each server's), nothing that reads a clock (TTL ...), and
# no connection command (docs/batond.md, "Transactions": baton queues
# key-value commands only; test_transactions covers that difference).
UNQUEUED = {"scan", "hscan", "ttl", "pttl", "expiretime", "pexpiretime",
            "dbsize", "ping", "echo"}


# Commands that take a time: an argument inserted at random could become a
# short expiry, due while the test runs.
TIMED = {"set", "getex", "expire", "pexpire", "expireat", "pexpireat",
         "setex", "psetex"}


def queueable(cmd):
    return name_of(cmd) not in UNQUEUED


class Gen:
    """Commands from one seed, over few keys (so they collide), values that
    are numbers, floats, binary and empty, and expiries that are either far
    ahead or in the past (never due during the test: the two servers' clocks
    are read at different moments)."""

    KEYS = ["k0", "k1", "k2", "k3", "", BIN, "h0", "h1"]
    FIELDS = ["f0", "f1", "f2", "", BIN]
    VALUES = ["", "0", "1", "-1", "10", "3.5", "-2.25", "abc", BIN, BIG,
              SMALL, "1e3", " 1", "007", "x" * 40, "inf", "9.99e307"]
    INTS = ["-1", "0", "1", "5", "100", "-100", BIG, SMALL, "x", "1.5", "",
            "99999999999999999999", "010", "+5", "-0", " 1", "1 ", "1e3",
            "0x10", "9223372036854775808", "-9223372036854775809"]
    FLOATS = ["0.1", "-1.5", "10", "1e2", "x", "", "inf", "-inf", "1e400",
              "0", "5.0e-3"]
    OFFSETS = ["0", "1", "3", "-1", "-3", "-100", "100", "7", BIG, SMALL,
               "x", "+1", "01", "-0", ""]
    SET_OPTS = [[], ["NX"], ["XX"], ["GET"], ["EX", "10000"],
                ["PX", "20000000"], ["EXAT", "4102444800"],
                ["PXAT", "4102444800000"], ["EXAT", "1"], ["PXAT", "1"],
                ["KEEPTTL"], ["EX", "0"], ["NX", "GET"], ["XX", "KEEPTTL"],
                ["EX", "x"], ["EX", "10", "PX", "10"], ["BOGUS"]]

    def __init__(self, seed):
        self.rng = random.Random(seed)

    def pick(self, seq):
        return self.rng.choice(seq)

    def key(self):
        return self.pick(self.KEYS)

    def ttl(self, unit_ms):
        """A relative time: far ahead (hours, and random, so that GT and
        LT never compare two times set a few ms apart from the same
        number), not positive, or bad."""
        far = str(self.rng.randrange(10000, 50000) *
                  (1000 if unit_ms else 1) + self.rng.randrange(1000))
        return self.pick([far, far, "-1", "0", "x", BIG])

    def command(self):
        k, v, p = self.key(), self.pick(self.VALUES), self.pick
        at = self.pick(["4102444800", "1", "0", "-5"])
        table = [
            lambda: ("GET", k), lambda: ("SET", k, v, *p(self.SET_OPTS)),
            lambda: ("SET", k, v, *self.options(self.set_option)),
            lambda: ("GETEX", k, *self.options(self.getex_option)),
            lambda: (lambda w: (w, k, self.expiry_time(w), *self.options(
                         lambda: [p(["NX", "XX", "GT", "LT", "nx",
                                     "BOGUS"])])))(
                p(["EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT"])),
            lambda: ("SCAN", "0", *self.options(self.scan_option)),
            lambda: ("HSCAN", k, "0", *self.options(self.hscan_option)),
            lambda: ("COPY", k, self.key(), *self.options(
                lambda: p([["REPLACE"], ["DB", p(["0", "1", "x", "-1"])],
                           ["DB"], ["BOGUS"]]))),
            lambda: ("FLUSHALL", p(["ASYNC", "SYNC", "async", "x"])),
            lambda: ("DEL", k, self.key()), lambda: ("UNLINK", k),
            lambda: ("EXISTS", k, self.key(), k),
            lambda: ("INCR", k), lambda: ("DECR", k),
            lambda: ("INCRBY", k, p(self.INTS)),
            lambda: ("DECRBY", k, p(self.INTS)),
            lambda: ("APPEND", k, v), lambda: ("STRLEN", k),
            lambda: ("MGET", k, self.key(), self.key()),
            lambda: ("MSET", k, v, self.key(), p(self.VALUES)),
            lambda: ("GETEX", k, *p([[], ["EX", "10000"], ["PERSIST"],
                                     ["PXAT", "1"], ["EX", "0"]])),
            lambda: ("EXPIRE", k, self.ttl(False),
                     *p([[], [], ["NX"], ["XX"], ["GT"], ["LT"]])),
            lambda: ("PEXPIRE", k, self.ttl(True),
                     *p([[], [], ["NX"], ["XX"], ["GT"], ["LT"]])),
            lambda: (p(["EXPIREAT", "PEXPIREAT"]), k, at),
            lambda: ("PERSIST", k), lambda: (p(["TTL", "PTTL"]), k),
            lambda: (p(["EXPIRETIME", "PEXPIRETIME"]), k),
            lambda: ("TYPE", k),
            lambda: ("HSET", k, p(self.FIELDS), v,
                     *p([[], [p(self.FIELDS), p(self.VALUES)]])),
            lambda: ("HDEL", k, p(self.FIELDS), p(self.FIELDS)),
            lambda: ("HINCRBY", k, p(self.FIELDS), p(self.INTS)),
            lambda: ("HGET", k, p(self.FIELDS)),
            lambda: ("HMGET", k, p(self.FIELDS), p(self.FIELDS)),
            lambda: ("HEXISTS", k, p(self.FIELDS)), lambda: ("HLEN", k),
            lambda: (p(["HGETALL", "HKEYS", "HVALS"]), k),
            lambda: ("HSCAN", k, "0", *p([[], ["COUNT", "2"],
                                          ["MATCH", "f*"], ["NOVALUES"]])),
            lambda: ("GETDEL", k), lambda: ("GETSET", k, v),
            lambda: ("SETNX", k, v),
            lambda: ("SETEX", k, self.ttl(False), v),
            lambda: ("PSETEX", k, self.ttl(True), v),
            lambda: ("MSETNX", k, v, self.key(), v),
            lambda: ("GETRANGE", k, p(self.OFFSETS), p(self.OFFSETS)),
            lambda: ("SETRANGE", k, p(["0", "1", "5", "30", "-1", BIG, "x"]),
                     v),
            lambda: ("INCRBYFLOAT", k, p(self.FLOATS)),
            lambda: (p(["RENAME", "RENAMENX"]), k, self.key()),
            lambda: ("COPY", k, self.key(), *p([[], ["REPLACE"],
                                                ["DB", "0"]])),
            lambda: ("SCAN", "0", *p([[], ["MATCH", "k*"], ["COUNT", "2"],
                                      ["TYPE", "hash"],
                                      ["TYPE", "string"]])),
            lambda: ("KEYS", p(["*", "k?", "h*", "[kh]1"])),
            lambda: ("DBSIZE",),
            lambda: p([("FLUSHDB",), ("FLUSHALL",), ("PING",),
                       ("ECHO", v)]),
        ]
        # FLUSH* rarely, everything else alike.
        i = self.rng.randrange(len(table) * 20)
        return table[i // 20]() if i < (len(table) - 1) * 20 else \
            table[-1]() if self.rng.random() < 0.1 else table[0]()

    def options(self, one):
        """Zero to three options, each from one()."""
        return [w for _ in range(self.rng.randrange(4)) for w in one()]

    def expiry_time(self, word):
        """A time for the option or command word (EX, PXAT, EXPIRE ...),
        in either unit, never due while the test runs: a relative one far
        ahead (random, as ttl: hours as ms, months as s) or not positive;
        an absolute one far ahead or past; or a bad one."""
        p = self.pick
        if word.upper().endswith("AT"):
            good = [p(["4102444800", "4102444800000"]), "1", "0", "-1",
                    self.ttl(True)]
        else:
            good = [self.ttl(True), self.ttl(True), "0", "-1"]
        return p(good + [p(["x", "", BIG, SMALL, "1.5", " 5", "010", "+5",
                            "-0", "1e3", "9223372036854775808"])])

    def set_option(self):
        p = self.pick
        w = p(["EX", "PX", "EXAT", "PXAT", "ex"])
        return p([["NX"], ["XX"], ["GET"], ["KEEPTTL"], ["get"],
                  [w, self.expiry_time(w)], [w], ["BOGUS"]])

    def getex_option(self):
        p = self.pick
        w = p(["EX", "PX", "EXAT", "PXAT"])
        return p([["PERSIST"], ["persist"], ["BOGUS"],
                  [w, self.expiry_time(w)], [w]])

    def scan_option(self):
        p = self.pick
        return p([["MATCH", p(["k*", "*", "h?", "[a-k]*", "", "\\"])],
                  ["COUNT", p(["1", "3", "100", "0", "-1", "x"])],
                  ["TYPE", p(["string", "hash", "HASH", "list", ""])],
                  ["MATCH"], ["COUNT"], ["TYPE"], ["BOGUS", "1"]])

    def hscan_option(self):
        p = self.pick
        return p([["MATCH", p(["f*", "*", "", "f?"])],
                  ["COUNT", p(["1", "3", "0", "x"])], ["NOVALUES"],
                  ["MATCH"], ["COUNT"], ["TYPE", "string"], ["BOGUS"]])

    def mutated(self):
        """A command, now and then in another case, with an argument
        dropped or one added (wrong arity, or an option's value missing)."""
        cmd = list(self.command())
        roll = self.rng.random()
        if roll < 0.03 and len(cmd) > 1:
            del cmd[self.rng.randrange(1, len(cmd))]
        elif roll < 0.06 and name_of(cmd) not in TIMED:
            cmd.insert(self.rng.randrange(1, len(cmd) + 1),
                       self.pick(self.VALUES))
        if self.rng.random() < 0.1:
            cmd[0] = "".join(ch.upper() if self.rng.random() < 0.5 else
                             ch.lower() for ch in cmd[0])
        return tuple(cmd)

    def commands(self, n):
        out = []
        while len(out) < n:
            if self.rng.random() < 0.02:  # a transaction of a few
                body = [self.mutated() for _ in range(self.rng.randrange(4))]
                out += [("MULTI",)] + [c for c in body if queueable(c)] + [
                    self.pick([("EXEC",), ("EXEC",), ("DISCARD",)])]
            else:
                out.append(self.mutated())
        return out


@pytest.mark.parametrize("seed", RANDOM_SEEDS)
def test_random_sequences(pair, seed):
    check(pair, Gen(seed).commands(RANDOM_COMMANDS), where=f"seed {seed}")


def test_transactions(pair, redis_port, baton_port):
    check(pair, [
        ("MULTI",), ("SET", "t", "1"), ("INCR", "t"), ("GET", "t"),
        ("INCRBYFLOAT", "t", "0.5"), ("HSET", "t", "f", "v"),
        ("GETRANGE", "t", "0", "-1"), ("EXEC",),
        ("MULTI",), ("MULTI",), ("DISCARD",), ("DISCARD",), ("EXEC",),
        ("MULTI",), ("GET",), ("SET", "t", "2"), ("EXEC",), ("GET", "t"),
        ("MULTI",), ("NOSUCH", "a"), ("EXEC",),
        ("MULTI",), ("WATCH", "t"), ("EXEC",), ("MULTI",), ("EXEC",),
        ("WATCH",), ("WATCH", "t", "u"),
        ("UNWATCH",), ("MULTI",), ("SCAN", "0", "TYPE", "string"),
        ("KEYS", "*"), ("DBSIZE",), ("EXEC",),
    ])
    # docs/batond.md ("Transactions"): a transaction holds key-value
    # commands only; a connection command inside MULTI is refused, which
    # aborts it (Redis queues it).
    r, b = pair
    x = r.pipeline([("MULTI",), ("PING",), ("EXEC",)])
    y = b.pipeline([("MULTI",), ("PING",), ("EXEC",)])
    assert x[1] == ("simple", b"QUEUED") and x[2][0] == "array", x
    assert y[1] == ("error", b"ERR command 'PING' cannot be queued: a "
                    b"transaction holds key-value commands only"), y
    assert y[2] == ("error", b"EXECABORT Transaction discarded because of "
                    b"previous errors."), y
    # HGETALL inside EXEC: a map in RESP3 there too, after a nested reply.
    txn = [("MULTI",), ("HSET", "th", "f", "v", "g", "w"),
           ("HSCAN", "th", "0"), ("HGETALL", "th"), ("HGETALL", "none"),
           ("hgetall", "th"), ("EXEC",)]
    x, y = r.pipeline(txn)[-1], b.pipeline(txn)[-1]
    assert x[0] == y[0] == "array" and len(x[1]) == len(y[1]) == 5, (x, y)
    assert x[1][0] == y[1][0] == ("int", 2), (x, y)
    for i in (2, 3, 4):
        assert sorted_pairs(x[1][i]) == sorted_pairs(y[1][i]), (i, x, y)
    # A watched key written by another connection: EXEC does not run
    # (RESP2's null array, RESP3's null).
    others = [Conn(redis_port), Conn(baton_port)]
    try:
        replies = []
        for c, o in zip((r, b), others):
            replies.append(c.pipeline([("SET", "w", "1"), ("WATCH", "w")]))
            assert o.call("SET", "w", "2") == ("simple", b"OK")
            replies.append(c.pipeline([("MULTI",), ("INCR", "w"),
                                       ("EXEC",), ("GET", "w")]))
        assert replies[0] == replies[2] and replies[1] == replies[3], replies
    finally:
        for o in others:
            o.close()


GLOB_KEYS = ["hello", "hallo", "hxllo", "hllo", "heeeello", "h*llo", "h?llo",
             "h[e]llo", "a\\b", "a]b", "a-b", "a^b", "[", "]", "\\", "*", "?",
             "", "abc", "ABC", "aXc", "a\x00c", "h\nllo", "-", "^"]
GLOB_PATTERNS = ["*", "h?llo", "h*llo", "h[ae]llo", "h[^e]llo", "h[a-b]llo",
                 "h[b-a]llo", "h\\*llo", "h\\?llo", "h[*]llo", "\\[", "[",
                 "[]", "[]]", "[^]", "a[\\]]b", "a[\\\\]b", "a\\", "\\",
                 "*\\", "a[-]b", "a[a-]b", "a[^-]b", "a[", "a[b", "[a-c]bc",
                 "[A-Z]BC", "a?c", "a*", "*c", "**", "?", "??", "", "^",
                 "[\\^]", "a[^]b", "h\\", "h[", "h[e", "*[", "a\x00c",
                 "a?c*", "h[a-ze]llo", "[!a]bc", "[a-", "*l*o"]


GLOB_ALPHABET = "ab*?[]^-\\"


def test_glob_patterns(pair):
    setup = [("SET", k, "v") for k in GLOB_KEYS] + [
        ("HSET", "globhash", *[x for k in GLOB_KEYS for x in (k, "v")])]
    check(pair, setup + [("KEYS", p) for p in GLOB_PATTERNS] + [
        ("SCAN", "0", "MATCH", p, "COUNT", "7") for p in GLOB_PATTERNS] + [
        ("HSCAN", "globhash", "0", "MATCH", p, "COUNT", "1000")
        for p in GLOB_PATTERNS])
    # Random patterns and keys over the bytes that mean something.
    rng = random.Random(7)
    word = lambda n: "".join(rng.choice(GLOB_ALPHABET)  # noqa: E731
                             for _ in range(rng.randrange(n)))
    keys = {word(6) for _ in range(150)}
    check(pair, [("FLUSHALL",)] + [("SET", k, "v") for k in keys] + [
        ("KEYS", word(7)) for _ in range(1500)], where="random globs")


def test_large_values_and_float_texts(pair):
    big = bytes(range(256)) * 4096  # 1 MiB, every byte value
    digits = "1" + "0" * 5118  # 5119 bytes: a float text Redis still reads
    check(pair, [
        ("SET", "big", big), ("STRLEN", "big"), ("GETRANGE", "big", "0", "9"),
        ("GETRANGE", "big", "-10", "-1"), ("GETRANGE", "big", "1000000",
                                           "1000300"),
        ("SETRANGE", "big", "2097152", "end"), ("STRLEN", "big"),
        ("GETRANGE", "big", "1048570", "1048580"), ("APPEND", "big", big),
        ("STRLEN", "big"), ("GETRANGE", "big", "-5", "-1"),
        ("SET", "f", digits), ("INCRBYFLOAT", "f", "1"),
        ("SET", "f", digits + "0"), ("INCRBYFLOAT", "f", "1"),
        ("INCRBYFLOAT", "g", digits), ("INCRBYFLOAT", "g", digits + "0"),
        ("SET", "f", "0." + "0" * 5116 + "1"), ("INCRBYFLOAT", "f", "1"),
        ("SET", "n", "1" * 19), ("INCR", "n"), ("SET", "n", "1" * 20),
        ("INCR", "n"), ("SET", "f", "1e308"), ("INCRBYFLOAT", "f", "1e308"),
        ("INCRBYFLOAT", "f", "1e4932"), ("SET", "f", "1e-4950"),
        ("INCRBYFLOAT", "f", "0"), ("SET", "f", "0x1p3"),
        ("INCRBYFLOAT", "f", "1"), ("INCRBYFLOAT", "f", "1e-20"),
        ("SET", "f", "-inf"), ("INCRBYFLOAT", "f", "1"),
        ("SET", "f", "3"), ("INCRBYFLOAT", "f", "-inf"),
        ("SET", "f", ".5"), ("INCRBYFLOAT", "f", "5."),
        ("SET", "f", "1_000"), ("INCRBYFLOAT", "f", "1"),
        ("SET", "f", "+1"), ("INCRBYFLOAT", "f", "+1"),
        ("SET", "f", "1 "), ("INCRBYFLOAT", "f", "1"),
    ])

/*
 * baton-lincheck — decides whether a recorded concurrent history of
 * key-value operations is linearizable.
 *
 * The library has three parts, used in this order:
 *
 *   1. a history (struct lincheck_history): the operations, each with its
 *      invocation and completion, built by one of the parsers
 *      (lincheck_parse, lincheck_load) or by hand with
 *      lincheck_history_invoke / lincheck_history_complete /
 *      lincheck_history_finish;
 *   2. the checker (lincheck_check): splits the history by key and runs
 *      the Wing-Gong/Lowe search on each key's operations against a model
 *      of one Redis string key;
 *   3. the report (lincheck_result_print): the verdict and, for a
 *      violation, the operations that cannot be ordered.
 *
 * lincheck_cli is the whole command-line tool; main.c only calls it.
 *
 * Ownership: the caller owns every struct it passes in; the library
 * allocates only inside a history (freed by lincheck_history_free) and
 * inside lincheck_check (freed before it returns). Errors are 0 or a
 * negative LINCHECK_E* code; functions that take a struct lincheck_error
 * write a message there (with file:line for input errors).
 */
#ifndef BATON_LINCHECK_H
#define BATON_LINCHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ------------------------------------------------------------------------ */
/* Limits. Input beyond one is an error (LINCHECK_ELIMIT), never a crash.   */

/* Bytes of one history file (it is read into memory whole). */
#define LINCHECK_FILE_BYTES_MAX ((size_t)1 << 30)
/* Bytes of one line, its end of line excluded. */
#define LINCHECK_LINE_BYTES_MAX ((size_t)1 << 20)
/* Operations in one history. */
#define LINCHECK_OPS_MAX ((uint32_t)1 << 22)
/* Operations on one key (the search's bit sets are this wide at most). */
#define LINCHECK_KEY_OPS_MAX ((uint32_t)1 << 20)
/* Bytes of keys and values held by one history. */
#define LINCHECK_HISTORY_BYTES_MAX ((size_t)1 << 31)
/* Distinct clients (processes) in one history. */
#define LINCHECK_CLIENTS_MAX ((uint32_t)1 << 20)
/* Tab-separated fields of one baton-format line. */
#define LINCHECK_FIELDS_MAX 8u
/* Bytes of an error message, its NUL included. */
#define LINCHECK_ERROR_BYTES 512u
/* Pending operations an explanation lists (the others are counted). */
#define LINCHECK_EXPLAIN_OPS_MAX 12u
/* Operations of the linearizable prefix an explanation shows (its end). */
#define LINCHECK_EXPLAIN_TAIL_MAX 4u
/* Bytes of the model's value an explanation keeps. */
#define LINCHECK_EXPLAIN_VALUE_BYTES 160u

/* Defaults of the tool's options. */
#define LINCHECK_TIMEOUT_S_DEFAULT 300.0
#define LINCHECK_MEMORY_MB_DEFAULT 2048u

/* The version of the baton history format this release writes and reads
 * (docs/history-format.md). */
#define LINCHECK_BATON_FORMAT_VERSION 1u

/* ------------------------------------------------------------------------ */
/* Errors: one table. The range is apart from errno and BATON_E* codes.    */

#define LINCHECK_ERRORS(X)                                                     \
	X(NOMEM, -31001, "out of memory")                                      \
	X(IO, -31002, "cannot read the file")                                  \
	X(MALFORMED, -31003, "malformed history")                              \
	X(LIMIT, -31004, "the history exceeds a limit")                        \
	X(VERSION, -31005, "unsupported history format version")               \
	X(TIMEOUT, -31006, "time limit reached")                               \
	X(MEMLIMIT, -31007, "memory limit reached")                            \
	X(USAGE, -31008, "bad command line")

enum {
#define LINCHECK__ERROR_ENUM(name, code, text) LINCHECK_E##name = code,
	LINCHECK_ERRORS(LINCHECK__ERROR_ENUM)
#undef LINCHECK__ERROR_ENUM
};

/* Text of a LINCHECK_E* code, or "unknown error". A static string. */
const char *lincheck_strerror(int code);
/* Name ("LINCHECK_EMALFORMED") of a code. A static string. */
const char *lincheck_err_name(int code);

/* A message with context, filled by the functions that take one. */
struct lincheck_error {
	char text[LINCHECK_ERROR_BYTES];
};

/* ------------------------------------------------------------------------ */
/* Histories.                                                               */

enum lincheck_format {
	LINCHECK_FORMAT_AUTO = 0, /* decide from the content */
	LINCHECK_FORMAT_BATON,	  /* docs/history-format.md */
	LINCHECK_FORMAT_JEPSEN,	  /* Jepsen's jepsen.util log lines */
	LINCHECK_FORMAT_EDN,	  /* one EDN map per line (Porcupine's kv) */
};

/* "baton", "jepsen", "edn" (and "auto") to a format; LINCHECK_EUSAGE if
 * the name is none of these. */
int lincheck_format_parse(const char *name, enum lincheck_format *out);
/* The name of a format. A static string. */
const char *lincheck_format_name(enum lincheck_format format);
/* The format of a file's content judged from its first meaningful line,
 * or LINCHECK_FORMAT_AUTO when it looks like none of them. */
enum lincheck_format lincheck_format_detect(const char *data, size_t len);

enum lincheck_kind {
	LINCHECK_GET = 0,
	LINCHECK_SET,
	LINCHECK_APPEND,
	LINCHECK_DEL,
	LINCHECK_INCR,
	LINCHECK_CAS,
	LINCHECK_KIND_COUNT,
};

/* The name of an operation kind as the baton format spells it. */
const char *lincheck_kind_name(enum lincheck_kind kind);

enum lincheck_status {
	LINCHECK_PENDING = 0, /* invoked, not completed (yet) */
	LINCHECK_OK,	      /* took effect once, with the recorded result */
	LINCHECK_FAIL,	      /* certainly took no effect */
	LINCHECK_INFO,	      /* indeterminate: took effect once or never */
};

enum lincheck_tag {
	LINCHECK_UNKNOWN = 0, /* not recorded */
	LINCHECK_ABSENT,      /* a missing key */
	LINCHECK_PRESENT,     /* bytes in the history's arena */
};

/* A value: bytes [off, off + len) of the history's arena when PRESENT. */
struct lincheck_value {
	uint64_t off;
	uint32_t len;
	uint8_t tag; /* enum lincheck_tag */
};

/*
 * One operation. Times are what the format gives (nanoseconds, or the
 * event's position in the file); an operation that is not LINCHECK_OK or
 * LINCHECK_FAIL has return_time INT64_MAX: it may take effect at any time
 * after its invocation.
 */
struct lincheck_op {
	uint64_t client;
	int64_t invoke_time;
	int64_t return_time;   /* INT64_MAX unless OK or FAIL */
	int64_t complete_time; /* when the completion was recorded, or -1 */
	uint32_t invoke_line;
	uint32_t complete_line; /* 0: no completion was recorded */
	uint32_t key;		/* index into the history's keys */
	uint8_t kind;		/* enum lincheck_kind */
	uint8_t status;		/* enum lincheck_status */
	/* Arguments: SET/APPEND value in arg; CAS expected value in arg (may
	 * be ABSENT: "the key is missing") and new value in arg2; INCR's
	 * increment in delta. */
	struct lincheck_value arg;
	struct lincheck_value arg2;
	int64_t delta;
	/* Results of an OK operation: GET's value in out (PRESENT or
	 * ABSENT); APPEND's new length, DEL's count of keys removed, INCR's
	 * new value and CAS's 1 (swapped) or 0 (not) in out_int when
	 * out_known. */
	struct lincheck_value out;
	int64_t out_int;
	bool out_known;
};

struct lincheck__client;

struct lincheck_history {
	enum lincheck_format format;
	/* The file's name, for messages (not owned; may be NULL). */
	const char *name;
	/* Times count events (Jepsen, EDN) rather than nanoseconds. */
	bool times_are_events;
	/* A missing key reads as the empty string (Porcupine's kv model):
	 * GET of a missing key is recorded as "" and DEL leaves "". */
	bool missing_reads_empty;

	struct lincheck_op *ops;
	uint32_t n_ops;
	uint32_t cap_ops;

	/* Distinct keys; key i is keys[i] (PRESENT), with key_ops[i]
	 * operations. */
	struct lincheck_value *keys;
	uint32_t *key_ops;
	uint32_t n_keys;
	uint32_t cap_keys;
	uint32_t cap_key_ops;

	/* Every key and value byte. */
	uint8_t *bytes;
	uint64_t n_bytes;
	uint64_t cap_bytes;

	/* Builder state: the key index and each client's pending op. */
	uint32_t *key_slots;
	uint32_t key_slots_cap;
	struct lincheck__client *clients;
	uint32_t n_clients;
	uint32_t clients_cap;
};

/* An empty history; lincheck_history_free releases what it grows. */
void lincheck_history_init(struct lincheck_history *h);
void lincheck_history_free(struct lincheck_history *h);

/* Copies bytes into the history's arena as a PRESENT value. */
int lincheck_history_store(struct lincheck_history *h, const void *data,
			   size_t len, struct lincheck_value *out,
			   struct lincheck_error *err);
/* The index of a key (added if new). */
int lincheck_history_key(struct lincheck_history *h, const void *data,
			 size_t len, uint32_t *out, struct lincheck_error *err);
/* The bytes of a PRESENT value (valid until the arena grows). */
const uint8_t *lincheck_value_bytes(const struct lincheck_history *h,
				    struct lincheck_value v);

/*
 * Records an invocation: op's client, invoke_time, invoke_line, key, kind,
 * arg, arg2 and delta are used; the rest is reset. LINCHECK_EMALFORMED if
 * the client already has an operation pending, invokes before its last
 * completion, or the arguments do not fit the kind; LINCHECK_ELIMIT past
 * LINCHECK_OPS_MAX, LINCHECK_KEY_OPS_MAX or LINCHECK_CLIENTS_MAX.
 */
int lincheck_history_invoke(struct lincheck_history *h,
			    const struct lincheck_op *op, uint32_t line,
			    struct lincheck_error *err);

/*
 * Completes the client's pending operation with status (OK, FAIL or INFO)
 * at time; for OK, done's out, out_int and out_known are its results.
 * done->kind and done->key must name the pending operation's kind and key
 * (check_key false skips the key). LINCHECK_EMALFORMED if no operation is
 * pending, they differ, the results do not fit, or time is before the
 * invocation.
 */
int lincheck_history_complete(struct lincheck_history *h, uint64_t client,
			      int64_t time, uint32_t line,
			      enum lincheck_status status,
			      const struct lincheck_op *done, bool check_key,
			      struct lincheck_error *err);

/* Ends a history: operations still pending become indeterminate (INFO). */
void lincheck_history_finish(struct lincheck_history *h);

/* ------------------------------------------------------------------------ */
/* Reading and writing files.                                               */

/*
 * Parses data (len bytes, not NUL-terminated) in format (AUTO: detect) into
 * h, which must be freshly initialised; name is used in messages. On error
 * h holds what was read so far (free it anyway) and err says file:line.
 */
int lincheck_parse(const char *name, const char *data, size_t len,
		   enum lincheck_format format, struct lincheck_history *h,
		   struct lincheck_error *err);

/* Reads the file at path and parses it (LINCHECK_EIO if unreadable,
 * LINCHECK_ELIMIT beyond LINCHECK_FILE_BYTES_MAX). */
int lincheck_load(const char *path, enum lincheck_format format,
		  struct lincheck_history *h, struct lincheck_error *err);

/* Writes h in the baton format (version LINCHECK_BATON_FORMAT_VERSION),
 * events ordered by time. LINCHECK_EIO if a write fails. */
int lincheck_write_baton(FILE *out, const struct lincheck_history *h);

/* ------------------------------------------------------------------------ */
/* Checking.                                                                */

enum lincheck_verdict {
	LINCHECK_LINEARIZABLE = 0,
	LINCHECK_NOT_LINEARIZABLE,
	LINCHECK_VERDICT_UNKNOWN, /* a limit stopped the search */
};

struct lincheck_limits {
	/* CLOCK_MONOTONIC time in ns after which the search gives up;
	 * 0: never. */
	int64_t deadline_ns;
	/* Bytes the search's caches may hold; 0: no limit. */
	uint64_t memory_bytes_max;
};

/* Why a pending operation could not come next in the explanation. */
enum lincheck_why {
	LINCHECK_WHY_MODEL = 0,	 /* the model refuses it in that state */
	LINCHECK_WHY_EXPLORED,	 /* allowed, but no continuation succeeds */
	LINCHECK_WHY_UNREADABLE, /* allowed, but then a get, or an incr
				    whose result was recorded (blocker),
				    could never return what it did */
};

/*
 * For a violation: the key, the longest linearizable prefix found, and at
 * that point the pending operations, none of which can come next. The
 * first pending op is `stuck`: it completed before any unlinearized op
 * was invoked after it, so something has to be ordered before it returns.
 */
struct lincheck_explanation {
	uint32_t key;
	uint32_t key_ops;    /* operations of the key the search orders */
	uint32_t prefix_len; /* longest linearizable prefix found */
	uint32_t stuck;	     /* history op index */
	uint32_t n_pending;  /* pending ops at that point, stuck included */
	uint32_t pending[LINCHECK_EXPLAIN_OPS_MAX]; /* the first of them */
	uint8_t why[LINCHECK_EXPLAIN_OPS_MAX];	    /* enum lincheck_why */
	uint32_t blocker[LINCHECK_EXPLAIN_OPS_MAX]; /* for UNREADABLE */
	uint32_t n_tail;
	uint32_t tail[LINCHECK_EXPLAIN_TAIL_MAX]; /* prefix's end, in order */
	/* The model's value after the prefix (first bytes of it); UNKNOWN
	 * for a value holding an append no read returned. */
	uint8_t value_tag; /* enum lincheck_tag */
	uint32_t value_len;
	uint8_t value[LINCHECK_EXPLAIN_VALUE_BYTES];
};

struct lincheck_result {
	enum lincheck_verdict verdict;
	/* For UNKNOWN: LINCHECK_ETIMEOUT or LINCHECK_EMEMLIMIT. */
	int unknown_reason;
	uint32_t unknown_key;
	uint32_t ops_checked;	 /* operations the search ordered */
	uint32_t keys_checked;	 /* keys searched (all of them unless not) */
	uint64_t configurations; /* distinct (set, value) pairs visited */
	int64_t elapsed_ns;	 /* set by the caller for the report; 0: none */
	struct lincheck_explanation why; /* for NOT_LINEARIZABLE */
};

/*
 * Checks h (finished) against the key-value model. Returns 0 with the
 * verdict in *res; a limit reached gives the verdict UNKNOWN, not an
 * error. LINCHECK_ENOMEM only when an allocation fails (the verdict is
 * then UNKNOWN too).
 */
int lincheck_check(const struct lincheck_history *h,
		   const struct lincheck_limits *limits,
		   struct lincheck_result *res);

/* Prints the verdict line, and with explain the explanation of a
 * violation, for the history called name. */
void lincheck_result_print(FILE *out, const char *name,
			   const struct lincheck_history *h,
			   const struct lincheck_result *res, bool explain);

/* CLOCK_MONOTONIC now, in ns. */
int64_t lincheck_now_ns(void);

/* ------------------------------------------------------------------------ */
/* The tool: `baton-lincheck [options] FILE...`; returns the exit status
 * (0 linearizable, 1 not, 2 bad input or usage, 3 unknown). */
int lincheck_cli(int argc, char **argv, FILE *out, FILE *err);

#endif

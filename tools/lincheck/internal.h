/* Cross-file internals of the lincheck library (prefix lincheck__). */
#ifndef BATON_LINCHECK_INTERNAL_H
#define BATON_LINCHECK_INTERNAL_H

#include <stdarg.h>

#include "lincheck.h"

/* A client's slot in the history builder's open-addressing table. */
struct lincheck__client {
	uint64_t id;
	int64_t last_time; /* of its last completion */
	uint32_t pending;  /* op index, or LINCHECK__NONE */
	uint8_t used;
};

#define LINCHECK__NONE UINT32_MAX

/* splitmix64's finaliser: a bijective mix of 64 bits. */
static inline uint64_t lincheck__mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9u;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebu;
	x ^= x >> 31;
	return x;
}

/* A 64-bit hash of bytes (not cryptographic; fixed, no seed). */
uint64_t lincheck__hash(const void *data, size_t len);

/* Writes "name:line: " and the formatted message into err (line 0: no
 * line), and returns code. */
int lincheck__fail(struct lincheck_error *err, int code, const char *name,
		   uint32_t line, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/* Lines of a buffer: each without its "\n" or "\r\n". */
struct lincheck__lines {
	const char *p;
	const char *end;
	uint32_t line; /* number of the line last returned, from 1 */
};

void lincheck__lines_init(struct lincheck__lines *l, const char *data,
			  size_t len);
/* 1 and the next line in *s, *n; 0 at the end; LINCHECK_ELIMIT for a line
 * longer than LINCHECK_LINE_BYTES_MAX; LINCHECK_EMALFORMED for a NUL
 * byte. */
int lincheck__lines_next(struct lincheck__lines *l, const char **s, size_t *n);

/* The message for an error lincheck__lines_next returned; returns code. */
int lincheck__line_error(struct lincheck_error *err, int code, const char *name,
			 uint32_t line);

/* Decimal integers, the whole of [s, s + n): an optional '-' then digits,
 * no leading '+' or spaces, within range. */
bool lincheck__parse_i64(const char *s, size_t n, int64_t *out);
bool lincheck__parse_u64(const char *s, size_t n, uint64_t *out);

/* Redis's strict integer syntax (string2ll): "0" or an optional '-' then
 * a non-zero digit and digits, within int64. */
bool lincheck__strict_i64(const uint8_t *s, size_t n, int64_t *out);

/*
 * The model: the value of one Redis string key. Each distinct value the
 * search meets is interned once and named by a state id, so comparing
 * states is comparing ids.
 */
struct lincheck__state {
	uint64_t hash;
	uint64_t off; /* of its bytes in the model's arena */
	uint32_t len;
	uint8_t present;
	uint8_t lost;	/* the model's lost state, which no read can see */
	uint8_t int_ok; /* the bytes are a strict int64: int_value */
	int64_t int_value;
};

struct lincheck__memo {
	uint64_t key; /* (state << 32 | op) + 1; 0: empty */
	uint32_t to;
};

struct lincheck__model {
	const struct lincheck_history *h;
	struct lincheck__state *states;
	uint32_t n_states;
	uint32_t cap_states;
	uint32_t *slots; /* state id + 1; 0: empty */
	uint32_t cap_slots;
	uint8_t *bytes;
	uint64_t n_bytes;
	uint64_t cap_bytes;
	uint8_t *scratch;
	size_t cap_scratch;
	/* A lossy cache of APPEND and INCR transitions. */
	struct lincheck__memo *memo;
	/* The state of a missing key ("" if h->missing_reads_empty). */
	uint32_t absent;
	/* Every value holding a "lost" append: one whose bytes no read or
	 * cas compare of its key contains, so no read or compare can match
	 * any such value. Telling them apart would only multiply states. */
	uint32_t lost;
};

/* What the search knows of one operation. */
struct lincheck__op_facts {
	uint32_t tag;	 /* unique per op: keys the transition cache */
	uint32_t want;	 /* GET's and CAS's comparand, interned */
	uint32_t target; /* SET's and CAS's new value, interned */
	bool lost;	 /* a lost APPEND (see above) */
};

/* The outcome of one operation in one state. */
struct lincheck__step {
	bool ok;     /* the model allows it, with its recorded result */
	uint32_t to; /* the state after it */
};

int lincheck__model_init(struct lincheck__model *m,
			 const struct lincheck_history *h);
void lincheck__model_free(struct lincheck__model *m);
/* Bytes the model holds. */
uint64_t lincheck__model_bytes(const struct lincheck__model *m);
/* The state id of a value (ABSENT or PRESENT). */
int lincheck__model_intern(struct lincheck__model *m, struct lincheck_value v,
			   uint32_t *id);
/* Applies history op `op` to state `from`; LINCHECK_ENOMEM if interning
 * the result fails. */
int lincheck__model_step(struct lincheck__model *m,
			 const struct lincheck_op *op,
			 const struct lincheck__op_facts *facts, uint32_t from,
			 struct lincheck__step *out);
/* Whether op never changes the state when the model allows it. */
bool lincheck__model_pure(const struct lincheck_op *op);

/* The per-format parsers, called by lincheck_parse with h fresh. */
int lincheck__parse_baton(struct lincheck_history *h, const char *data,
			  size_t len, struct lincheck_error *err);
int lincheck__parse_jepsen(struct lincheck_history *h, const char *data,
			   size_t len, struct lincheck_error *err);
int lincheck__parse_edn(struct lincheck_history *h, const char *data,
			size_t len, struct lincheck_error *err);

/* The baton format's byte escaping: bytes 0x20..0x7e except '%' stand for
 * themselves, every other byte is %HH. */
bool lincheck__escape_needed(uint8_t c);
/* Decodes [s, s + n) into out (room for n bytes); false if malformed. */
bool lincheck__unescape(const char *s, size_t n, uint8_t *out, size_t *out_len);
/* Writes bytes escaped; returns false if a write fails. */
bool lincheck__escape_write(FILE *f, const uint8_t *data, size_t len);

#endif

/*
 * RESP2, the Redis protocol, as batond speaks it to clients: reply writers
 * and an incremental request parser (after Redis's networking.c).
 *
 * Writers append one complete reply element to a struct baton_buf and
 * return 0, or BATON_ENOMEM with the buffer unchanged (never half a reply).
 *
 * The parser is fed bytes as they arrive, split anywhere, and hands back
 * complete commands. It accepts multibulk requests (*N\r\n$len\r\n...\r\n)
 * and inline ones (SET a b\r\n, split on spaces with Redis's quoting rules).
 * Every size is bounded by a named, configurable limit. Malformed input or
 * a broken limit is a protocol error with Redis's message; the server then
 * replies "-ERR <message>" and closes the connection, because the parser
 * is unusable after an error (every later call returns the same error).
 */
#ifndef BATON_WIRE_RESP_H
#define BATON_WIRE_RESP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "baton/buf.h"

/* ------------------------------------------------------------------------ */
/* Reply writers.                                                           */

/* The longest error message resp_error() writes; longer ones are cut. */
#define RESP_ERROR_BYTES_MAX 4096u

/* "+<s>\r\n". Any \r or \n in s becomes a space. */
int resp_simple(struct baton_buf *b, const char *s);

/* "-<message>\r\n", the message printf-formatted from fmt. The message
 * starts with the error code ("ERR syntax error", "TRYAGAIN ..."). It is
 * cut at RESP_ERROR_BYTES_MAX bytes and any \r or \n in it becomes a space,
 * so a client-supplied string can never end the line early. BATON_EINVAL
 * if fmt cannot be formatted. */
int resp_error(struct baton_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* ":<v>\r\n". */
int resp_int(struct baton_buf *b, int64_t v);

/* "$<len>\r\n<data>\r\n": binary-safe; data may be NULL when len is 0. */
int resp_bulk(struct baton_buf *b, const void *data, size_t len);

/* The null bulk string "$-1\r\n" (GET of a missing key). */
int resp_null(struct baton_buf *b);

/* The null array "*-1\r\n". */
int resp_null_array(struct baton_buf *b);

/* "*<n>\r\n": the header of an array; the caller writes the n elements. */
int resp_array(struct baton_buf *b, size_t n);

/* RESP3 (resp3.c), for connections that sent HELLO 3: "%<pairs>\r\n",
 * the header of a map (the caller writes 2 * pairs elements), "~<n>\r\n",
 * the header of a set of n elements, and "_\r\n", the null. */
int resp3_map(struct baton_buf *b, size_t pairs);
int resp3_set(struct baton_buf *b, size_t n);
/* A verbatim string: "=<len + 4>\r\n<format>:<data>\r\n", format three
 * letters ("txt"), as Redis 7 answers INFO and CLIENT LIST in RESP3. */
int resp3_verbatim(struct baton_buf *b, const char *format, const void *data,
		   size_t len);
int resp3_null(struct baton_buf *b);

/* Append to out the RESP3 form of the RESP2 replies in[0..len): every
 * null bulk and null array becomes "_", and with top_map an array at
 * in[0] with an even count becomes a map of half as many pairs (Redis 7's
 * HGETALL); every other byte is copied. Returns 0, BATON_ECORRUPT if in is
 * not well-formed RESP2, or BATON_ENOMEM; out is unchanged on failure. */
int resp3_from_resp2(const uint8_t *in, size_t len, bool top_map,
		     struct baton_buf *out);
/* The same for EXEC's reply: maps[i] (i < n_maps) turns the i-th element
 * of the top array into a map when it is an array with an even count
 * (Redis 7's HGETALL inside a transaction). Here a reply nested deeper
 * than RESP3_DEPTH_MAX is BATON_ECORRUPT. */
#define RESP3_DEPTH_MAX 32u
int resp3_from_resp2_elements(const uint8_t *in, size_t len, const bool *maps,
			      size_t n_maps, struct baton_buf *out);

/* Redis's strict decimal integer syntax (its string2ll): an optional '-',
 * then digits with no leading zero ("0" alone is fine), nothing else, and
 * within int64_t. True and *out set if s[0..len) is one. */
bool resp_parse_int(const uint8_t *s, size_t len, int64_t *out);

/* ------------------------------------------------------------------------ */
/* The request parser.                                                      */

/* Arguments in one command (Redis allows more; MSET of 32767 pairs). */
#define RESP_ARGS_MAX_DEFAULT 65536u
/* One bulk argument (Redis's proto-max-bulk-len; batond's
 * --max-bulk-bytes): 16 MiB - 64 KiB, so that a value of this size and its
 * key fit the core's 16 MiB log entry. */
#define RESP_BULK_BYTES_MAX_DEFAULT ((size_t)(16u << 20) - (64u << 10))
/* One multibulk request on the wire, every header and CRLF counted
 * (batond's --max-request-bytes): 16 MiB - 4 KiB, so that any write within
 * it encodes to a log entry of at most 16 MiB (an entry adds at most 11
 * bytes to the request's bytes). */
#define RESP_REQUEST_BYTES_MAX_DEFAULT ((size_t)(16u << 20) - (4u << 10))
/* One inline request line, and one "*N" or "$N" header line. */
#define RESP_INLINE_BYTES_MAX_DEFAULT ((size_t)64 << 10)
/* Bytes held unparsed at once (Redis's client-query-buffer-limit): one
 * request and what came with it in one read. */
#define RESP_QUERY_BYTES_MAX_DEFAULT                                           \
	(RESP_REQUEST_BYTES_MAX_DEFAULT + (1u << 20))

/* A connection's limits; each must be at least 1, but request_bytes_max
 * may be 0 (no limit on a whole request besides the others). Sizes
 * announced in headers are checked against them at the header, before a
 * byte of the body is held. */
struct resp_limits {
	uint32_t args_max;	  /* arguments in one command */
	size_t bulk_bytes_max;	  /* one bulk argument */
	size_t inline_bytes_max;  /* one inline line or header, sans \r\n */
	size_t query_bytes_max;	  /* unparsed bytes held at once */
	size_t request_bytes_max; /* one multibulk request on the wire */
};

/* Fill *l with the *_DEFAULT limits above. */
void resp_limits_default(struct resp_limits *l);

/* The protocol errors, each with its own message (resp_parser_error()). */
enum resp_protocol_error {
	RESP_PERR_NONE = 0,
	RESP_PERR_INLINE_TOO_BIG,      /* too big inline request */
	RESP_PERR_UNBALANCED_QUOTES,   /* unbalanced quotes in request */
	RESP_PERR_MBULK_COUNT_TOO_BIG, /* too big mbulk count string */
	RESP_PERR_MBULK_LEN,	       /* invalid multibulk length */
	RESP_PERR_BULK_COUNT_TOO_BIG,  /* too big bulk count string */
	RESP_PERR_EXPECTED_DOLLAR,     /* expected '$', got 'x' */
	RESP_PERR_BULK_LEN,	       /* invalid bulk length */
	RESP_PERR_BULK_CRLF,	       /* bulk argument not followed by CRLF */
	RESP_PERR_QUERY_TOO_BIG,       /* query buffer limit exceeded */
	RESP_PERR_BULK_TOO_BIG,	       /* a bulk above bulk_bytes_max */
	RESP_PERR_REQUEST_TOO_BIG,     /* a request above request_bytes_max */
	RESP_PERR_NOMEM,	       /* out of memory */
};

/* What resp_parser_next() returns besides negative BATON_E* codes. */
enum {
	RESP_OK = 0,	    /* a command was returned */
	RESP_NEED_MORE = 1, /* no complete command yet: feed more bytes */
};

/* One command. argv[i] points at lens[i] bytes (binary-safe, not
 * NUL-terminated); argv[0] is the command name. argc is 0 for an empty
 * inline line or a multibulk count <= 0, which Redis ignores silently. */
struct resp_command {
	int argc;
	const uint8_t *const *argv;
	const size_t *lens;
};

/* One connection's parser. Embed it by value; every field is private.
 *
 * Memory: the parser owns an internal buffer holding the bytes fed and not
 * yet consumed. A command returned by resp_parser_next() points into that
 * buffer and into arrays the parser owns. The argv/lens arrays stay valid
 * until the next call of any resp_parser_* function on this parser; the
 * argument bytes stay valid until the next resp_parser_feed(),
 * resp_parser_consumed() or resp_parser_free(). A caller that keeps
 * arguments longer copies them. */
struct resp_parser {
	struct resp_limits limits;
	struct baton_buf in; /* fed bytes; [0, start) were returned */
	size_t start;	     /* first byte of the command being parsed */
	size_t pos;	     /* next byte to parse */
	size_t scan;	     /* a line search resumes here */
	int state;	     /* what pos expects (resp.c) */
	uint32_t want;	     /* arguments the multibulk header announced */
	size_t bulk_len;     /* of the bulk argument being read */
	uint32_t argc;	     /* arguments parsed so far */
	uint32_t args_cap;   /* room in the three arrays below */
	size_t *offs;	     /* argument offsets into `in` */
	size_t *lens;
	const uint8_t **argv; /* offs turned into pointers, when returned */
	int rv;		      /* 0, or the sticky error */
	enum resp_protocol_error perr;
	uint64_t too_big; /* the size that broke a limit (resp.c) */
	char errmsg[128];
};

/* Initialize with the given limits (NULL: the defaults). Allocates
 * nothing, so it cannot fail; free with resp_parser_free(). Every limit
 * must be at least 1 (asserted). */
void resp_parser_init(struct resp_parser *p, const struct resp_limits *l);

/* Release everything; commands returned earlier become invalid. */
void resp_parser_free(struct resp_parser *p);

/* Append bytes read from the connection (copied). Returns 0, or a negative
 * error after which the parser is unusable and the connection should be
 * closed: BATON_ETOOBIG when the unparsed bytes would exceed
 * limits.query_bytes_max, BATON_ENOMEM, or the error an earlier call
 * returned. Invalidates the argument bytes of returned commands. */
int resp_parser_feed(struct resp_parser *p, const uint8_t *data, size_t len);

/* Take the next complete command from the bytes fed so far. Returns
 * RESP_OK with *cmd filled (see struct resp_parser for how long it stays
 * valid), RESP_NEED_MORE when the bytes end inside a command, or a
 * protocol error: BATON_ECORRUPT for malformed input, BATON_ETOOBIG for a
 * broken limit, BATON_ENOMEM; resp_parser_error() then says which. After
 * an error every call returns the same error: reply "-ERR <message>" and
 * close the connection. */
int resp_parser_next(struct resp_parser *p, struct resp_command *cmd);

/* The caller is done with every command returned so far: drop their bytes
 * (and, when idle, memory above what a quiet connection needs). */
void resp_parser_consumed(struct resp_parser *p);

/* The message of the error ("Protocol error: invalid bulk length"), to
 * send as "-ERR <message>"; "" if there was none. Owned by the parser. */
const char *resp_parser_error(const struct resp_parser *p);

/* Which protocol error happened (RESP_PERR_NONE if none). */
enum resp_protocol_error resp_parser_error_kind(const struct resp_parser *p);

/* After RESP_PERR_BULK_TOO_BIG: the length the bulk header announced;
 * after RESP_PERR_REQUEST_TOO_BIG: the request's bytes up to the end of
 * the bulk whose header broke the limit (a lower bound of its size);
 * 0 after any other error or none. */
uint64_t resp_parser_error_size(const struct resp_parser *p);

/* ------------------------------------------------------------------------ */
/* The reply scanner: where one reply ends.                                 */

/* A proxy passes another server's replies on byte for byte (the server's
 * proxy.c); it needs only to know where each reply ends and that it is
 * well formed. The scanner takes RESP2's types (+ - : $ *) and RESP3's
 * (_ , # ( ! = % ~ > |), nested aggregates to a bounded depth, null bulk
 * and null array, and is incremental: fed the same reply with more bytes
 * after RESP_NEED_MORE, it resumes where it stopped. */

/* Aggregates nested in one reply (Redis's own replies nest 2 or 3 deep). */
#define RESP_REPLY_DEPTH_MAX 64u
/* One line of a reply: a simple string, an error, a number, a header. */
#define RESP_REPLY_LINE_BYTES_MAX_DEFAULT ((size_t)64 << 10)

struct resp_reply_limits {
	size_t reply_bytes_max; /* one whole reply, every byte counted */
	size_t line_bytes_max;	/* one line, sans \r\n */
	uint32_t depth_max;	/* at most RESP_REPLY_DEPTH_MAX */
};

/* Every field is private. */
struct resp_reply_scanner {
	struct resp_reply_limits limits;
	size_t pos;  /* bytes of the current reply taken so far */
	size_t scan; /* a line search resumes here */
	uint32_t depth;
	/* Elements still to come in each open aggregate. */
	uint64_t left[RESP_REPLY_DEPTH_MAX];
	int rv; /* 0, or the sticky error */
	char errmsg[160];
};

/* Initialize; every limit must be at least 1 and depth_max at most
 * RESP_REPLY_DEPTH_MAX (asserted). Holds no memory. */
void resp_reply_scanner_init(struct resp_reply_scanner *sc,
			     const struct resp_reply_limits *l);

/* data[0..len) holds the bytes received from the first byte of the reply
 * being scanned (more of them at each call, the earlier ones unchanged).
 * Returns RESP_OK with *reply_len set to the reply's length (the scanner
 * is then ready for the next reply, which starts at data[*reply_len]),
 * RESP_NEED_MORE, or an error after which every call returns it:
 * BATON_ECORRUPT (malformed) or BATON_ETOOBIG (a limit), with the text in
 * resp_reply_scanner_error(). A size announced in a header is checked at
 * the header, before its bytes arrive. */
int resp_reply_scan(struct resp_reply_scanner *sc, const uint8_t *data,
		    size_t len, size_t *reply_len);

/* What went wrong ("bulk of 9 bytes exceeds the reply limit of ..."), or
 * "" if nothing did. */
const char *resp_reply_scanner_error(const struct resp_reply_scanner *sc);

#endif /* BATON_WIRE_RESP_H */

/*
 * baton — error codes: one table, so names, messages and codes never drift
 * apart. Every function of the library returns 0 or one of these negative
 * codes. The range starts far below errno values so the two never collide.
 */
#ifndef BATON_ERRORS_H
#define BATON_ERRORS_H

#ifdef __cplusplus
extern "C" {
#endif

#define BATON_ERRORS(X)                                                        \
	X(NOMEM, -30001, "out of memory")                                      \
	X(INVAL, -30002, "invalid argument")                                   \
	X(NOTLEADER, -30003, "this node is not the leader")                    \
	X(NOLEADER, -30004, "no leader is known")                              \
	X(BUSY, -30005,                                                        \
	  "a configuration change or leadership transfer is in progress")      \
	X(TOOBIG, -30006, "request exceeds a configured limit")                \
	X(NOTFOUND, -30007, "no such member")                                  \
	X(EXISTS, -30008, "member already present")                            \
	X(CATCHUP, -30009, "learner did not catch up in time")                 \
	X(LEADERCHANGED, -30010,                                               \
	  "leadership changed before the request completed")                   \
	X(CORRUPT, -30011, "malformed or corrupt data")                        \
	X(VERSION, -30012, "unsupported format version")                       \
	X(STATE, -30013, "operation not allowed in the current state")         \
	X(OVERLOADED, -30014,                                                  \
	  "too many uncommitted entries on the leader; retry later")           \
	X(IO, -30015, "disk I/O failed; the node stopped accepting writes")    \
	X(STALLED, -30016,                                                     \
	  "this node met data it cannot interpret and stopped applying")       \
	X(AGAIN, -30017, "not finished yet; ask again later")

enum {
#define BATON__ERROR_ENUM(name, code, text) BATON_E##name = code,
	BATON_ERRORS(BATON__ERROR_ENUM)
#undef BATON__ERROR_ENUM
};

/* Human-readable text for a BATON_E* code (or "unknown error"). Static. */
const char *baton_strerror(int code);
/* The symbolic name ("BATON_ENOTLEADER") of a code. Static string. */
const char *baton_err_name(int code);

#ifdef __cplusplus
}
#endif

#endif /* BATON_ERRORS_H */

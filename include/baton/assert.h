/*
 * baton — the one assertion macro.
 *
 * BATON_ASSERT(cond) checks an invariant the code relies on. It is never
 * compiled out, whatever NDEBUG or the build type says: a broken invariant
 * stops the node at once, naming the condition, function, file and line,
 * rather than letting it go on and corrupt replicated state. Bad input
 * (from the network, a disk or a client) is never asserted on: that is an
 * error code and a message.
 *
 * The condition is evaluated exactly once, so it must not be needed for
 * its side effects by anyone reading the code; keep it free of them.
 */
#ifndef BATON_ASSERT_H
#define BATON_ASSERT_H

#include <stdio.h>
#include <stdlib.h>

#define BATON_ASSERT(cond)                                                     \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr,                                        \
				"baton: assertion failed: %s in %s() "         \
				"(%s:%d)\n",                                   \
				#cond, __func__, __FILE__, __LINE__);          \
			fflush(stderr);                                        \
			abort();                                               \
		}                                                              \
	} while (0)

#endif /* BATON_ASSERT_H */

/*
 * Glob-style matching with Redis's rules (KEYS, SCAN MATCH).
 *
 * Every token but '*' matches exactly one byte, so when a token fails it
 * is enough to go back to the last '*' and let it swallow one more byte:
 * no recursion, at most plen * slen steps.
 */
#include <assert.h>

#include "internal.h"
#include "kv.h"

/* Does the class at pat[*i] ('[' ...) match c? Moves *i past it. An
 * unclosed class runs to the end of the pattern, as in Redis. */
static bool class_match(const uint8_t *pat, size_t plen, size_t *i, uint8_t c)
{
	assert(pat[*i] == '[');
	size_t j = *i + 1;
	bool negate = j < plen && pat[j] == '^';
	if (negate)
		j++;
	bool match = false;
	while (j < plen && pat[j] != ']') {
		if (pat[j] == '\\' && j + 1 < plen) {
			j++;
			match = match || pat[j] == c;
		} else if (j + 2 < plen && pat[j + 1] == '-') {
			uint8_t lo = pat[j], hi = pat[j + 2];
			if (lo > hi) {
				uint8_t t = lo;
				lo = hi;
				hi = t;
			}
			match = match || (c >= lo && c <= hi);
			j += 2;
		} else {
			match = match || pat[j] == c;
		}
		j++;
	}
	if (j < plen)
		j++; /* the ']' */
	*i = j;
	return negate ? !match : match;
}

/* Does the token at pat[*i] (not '*') match c? Moves *i past it. */
static bool token_match(const uint8_t *pat, size_t plen, size_t *i, uint8_t c)
{
	size_t j = *i;
	assert(j < plen && pat[j] != '*');
	switch (pat[j]) {
	case '?':
		*i = j + 1;
		return true;
	case '[':
		return class_match(pat, plen, i, c);
	case '\\':
		if (j + 1 < plen) {
			*i = j + 2;
			return pat[j + 1] == c;
		}
		break; /* a trailing backslash is itself */
	default:
		break;
	}
	*i = j + 1;
	return pat[j] == c;
}

bool kv__glob_match(const uint8_t *pat, size_t plen, const uint8_t *s,
		    size_t slen)
{
	/* Redis's stringmatchlen matches nothing against an empty string but
	 * an empty pattern ("**" misses the key ""; KEYS and SCAN take a
	 * lone "*" as "every key" before matching at all). */
	if (slen == 0)
		return plen == 0;
	size_t pi = 0, si = 0;
	bool star = false;
	size_t star_pi = 0, star_si = 0; /* after the last '*', and its byte */
	while (si < slen) {
		if (pi < plen && pat[pi] == '*') {
			while (pi < plen && pat[pi] == '*')
				pi++;
			if (pi == plen)
				return true;
			star = true;
			star_pi = pi;
			star_si = si;
			continue;
		}
		size_t next = pi;
		if (pi < plen && token_match(pat, plen, &next, s[si])) {
			pi = next;
			si++;
			continue;
		}
		if (!star)
			return false;
		pi = star_pi;
		si = ++star_si;
	}
	while (pi < plen && pat[pi] == '*')
		pi++;
	return pi == plen;
}

bool kv_glob_match(const uint8_t *pat, size_t plen, const uint8_t *s,
		   size_t slen)
{
	assert(pat != NULL || plen == 0);
	assert(s != NULL || slen == 0);
	return kv__glob_match(pat, plen, s, slen);
}

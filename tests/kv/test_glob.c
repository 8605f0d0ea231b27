/* Glob matching with Redis's rules (KEYS, SCAN MATCH). */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <string.h>

#include "internal.h"
#include "kv_util.h"

static bool m(const char *pat, const char *s)
{
	return kv__glob_match((const uint8_t *)pat, strlen(pat),
			      (const uint8_t *)s, strlen(s));
}

Test(glob, literals_and_wildcards)
{
	cr_assert(m("", ""));
	cr_assert(!m("", "a"));
	cr_assert(m("abc", "abc"));
	cr_assert(!m("abc", "abd"));
	cr_assert(!m("abc", "ab"));
	/* Redis: "" matches the empty pattern only (KEYS * lists it without
	 * matching). */
	cr_assert(!m("*", ""));
	cr_assert(!m("**", ""));
	cr_assert(m("*", "anything"));
	cr_assert(m("**", "x"));
	cr_assert(m("h?llo", "hello"));
	cr_assert(m("h?llo", "hallo"));
	cr_assert(!m("h?llo", "hllo"));
	cr_assert(!m("?", ""));
	cr_assert(m("*?", "x"));
	cr_assert(!m("*?", ""));
	cr_assert(m("h*llo", "hllo"));
	cr_assert(m("h*llo", "heeeello"));
	cr_assert(!m("h*llo", "heeeellox"));
	cr_assert(m("*llo", "hello"));
	cr_assert(m("he*", "hello"));
	cr_assert(m("a*b*c", "a_b_b_c"));
	cr_assert(!m("a*b*c", "a_c_b"));
	cr_assert(m("user:*:name", "user:1000:name"));
	cr_assert(!m("user:*:name", "user:1000:mail"));
}

Test(glob, classes)
{
	cr_assert(m("h[ae]llo", "hello"));
	cr_assert(m("h[ae]llo", "hallo"));
	cr_assert(!m("h[ae]llo", "hillo"));
	cr_assert(m("h[^e]llo", "hallo"));
	cr_assert(!m("h[^e]llo", "hello"));
	cr_assert(m("h[a-b]llo", "hbllo"));
	cr_assert(!m("h[a-b]llo", "hcllo"));
	cr_assert(m("[b-a]", "a")); /* a reversed range still works */
	cr_assert(m("[0-9a-f]*", "c0ffee"));
	cr_assert(!m("[0-9]", "a"));
	cr_assert(m("[\\]]", "]"));
	cr_assert(m("[\\-]", "-"));
	cr_assert(!m("[]", "a"));  /* an empty class matches nothing */
	cr_assert(m("[^]", "a"));  /* and its negation everything */
	cr_assert(m("[abc", "a")); /* unclosed: runs to the end */
	cr_assert(!m("[abc", "ab"));
	cr_assert(!m("a[", "a"));
	cr_assert(m("[a-]", "]")); /* a range up to ']', then unclosed */
}

Test(glob, escapes)
{
	cr_assert(m("h\\*llo", "h*llo"));
	cr_assert(!m("h\\*llo", "hello"));
	cr_assert(m("\\?", "?"));
	cr_assert(!m("\\?", "a"));
	cr_assert(m("\\[a]", "[a]"));
	cr_assert(m("a\\", "a\\")); /* a trailing backslash is itself */
	cr_assert(m("\\\\", "\\"));
}

Test(glob, binary)
{
	const uint8_t pat[] = {'a', 0, '*', 0xff};
	const uint8_t s1[] = {'a', 0, 1, 2, 0xff};
	const uint8_t s2[] = {'a', 1, 1, 2, 0xff};
	cr_assert(kv__glob_match(pat, 4, s1, 5));
	cr_assert(!kv__glob_match(pat, 4, s2, 5));
}

Test(glob, no_exponential_blowup)
{
	char s[4001], pat[64];
	memset(s, 'a', 4000);
	s[4000] = '\0';
	strcpy(pat, "a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b");
	cr_assert(!m(pat, s));
}

/* A direct recursive reading of Redis's rules, to compare with. */
static bool ref(const uint8_t *p, size_t pl, const uint8_t *s, size_t sl)
{
	while (pl > 0) {
		if (p[0] == '*') {
			while (pl > 1 && p[1] == '*') {
				p++;
				pl--;
			}
			if (pl == 1)
				return true;
			for (size_t k = 0; k <= sl; k++)
				if (ref(p + 1, pl - 1, s + k, sl - k))
					return true;
			return false;
		}
		if (sl == 0)
			return false;
		size_t used = 1;
		bool ok;
		if (p[0] == '?') {
			ok = true;
		} else if (p[0] == '[') {
			size_t j = 1;
			bool neg = j < pl && p[j] == '^';
			if (neg)
				j++;
			ok = false;
			for (; j < pl && p[j] != ']'; j++) {
				if (p[j] == '\\' && j + 1 < pl) {
					j++;
					ok |= p[j] == s[0];
				} else if (j + 2 < pl && p[j + 1] == '-') {
					uint8_t a = p[j], b = p[j + 2];
					uint8_t lo = a < b ? a : b;
					uint8_t hi = a < b ? b : a;
					ok |= s[0] >= lo && s[0] <= hi;
					j += 2;
				} else {
					ok |= p[j] == s[0];
				}
			}
			used = j < pl ? j + 1 : j;
			ok = neg ? !ok : ok;
		} else if (p[0] == '\\' && pl >= 2) {
			ok = p[1] == s[0];
			used = 2;
		} else {
			ok = p[0] == s[0];
		}
		if (!ok)
			return false;
		p += used;
		pl -= used;
		s++;
		sl--;
	}
	return sl == 0;
}

Test(glob, agrees_with_a_recursive_reading)
{
	static const uint8_t alphabet[] = "ab*?[]^-\\";
	uint64_t seed = 42;
	for (int iter = 0; iter < 200000; iter++) {
		uint8_t p[8], s[8];
		size_t pl = kvt_rand(&seed) % 8, sl = kvt_rand(&seed) % 8;
		for (size_t i = 0; i < pl; i++)
			p[i] = alphabet[kvt_rand(&seed) % 9];
		for (size_t i = 0; i < sl; i++)
			s[i] = alphabet[kvt_rand(&seed) % 9];
		/* Redis: an empty string matches the empty pattern only. */
		bool want = sl == 0 ? pl == 0 : ref(p, pl, s, sl);
		cr_assert_eq(kv__glob_match(p, pl, s, sl), want,
			     "pattern '%.*s' string '%.*s'", (int)pl, p,
			     (int)sl, s);
	}
}

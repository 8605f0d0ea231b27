/* Addresses as users write them (see address.h). */
#include "address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/errors.h"

#define FORMS                                                                  \
	"write HOST:PORT with an IPv4 number (127.0.0.1:7001), an IPv6 "       \
	"number in brackets ([::1]:7001) or a host name (node1.example:7001)"

static int refuse(char *why, size_t cap, const char *fmt, ...)
{
	if (why != NULL && cap > 0) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why, cap, fmt, ap);
		va_end(ap);
	}
	return BATON_EINVAL;
}

/* Letters, digits, '-' and '_', in dot-separated labels of 1 to 63. */
static bool valid_name(const char *host)
{
	size_t label = 0;
	for (const char *p = host; *p != '\0'; p++) {
		if (*p == '.') {
			if (label == 0)
				return false;
			label = 0;
			continue;
		}
		bool ok = (*p >= 'a' && *p <= 'z') ||
			  (*p >= 'A' && *p <= 'Z') ||
			  (*p >= '0' && *p <= '9') || *p == '-' || *p == '_';
		if (!ok || ++label > 63)
			return false;
	}
	return label > 0;
}

static bool only_digits_and_dots(const char *host)
{
	return strspn(host, "0123456789.") == strlen(host);
}

static int parse_port(const char *text, const char *port, uint16_t *out,
		      char *why, size_t cap)
{
	char *end = NULL;
	unsigned long n = 0;
	if (*port >= '0' && *port <= '9')
		n = strtoul(port, &end, 10);
	if (end == NULL || *end != '\0' || n == 0 || n > 65535)
		return refuse(why, cap,
			      "address '%s': the port '%s' is not a number "
			      "from 1 to 65535",
			      text, port);
	*out = (uint16_t)n;
	return 0;
}

/* "[v6]:port" */
static int parse_bracketed(const char *text, struct baton_addr *out, char *why,
			   size_t cap)
{
	const char *close = strchr(text, ']');
	if (close == NULL)
		return refuse(why, cap,
			      "address '%s' has no ']' closing its IPv6 "
			      "number: %s",
			      text, FORMS);
	if (close[1] != ':' || close[2] == '\0')
		return refuse(why, cap,
			      "address '%s' has no port after ']': %s", text,
			      FORMS);
	size_t len = (size_t)(close - text - 1);
	if (len == 0 || len >= sizeof out->host)
		return refuse(why, cap,
			      "address '%s': '%.*s' is not an IPv6 number",
			      text, (int)len, text + 1);
	memcpy(out->host, text + 1, len);
	out->host[len] = '\0';
	struct sockaddr_storage ss;
	out->family = AF_INET6;
	if (parse_port(text, close + 2, &out->port, why, cap) != 0)
		return BATON_EINVAL;
	if (baton_addr_numeric(out, &ss) != 0)
		return refuse(why, cap,
			      "address '%s': '%s' is not an IPv6 number", text,
			      out->host);
	return 0;
}

int baton_addr_parse(const char *text, struct baton_addr *out, char *why,
		     size_t why_cap)
{
	memset(out, 0, sizeof *out);
	if (text == NULL || text[0] == '\0')
		return refuse(why, why_cap, "the address is empty: %s", FORMS);
	if (text[0] == '[')
		return parse_bracketed(text, out, why, why_cap);
	const char *colon = strrchr(text, ':');
	if (colon == NULL)
		return refuse(why, why_cap, "address '%s' has no port: %s",
			      text, FORMS);
	size_t len = (size_t)(colon - text);
	if (memchr(text, ':', len) != NULL)
		return refuse(why, why_cap,
			      "address '%s' looks like an IPv6 number without "
			      "brackets: write it as [ADDRESS]:PORT, e.g. "
			      "[::1]:7001",
			      text);
	if (len == 0)
		return refuse(why, why_cap, "address '%s' has no host: %s",
			      text, FORMS);
	if (len > BATON_ADDR_HOST_MAX)
		return refuse(why, why_cap,
			      "address '%.40s...': its host has %zu "
			      "characters, more than the %u a host name may "
			      "have",
			      text, len, BATON_ADDR_HOST_MAX);
	memcpy(out->host, text, len);
	out->host[len] = '\0';
	if (parse_port(text, colon + 1, &out->port, why, why_cap) != 0)
		return BATON_EINVAL;
	struct in_addr v4;
	if (inet_pton(AF_INET, out->host, &v4) == 1) {
		out->family = AF_INET;
		return 0;
	}
	if (only_digits_and_dots(out->host))
		return refuse(why, why_cap,
			      "address '%s': '%s' is not an IPv4 number", text,
			      out->host);
	if (!valid_name(out->host))
		return refuse(why, why_cap,
			      "address '%s': '%s' is not a host name (letters, "
			      "digits, '-' and '_' in labels of 1 to 63 "
			      "separated by dots)",
			      text, out->host);
	out->family = AF_UNSPEC;
	return 0;
}

int baton_addr_numeric(const struct baton_addr *a, struct sockaddr_storage *out)
{
	memset(out, 0, sizeof *out);
	if (a->family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)out;
		in->sin_family = AF_INET;
		in->sin_port = htons(a->port);
		return inet_pton(AF_INET, a->host, &in->sin_addr) == 1
			       ? 0
			       : BATON_EINVAL;
	}
	if (a->family != AF_INET6)
		return BATON_EINVAL;
	/* getaddrinfo rather than inet_pton: it takes a zone (fe80::1%eth0). */
	struct addrinfo hints = {.ai_family = AF_INET6,
				 .ai_flags = AI_NUMERICHOST};
	struct addrinfo *res = NULL;
	if (getaddrinfo(a->host, NULL, &hints, &res) != 0 || res == NULL)
		return BATON_EINVAL;
	memcpy(out, res->ai_addr, res->ai_addrlen);
	((struct sockaddr_in6 *)out)->sin6_port = htons(a->port);
	freeaddrinfo(res);
	return 0;
}

int baton_addr_resolve(const char *text, struct sockaddr_storage *out,
		       char *why, size_t why_cap)
{
	struct baton_addr a;
	if (baton_addr_parse(text, &a, why, why_cap) != 0)
		return BATON_EINVAL;
	if (a.family != AF_UNSPEC)
		return baton_addr_numeric(&a, out);
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM};
	struct addrinfo *res = NULL;
	int rv = getaddrinfo(a.host, NULL, &hints, &res);
	if (rv != 0 || res == NULL)
		return refuse(why, why_cap, "cannot resolve '%s' (of '%s'): %s",
			      a.host, text,
			      rv != 0 ? gai_strerror(rv) : "no address");
	memset(out, 0, sizeof *out);
	memcpy(out, res->ai_addr, res->ai_addrlen);
	if (out->ss_family == AF_INET)
		((struct sockaddr_in *)out)->sin_port = htons(a.port);
	else
		((struct sockaddr_in6 *)out)->sin6_port = htons(a.port);
	freeaddrinfo(res);
	return 0;
}

static bool sockaddr_is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 =
			(const struct sockaddr_in6 *)sa;
		return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
	}
	return false;
}

bool baton_addr_is_loopback(const char *text)
{
	struct baton_addr a;
	if (baton_addr_parse(text, &a, NULL, 0) != 0)
		return false;
	struct sockaddr_storage ss;
	if (a.family != AF_UNSPEC)
		return baton_addr_numeric(&a, &ss) == 0 &&
		       sockaddr_is_loopback((struct sockaddr *)&ss);
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM};
	struct addrinfo *res = NULL;
	if (getaddrinfo(a.host, NULL, &hints, &res) != 0 || res == NULL)
		return false;
	bool all = true;
	for (struct addrinfo *r = res; r != NULL; r = r->ai_next)
		all = all && sockaddr_is_loopback(r->ai_addr);
	freeaddrinfo(res);
	return all;
}

void baton_sockaddr_text(const struct sockaddr *sa, char *out, size_t cap)
{
	char ip[INET6_ADDRSTRLEN] = "?";
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &in->sin_addr, ip, sizeof ip);
		snprintf(out, cap, "%s:%u", ip, (unsigned)ntohs(in->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 =
			(const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof ip);
		snprintf(out, cap, "[%s]:%u", ip,
			 (unsigned)ntohs(in6->sin6_port));
	} else {
		snprintf(out, cap, "?");
	}
}

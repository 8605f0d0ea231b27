/*
 * Addresses as users write them, "HOST:PORT", where HOST is an IPv4 number
 * (127.0.0.1), an IPv6 number in brackets ([::1]) or a host name
 * (node1.example). One parser for every address batond, baton-relay and
 * batonctl take, so they accept and refuse alike; one printer, so IPv6 is
 * shown in brackets everywhere.
 *
 * A name is kept as given and resolved where it is used: listening
 * addresses once at start (baton_addr_resolve, which blocks), addresses a
 * node connects to on every connection (address_uv.c, on the loop), so a
 * peer whose name moves to a new IP is found again.
 */
#ifndef BATON_UTIL_ADDRESS_H
#define BATON_UTIL_ADDRESS_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* The longest host name DNS allows (RFC 1035: 253 characters written). */
#define BATON_ADDR_HOST_MAX 253u
/* Room for a refusal's sentence. */
#define BATON_ADDR_WHY_MAX 320u

/* A parsed "HOST:PORT". */
struct baton_addr {
	char host[BATON_ADDR_HOST_MAX + 1]; /* IPv6 without its brackets */
	uint16_t port;
	int family; /* AF_INET, AF_INET6 for a number, AF_UNSPEC for a name */
};

/* Parse text into *out: 0, or BATON_EINVAL with a sentence in why (what
 * was found and the forms accepted). why may be NULL. */
int baton_addr_parse(const char *text, struct baton_addr *out, char *why,
		     size_t why_cap);

/* The socket address of a parsed number: 0, or BATON_EINVAL for a name
 * (it needs resolving). */
int baton_addr_numeric(const struct baton_addr *a,
		       struct sockaddr_storage *out);

/* Parse and resolve text now (getaddrinfo: it blocks, so only at start or
 * in a command-line tool): the first address the resolver gives, into
 * *out. 0, or BATON_EINVAL with the reason in why. */
int baton_addr_resolve(const char *text, struct sockaddr_storage *out,
		       char *why, size_t why_cap);

/* True if text resolves and every address it resolves to is a loopback
 * one (127.0.0.0/8, ::1). */
bool baton_addr_is_loopback(const char *text);

/* "1.2.3.4:5" or "[::1]:5" (out gets "?" for another family). */
void baton_sockaddr_text(const struct sockaddr *sa, char *out, size_t cap);

#endif /* BATON_UTIL_ADDRESS_H */

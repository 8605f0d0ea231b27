/*
 * The node-side relay client proves its cluster's relay secret
 * (docs/relay-server.md "Authentication"): against a baton-relay given
 * --cluster-secret old=FILE, a client with that secret registers, one
 * without a secret or with another is refused, keeps retrying and
 * records why.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "client_fixture.h"
#include "relay_auth.h"

TestSuite(relay_client_auth, .init = loop_setup, .fini = teardown,
	  .timeout = 120);

static char secret_path[160], flag[200];

static void write_secret(const char *bytes)
{
	snprintf(secret_path, sizeof secret_path, "%s/secret", relay.dir);
	int fd = open(secret_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, bytes, strlen(bytes)), (ssize_t)strlen(bytes));
	close(fd);
}

static struct baton_peer_secret secret;

static void use_secret(const char *bytes)
{
	secret.len = strlen(bytes);
	memcpy(secret.bytes, bytes, secret.len);
	node_relay_secret = &secret;
}

static bool refused_for_proof(void *arg)
{
	struct test_node *t = arg;
	struct relay_client_status st;
	relay_client_status(t->rc, &st);
	return strstr(st.last_error, "authentication failed") != NULL &&
	       st.reconnects >= 2;
}

Test(relay_client_auth, only_a_client_with_the_secret_registers)
{
	write_secret("the relay secret of cluster old");
	snprintf(flag, sizeof flag, "--cluster-secret=old=%s", secret_path);
	relay_extra_flag = flag;
	relay_start(false);

	use_secret("the relay secret of cluster old");
	struct test_node a;
	node_start(&a, "old", 1);
	node_relay_secret = NULL; /* the next clients have none */
	cr_assert(run_until(view_complete, (void *)(uintptr_t)1, 10000),
		  "the client with the secret did not register");

	struct test_node b;
	node_start(&b, "old", 2);
	cr_assert(run_until(refused_for_proof, &b, 10000),
		  "a client without the secret was not refused");
	struct relay_client_status st;
	relay_client_status(b.rc, &st);
	cr_assert(!st.registered);
	cr_assert(strstr(st.last_error, "no proof") != NULL, "%s",
		  st.last_error);

	use_secret("another secret, not the cluster's");
	struct test_node c;
	node_start(&c, "old", 3);
	node_relay_secret = NULL;
	cr_assert(run_until(refused_for_proof, &c, 10000),
		  "a client with another secret was not refused");
	relay_client_status(c.rc, &st);
	cr_assert(strstr(st.last_error, "wrong proof") != NULL, "%s",
		  st.last_error);
	/* a is still the only node of the view. */
	cr_assert_eq(a.view_n, 1u);
	finish();
	unlink(secret_path);
}

/*
 * The node-side relay client (src/relay/client*.c) against the real
 * baton-relay binary: nothing lost or duplicated across a SIGKILL and
 * restart of the relay mid-stream. The suite's fixture (loop_setup,
 * teardown) is declared in test_client.c, with the suite.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdint.h>

#include "client_fixture.h"

Test(relay_client, relay_killed_and_restarted_mid_stream)
{
	relay_start(true);
	struct test_node o1, o2, n1;
	start_three(&o1, &o2, &n1);
	uint64_t view_before = o1.view;
	struct traffic tr = {.n = 2};
	tr.flows[0] = (struct flow){
		.src = 0, .cluster = "new", .node = 1, .total = 1000};
	tr.flows[1] = (struct flow){.src = 2, .cluster = "old", .total = 500};
	traffic_start(&tr, 3);
	struct expect some = {.to = 2, .src = 0, .count = 300};
	cr_assert(run_until(delivered_at_least, &some, 30000));
	cr_assert_lt(got(2, 0, false), 1000, "all sent before the kill");

	relay_kill(SIGKILL);
	/* Let the clients notice and retry against nothing for a while. */
	run_until(all_closed, NULL, 300);
	relay_start(false); /* the state file keeps it active */

	struct expectations x = {.n = 3};
	x.e[0] = (struct expect){.to = 2, .src = 0, .count = 1000};
	x.e[1] = (struct expect){
		.to = 0, .src = 2, .multicast = true, .count = 500};
	x.e[2] = (struct expect){
		.to = 1, .src = 2, .multicast = true, .count = 500};
	cr_assert(run_until(delivered_and_drained, &x, 60000),
		  "not everything was delivered and acknowledged after the "
		  "restart: %llu, %llu, %llu",
		  (unsigned long long)got(2, 0, false),
		  (unsigned long long)got(0, 2, true),
		  (unsigned long long)got(1, 2, true));
	traffic_stop(&tr);
	check_exact(&x);
	for (size_t i = 0; i < n_nodes; i++) {
		struct relay_client_status st;
		relay_client_status(all_nodes[i]->rc, &st);
		cr_assert_geq(st.reconnects, 1, "node %zu did not reconnect",
			      i);
		cr_assert(st.active);
	}
	cr_assert_gt(o1.view, view_before, "view numbers went back");
	finish();
}

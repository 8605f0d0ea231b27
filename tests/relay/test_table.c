/*
 * The relay's node table (src/relay/table.c): sorted as a VIEW lists it,
 * one entry per (cluster id, node id), a newer registration replacing the
 * older in place, the 256-node limit, removal; and the VIEW built from it
 * encodes (the codec checks its order).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "baton/errors.h"
#include "table.h"

static struct relay_table table;
static int conns[BATON_RELAY_NODES_MAX + 2]; /* stand-ins: their addresses */

static struct baton_relay_hello
hello_of(const char *cluster, baton_node_id node, uint64_t incarnation)
{
	struct baton_relay_hello h = {
		.cluster_id = {cluster, (uint16_t)strlen(cluster)},
		.node_id = node,
		.incarnation = incarnation,
		.release = {1, 3, 0},
		.address = {"10.0.0.1:7001", 13},
	};
	return h;
}

static struct relay_node *reg(const char *cluster, baton_node_id node,
			      uint64_t incarnation, void *conn, void **replaced)
{
	struct baton_relay_hello h = hello_of(cluster, node, incarnation);
	return relay_table_register(&table, &h, conn, replaced);
}

static void check_view_encodes(void)
{
	struct baton_relay_node nodes[BATON_RELAY_NODES_MAX];
	relay_table_view(&table, nodes);
	struct baton_relay_frame f = {.type = BATON_RELAY_VIEW};
	f.u.view.number = 1;
	f.u.view.node_count = table.count;
	f.u.view.nodes = nodes;
	static uint8_t buf[BATON_RELAY_LIST_BODY_MAX + BATON_RELAY_HEADER_LEN];
	size_t len = 0;
	struct baton_relay_err err = {0};
	cr_assert_eq(baton_relay_encode(&f, BATON_RELAY_TO_NODE, buf,
					sizeof(buf), &len, &err),
		     0, "%s", err.text);
}

Test(relay_table, sorted_by_cluster_bytes_then_node)
{
	relay_table_init(&table);
	void *replaced = NULL;
	cr_assert_not_null(reg("old", 2, 1, &conns[0], &replaced));
	cr_assert_not_null(reg("new", 1, 1, &conns[1], &replaced));
	cr_assert_not_null(reg("old", 1, 1, &conns[2], &replaced));
	cr_assert_not_null(reg("ol", 9, 1, &conns[3], &replaced));
	cr_assert_null(replaced);
	cr_assert_eq(table.count, 4);
	const char *want_cluster[] = {"new", "ol", "old", "old"};
	baton_node_id want_node[] = {1, 9, 1, 2};
	for (int i = 0; i < 4; i++) {
		cr_assert_eq(table.nodes[i].cluster_id_len,
			     strlen(want_cluster[i]));
		cr_assert_eq(memcmp(table.nodes[i].cluster_id, want_cluster[i],
				    table.nodes[i].cluster_id_len),
			     0);
		cr_assert_eq(table.nodes[i].node_id, want_node[i]);
	}
	check_view_encodes();
}

Test(relay_table, newer_registration_replaces_in_place)
{
	relay_table_init(&table);
	void *replaced = NULL;
	reg("old", 1, 11, &conns[0], &replaced);
	reg("new", 1, 21, &conns[1], &replaced);
	struct relay_node *n = reg("old", 1, 12, &conns[2], &replaced);
	cr_assert_eq(replaced, &conns[0]);
	cr_assert_eq(table.count, 2);
	cr_assert_eq(n->incarnation, 12);
	cr_assert_eq(n->conn, &conns[2]);
	struct baton_relay_str old = {"old", 3};
	cr_assert_eq(relay_table_find(&table, old, 1), n);
	/* A disconnected node (conn NULL) re-registering replaces nothing
	 * to close. */
	n->conn = NULL;
	reg("old", 1, 13, &conns[3], &replaced);
	cr_assert_null(replaced);
}

Test(relay_table, full_refuses_a_new_node_not_a_known_one)
{
	relay_table_init(&table);
	void *replaced = NULL;
	for (baton_node_id i = 1; i <= BATON_RELAY_NODES_MAX; i++)
		cr_assert_not_null(reg("c", i, 1, &conns[0], &replaced));
	cr_assert_eq(table.count, BATON_RELAY_NODES_MAX);
	cr_assert_null(
		reg("c", BATON_RELAY_NODES_MAX + 1, 1, &conns[1], &replaced));
	cr_assert_null(reg("a", 1, 1, &conns[1], &replaced));
	cr_assert_not_null(reg("c", 7, 2, &conns[1], &replaced));
	cr_assert_eq(table.count, BATON_RELAY_NODES_MAX);
	check_view_encodes();
}

Test(relay_table, remove_keeps_the_order)
{
	relay_table_init(&table);
	void *replaced = NULL;
	for (baton_node_id i = 1; i <= 5; i++)
		reg("old", i, i, &conns[i], &replaced);
	struct baton_relay_str old = {"old", 3};
	relay_table_remove(&table, relay_table_find(&table, old, 3));
	cr_assert_eq(table.count, 4);
	cr_assert_null(relay_table_find(&table, old, 3));
	baton_node_id want[] = {1, 2, 4, 5};
	for (int i = 0; i < 4; i++)
		cr_assert_eq(table.nodes[i].node_id, want[i]);
	struct baton_relay_peer p =
		relay_node_peer(relay_table_find(&table, old, 4));
	cr_assert_eq(p.node_id, 4);
	cr_assert_eq(p.incarnation, 4);
	check_view_encodes();
}

Test(relay_table, forget_only_nodes_disconnected_past_the_grace)
{
	relay_table_init(&table);
	void *replaced = NULL;
	for (baton_node_id i = 1; i <= 4; i++)
		reg("old", i, i, &conns[i], &replaced);
	table.nodes[0].conn = NULL; /* node 1: disconnected at 1000 */
	table.nodes[0].disconnected_ms = 1000;
	table.nodes[2].conn = NULL; /* node 3: disconnected at 1500 */
	table.nodes[2].disconnected_ms = 1500;
	cr_assert_eq(relay_table_forget(&table, 1999, 1000), 0);
	cr_assert_eq(relay_table_forget(&table, 2000, 1000), 1);
	cr_assert_eq(table.count, 3);
	cr_assert_eq(table.nodes[0].node_id, 2);
	cr_assert_eq(relay_table_forget(&table, 9000, 1000), 1);
	cr_assert_eq(table.count, 2);
	cr_assert_eq(table.nodes[0].node_id, 2);
	cr_assert_eq(table.nodes[1].node_id, 4);
	check_view_encodes();
}

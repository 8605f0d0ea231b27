/*
 * The table of registered nodes, sorted as a VIEW lists them.
 */
#include "table.h"

#include <string.h>

#include "baton/assert.h"

void relay_table_init(struct relay_table *t)
{
	BATON_ASSERT(t != NULL);
	memset(t, 0, sizeof(*t));
	BATON_ASSERT(t->count == 0);
}

/* Negative, 0 or positive as node a sorts before, with or after the key
 * (cluster id bytewise, a prefix first, then node id). */
static int compare_key(const struct relay_node *a, struct baton_relay_str cid,
		       baton_node_id node_id)
{
	size_t common =
		a->cluster_id_len < cid.len ? a->cluster_id_len : cid.len;
	int c = memcmp(a->cluster_id, cid.ptr, common);
	if (c != 0)
		return c;
	if (a->cluster_id_len != cid.len)
		return a->cluster_id_len < cid.len ? -1 : 1;
	if (a->node_id != node_id)
		return a->node_id < node_id ? -1 : 1;
	return 0;
}

/* The index of the first entry not before the key. */
static uint16_t lower_bound(const struct relay_table *t,
			    struct baton_relay_str cid, baton_node_id node_id)
{
	uint16_t lo = 0, hi = t->count;
	while (lo < hi) {
		uint16_t mid = (uint16_t)(lo + (hi - lo) / 2);
		if (compare_key(&t->nodes[mid], cid, node_id) < 0)
			lo = (uint16_t)(mid + 1);
		else
			hi = mid;
	}
	return lo;
}

struct relay_node *relay_table_find(struct relay_table *t,
				    struct baton_relay_str cluster_id,
				    baton_node_id node_id)
{
	BATON_ASSERT(t->count <= BATON_RELAY_NODES_MAX);
	uint16_t i = lower_bound(t, cluster_id, node_id);
	if (i < t->count && compare_key(&t->nodes[i], cluster_id, node_id) == 0)
		return &t->nodes[i];
	return NULL;
}

struct relay_node *relay_table_register(struct relay_table *t,
					const struct baton_relay_hello *hello,
					void *conn, void **replaced)
{
	BATON_ASSERT(conn != NULL && replaced != NULL);
	BATON_ASSERT(hello->cluster_id.len >= 1 &&
		     hello->cluster_id.len <= BATON_RELAY_ID_MAX);
	BATON_ASSERT(hello->address.len >= 1 &&
		     hello->address.len <= BATON_RELAY_ADDR_MAX);
	*replaced = NULL;
	uint16_t i = lower_bound(t, hello->cluster_id, hello->node_id);
	struct relay_node *n = &t->nodes[i];
	bool exists = i < t->count &&
		      compare_key(n, hello->cluster_id, hello->node_id) == 0;
	if (exists) {
		*replaced = n->conn;
	} else {
		if (t->count == BATON_RELAY_NODES_MAX)
			return NULL;
		memmove(&t->nodes[i + 1], &t->nodes[i],
			(size_t)(t->count - i) * sizeof(t->nodes[0]));
		t->count++;
		memset(n, 0, sizeof(*n));
		memcpy(n->cluster_id, hello->cluster_id.ptr,
		       hello->cluster_id.len);
		n->cluster_id_len = hello->cluster_id.len;
		n->node_id = hello->node_id;
	}
	n->incarnation = hello->incarnation;
	n->release = hello->release;
	memcpy(n->address, hello->address.ptr, hello->address.len);
	n->address_len = hello->address.len;
	n->conn = conn;
	return n;
}

void relay_table_remove(struct relay_table *t, struct relay_node *n)
{
	BATON_ASSERT(n >= t->nodes && n < t->nodes + t->count);
	size_t i = (size_t)(n - t->nodes);
	memmove(&t->nodes[i], &t->nodes[i + 1],
		(t->count - i - 1) * sizeof(t->nodes[0]));
	t->count--;
	BATON_ASSERT(t->count < BATON_RELAY_NODES_MAX);
}

uint16_t relay_table_forget(struct relay_table *t, uint64_t now_ms,
			    uint64_t grace_ms)
{
	BATON_ASSERT(t->count <= BATON_RELAY_NODES_MAX);
	uint16_t kept = 0;
	for (uint16_t i = 0; i < t->count; i++) {
		const struct relay_node *n = &t->nodes[i];
		if (n->conn == NULL && now_ms >= n->disconnected_ms &&
		    now_ms - n->disconnected_ms >= grace_ms)
			continue;
		if (kept != i)
			t->nodes[kept] = *n;
		kept++;
	}
	uint16_t removed = (uint16_t)(t->count - kept);
	t->count = kept;
	BATON_ASSERT(t->count + removed <= BATON_RELAY_NODES_MAX);
	return removed;
}

struct baton_relay_peer relay_node_peer(const struct relay_node *n)
{
	BATON_ASSERT(n->node_id != 0 && n->incarnation != 0);
	struct baton_relay_peer p = {
		.cluster_id = {n->cluster_id, n->cluster_id_len},
		.node_id = n->node_id,
		.incarnation = n->incarnation,
	};
	BATON_ASSERT(p.cluster_id.len >= 1);
	return p;
}

void relay_table_view(const struct relay_table *t, struct baton_relay_node *out)
{
	BATON_ASSERT(t->count <= BATON_RELAY_NODES_MAX);
	for (uint16_t i = 0; i < t->count; i++) {
		const struct relay_node *n = &t->nodes[i];
		out[i] = (struct baton_relay_node){
			.cluster_id = {n->cluster_id, n->cluster_id_len},
			.node_id = n->node_id,
			.incarnation = n->incarnation,
			.release = n->release,
			.address = {n->address, n->address_len},
			.connected = n->conn != NULL,
		};
		BATON_ASSERT(i == 0 ||
			     compare_key(&t->nodes[i - 1], out[i].cluster_id,
					 n->node_id) < 0);
	}
}

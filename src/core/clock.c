/*
 * The clock bar (BATON_EVENT_CLOCK). The core never reads a clock; its
 * driver compares this node's wall clock with its peers' (src/node/clock.c)
 * and bars the node when a majority of the voters disagree with it by more
 * than the driver's bound. A barred node does not stand for election and
 * ignores TimeoutNow: its machine-time stamps could not be trusted, and it
 * would only be barred again. A barred leader hands leadership to the most
 * up-to-date voter, and steps down when that fails or expires. Its lease
 * ends with it, so followers elect a leader whose clock agrees with theirs.
 */
#include "core.h"

void baton__clock_barred(struct baton_raft *r, bool barred)
{
	bool was = r->clock_barred;
	r->clock_barred = barred;
	if (!barred || was || r->role != BATON_LEADER)
		return;
	baton__refuse(r, "handing leadership over: this node's clock differs "
			 "from a majority of the voters' beyond the bound");
	baton__clock_leader_tick(r);
}

void baton__clock_leader_tick(struct baton_raft *r)
{
	BATON_ASSERT(r->role == BATON_LEADER && r->clock_barred);
	if (r->transfer_target != 0)
		return; /* under way: let it finish or expire */
	if (!r->handover_tried) {
		r->handover_tried = true;
		if (baton__transfer(r, 0) == 0)
			return;
	}
	/* No voter to hand over to, or the transfer failed. */
	baton__become_follower(r, r->term, 0);
	BATON_ASSERT(r->role == BATON_FOLLOWER);
}

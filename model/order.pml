/*
 * order.pml -- per-object order on a queue route, for SPIN: the order
 * gate the route's `order.by` puts in the key ledger's begin (built in
 * ledger/order.go, the Streams queue's scripts in queue/redis.go and the
 * Kafka backend's queue/kafka/order.go; see THE CODE below for where it
 * departs from this model).
 *
 * K events of one `order.by` value are acknowledged in sequence 1..K (the
 * sequence assigned in the same step as the durable enqueue). N instances'
 * workers read the events' entries in any order, as a queue transport
 * does (retries, reclaims, shards, partitions reorder them).
 *
 * THE GATE
 *   head     the least sequence of the value not yet finished (delivered,
 *            skipped, or dead-lettered with on_dead: continue)
 *   begin    of an event whose sequence is not head: the entry is parked
 *            in the value's wait set instead of tried (no attempt counted);
 *            of the head: begun as on any queue route (owner and token
 *            fenced, the lease renewed)
 *   settle   delivered (or dead with continue): head moves past every
 *            finished sequence, and a parked head is handed back to the
 *            ready entries with a new token (in the same step; with
 *            -DSPLIT_HANDBACK in a step of its own, which an instance may
 *            die before: a sweeper hands parked heads back, as Kafka's
 *            produce of the handed-back record needs); retry: head stays
 *   dead     with -DHOLD (on_dead: hold) head stays until the operator
 *            replays the event (delivered later) or purges it (head moves)
 *
 * PROPERTIES
 *   O1 "one at a time". A try of an event begins only while no try of
 *      another event of the value is in flight, unless that one is
 *      excused: its instance died or stalled past its lease after it
 *      began (nothing stops a request already on its way).
 *   O2 "in order". The upstream accepts a try of event e only when every
 *      event before e is finished, and no event after e was accepted
 *      before, unless the try is excused as in O1 (a copy of an event sent
 *      by an instance that died or stalled may arrive late).
 *   O3 "none stuck" (-DLIVE, weak fairness): every acknowledged event is
 *      eventually finished.
 *
 * THE CODE, and where it departs from the model
 *   head     is the least sequence in the value's line (a zset of its
 *            undelivered events; leaving it is "finished"), so a key an
 *            operator deletes also lets the next one go.
 *   hand-back  Redis Streams: in the settle's (purge's, delete's) script,
 *            a new live token and XADD, as modelled. Memory queue: under
 *            the queue's lock in the same step, but the new token is the
 *            key's pending one (as Kafka's), adopted by the begin of the
 *            handed-back entry; the old token stays live with no entry
 *            carrying it (the parked one was dropped), so of any two
 *            copies the first begun wins, as with ev_tok++. Kafka:
 *            SPLIT_HANDBACK; the settle makes the parked head due, the
 *            produce (of the record read back from its parked position)
 *            is its own step, and the sweeper hands a due head back
 *            again after the backend's hand-back redo (30 s), with the SAME
 *            pending token (not a new one per hand-back as here), so a
 *            consumer slower than the redo is never raced by a chain of
 *            fresh tokens; two records with one token are one event.
 *   replay   with on_dead: continue (not modelled) the replayed event
 *            takes a new sequence: delivered after the events of its
 *            value queued before the replay.
 *   stale    (order.stale) is not modelled: the head is begun, found
 *            older than the greatest delivered stale value of its value,
 *            and settled as delivered with the skipped answer.
 *   The stall excuse (O1, O2) is the documented limit: a copy sent by an
 *   instance that stalled past its lease can reach the upstream after a
 *   later event of its value (docs/queue.md).
 *
 * MUTATIONS (each must be caught): NO_GATE (begin ignores head: O1 or
 * O2), ADVANCE_ON_RETRY (a retry moves head: O2), NO_HANDBACK (a parked
 * head is never handed back: O3), NO_SWEEP with SPLIT_HANDBACK (a
 * hand-back lost with its instance is never redone: O3); STRICT_STALL
 * withdraws the stall excuse (O1, O2: a request on its way cannot be
 * stopped).
 */

#ifndef N
#define N 2
#endif
#ifndef K
#define K 3
#endif
#ifndef CRASHES
#define CRASHES 1
#endif
#ifndef STALLS
#define STALLS 1
#endif
#ifndef FAILS
#define FAILS 2
#endif

/* event states */
#define NONE   0
#define QUEUED 1
#define DONE   2
#define DEAD   3

/* where a queued event is */
#define P_READY  0          /* an entry, ready or pending to a consumer     */
#define P_PARKED 1          /* in the value's wait set                      */
#define P_RETRY  2          /* waiting for its retry                        */

/* worker stages */
#define W_IDLE 0
#define W_HELD 1            /* took an entry, not begun                     */
#define W_TRY  2            /* begun: the request is on its way             */

byte ev_st[K + 1];
byte ev_tok[K + 1];         /* the live token; an entry carries one         */
byte ev_place[K + 1];
byte ent_tok[K + 1];        /* the event's entry: its token (0: none)       */
byte ent_own[K + 1];        /* pending to worker i+1; 0: ready or nobody's  */
bit  ent_idle[K + 1];       /* its lease ran out: another may take it       */
bit  ev_acc[K + 1];         /* the upstream accepted a try of the event     */
byte head = 1;
byte acked;                 /* events acknowledged so far (1..acked)        */
bit  handback;              /* SPLIT_HANDBACK: a hand-back is due           */

byte w_st[N];
byte w_ev[N];
byte w_tok[N];
bit  w_exc[N];              /* its try is excused (died or stalled)         */

byte crashes, stalls, fails;
bit O1_, O2_;
byte j;

#define FINAL(e) (ev_st[e] == DONE || (ev_st[e] == DEAD && !HOLD_ON))
#ifdef HOLD
#define HOLD_ON 1
#else
#define HOLD_ON 0
#endif

/* O1: no unexcused try of another event in flight */
#define OTHER_TRY(m, e) (w_st[m] == W_TRY && w_ev[m] != e && !w_exc[m])
#if N > 2
#define O1_OK(e) (!OTHER_TRY(0, e) && !OTHER_TRY(1, e) && !OTHER_TRY(2, e))
#else
#define O1_OK(e) (!OTHER_TRY(0, e) && !OTHER_TRY(1, e))
#endif

/* O2: every event before e finished, none after e accepted (K <= 3) */
#define BEFORE_OK(e, x) (e <= x || FINAL(x))
#define AFTER_OK(e, x) (e >= x || !ev_acc[x])
#define IN_ORDER(e) (BEFORE_OK(e, 1) && BEFORE_OK(e, 2) && AFTER_OK(e, 2) && AFTER_OK(e, 3))

/* head moves past every finished sequence; a parked head is handed back */
inline advance() {
  do
  :: head <= K && FINAL(head) -> head++
  :: else -> break
  od;
#ifndef NO_HANDBACK
  if
  :: head <= K && ev_st[head] == QUEUED && ev_place[head] == P_PARKED ->
#ifdef SPLIT_HANDBACK
       handback = 1
#else
       ev_tok[head]++; ev_place[head] = P_READY;
       ent_tok[head] = ev_tok[head]; ent_own[head] = 0; ent_idle[head] = 0
#endif
  :: else -> skip
  fi
#endif
}

/* the entry of event e goes (XACK + XDEL) */
inline drop_entry(e) { ent_tok[e] = 0; ent_own[e] = 0; ent_idle[e] = 0 }

inline worker_reset(i) { w_st[i] = W_IDLE; w_ev[i] = 0; w_tok[i] = 0; w_exc[i] = 0 }

/* the provider's events, acknowledged in sequence */
active proctype Provider()
{
end:
  do
  :: atomic {
       acked < K ->
       acked++;
       ev_st[acked] = QUEUED; ev_tok[acked] = 1; ev_place[acked] = P_READY;
       ent_tok[acked] = 1; ent_own[acked] = 0; ent_idle[acked] = 0
     }
  od
}

proctype Worker(byte i)
{
  byte e;
end:
  do
  /* read a ready entry, or reclaim one whose lease ran out */
  :: atomic {
       w_st[i] == W_IDLE ->
       e = 1;
       do
       :: e <= K && ent_tok[e] != 0 && (ent_own[e] == 0 || ent_idle[e]) -> break
       :: e <= K && !(ent_tok[e] != 0 && (ent_own[e] == 0 || ent_idle[e])) -> e++
       :: e > K -> break
       od;
       if
       :: e <= K ->
            ent_own[e] = i + 1; ent_idle[e] = 0;
            w_st[i] = W_HELD; w_ev[i] = e; w_tok[i] = ent_tok[e]
       :: else -> skip
       fi;
       e = 0
     }
  /* begin: owner and token fenced, then the order gate */
  :: atomic {
       w_st[i] == W_HELD ->
       e = w_ev[i];
       if
       :: !(ent_own[e] == i + 1 && ent_tok[e] == w_tok[i]) -> worker_reset(i)   /* taken over */
       :: ent_own[e] == i + 1 && ent_tok[e] == w_tok[i] &&
          !(ev_st[e] == QUEUED && ev_tok[e] == w_tok[i]) ->
            drop_entry(e); worker_reset(i)                            /* leftover */
       :: ent_own[e] == i + 1 && ent_tok[e] == w_tok[i] &&
          ev_st[e] == QUEUED && ev_tok[e] == w_tok[i] ->
#ifndef NO_GATE
            if
            :: e != head ->                                           /* park */
                 drop_entry(e); ev_place[e] = P_PARKED;
                 worker_reset(i)
            :: e == head ->
#endif
                 assert(O1_ == 0 && O1_OK(e));
                 ent_idle[e] = 0;                                     /* renewed */
                 w_st[i] = W_TRY
#ifndef NO_GATE
            fi
#endif
       fi;
       e = 0
     }
  /* the upstream accepts the try (or not), and the try is settled: the
   * answer, then the settle, fenced by owner and token */
  :: atomic {
       w_st[i] == W_TRY ->
       e = w_ev[i];
       if
       :: skip ->                                                     /* 2xx */
            assert(O2_ == 0 && (w_exc[i] || IN_ORDER(e)));
            ev_acc[e] = 1;
            if
            :: ent_own[e] == i + 1 && ev_st[e] == QUEUED && ev_tok[e] == w_tok[i] ->
                 ev_st[e] = DONE; drop_entry(e); advance()
            :: else -> skip                                           /* fenced */
            fi
       :: fails < FAILS ->                                            /* 5xx: retry */
            fails++;
            if
            :: ent_own[e] == i + 1 && ev_st[e] == QUEUED && ev_tok[e] == w_tok[i] ->
                 ev_tok[e]++; drop_entry(e); ev_place[e] = P_RETRY
#ifdef ADVANCE_ON_RETRY
                 ; if :: head == e -> head++ :: else -> skip fi
#endif
            :: else -> skip
            fi
       :: fails < FAILS ->                                            /* dead */
            fails++;
            if
            :: ent_own[e] == i + 1 && ev_st[e] == QUEUED && ev_tok[e] == w_tok[i] ->
                 ev_st[e] = DEAD; drop_entry(e); advance()
            :: else -> skip
            fi
       fi;
       worker_reset(i);
       e = 0
     }
  /* the instance dies: its entry waits for the lease; a try on its way
   * may still be accepted (excused) */
  :: atomic {
       crashes < CRASHES && w_st[i] != W_IDLE ->
       crashes++;
       if
       :: w_st[i] == W_TRY ->
            e = w_ev[i];
            if
            :: skip -> ev_acc[e] = 1                                  /* accepted */
            :: skip
            fi;
            e = 0
       :: else -> skip
       fi;
       if
       :: ent_own[w_ev[i]] == i + 1 -> ent_idle[w_ev[i]] = 1
       :: else -> skip
       fi;
       worker_reset(i)
     }
  /* the worker stalls past its lease while its try is on its way: the
   * entry goes idle, another instance may take it over */
  :: atomic {
       stalls < STALLS && w_st[i] == W_TRY && ent_own[w_ev[i]] == i + 1 && !ent_idle[w_ev[i]] ->
       stalls++;
       ent_idle[w_ev[i]] = 1;
#ifndef STRICT_STALL
       w_exc[i] = 1
#else
       skip
#endif
     }
  od
}

/* due retries become ready entries; the lease of a dead consumer runs out */
active proctype Promoter()
{
  byte e;
end:
  do
  :: atomic {
       e = 1;
       do
       :: e <= K && !(ev_st[e] == QUEUED && ev_place[e] == P_RETRY) -> e++
       :: e <= K && ev_st[e] == QUEUED && ev_place[e] == P_RETRY ->
            ev_place[e] = P_READY; ent_tok[e] = ev_tok[e]; ent_own[e] = 0; ent_idle[e] = 0;
            break
       :: e > K -> break
       od;
       e = 0
     }
  od
}

#ifdef SPLIT_HANDBACK
/* the hand-back in a step of its own (Kafka: produce the handed-back
 * record), which the instance due to do it may die before */
active proctype HandBack()
{
end:
  do
  /* the hand-back's own step (Kafka: produce the record) */
  :: atomic {
       handback ->
       handback = 0;
       if
       :: head <= K && ev_st[head] == QUEUED && ev_place[head] == P_PARKED ->
            ev_tok[head]++; ev_place[head] = P_READY;
            ent_tok[head] = ev_tok[head]; ent_own[head] = 0; ent_idle[head] = 0
       :: else -> skip
       fi
     }
  /* the instance that was to hand back dies first */
  :: atomic { handback && crashes < CRASHES -> crashes++; handback = 0 }
#ifndef NO_SWEEP
  /* a sweeper hands a parked head back */
  :: atomic {
       head <= K && ev_st[head] == QUEUED && ev_place[head] == P_PARKED && !handback ->
       handback = 1
     }
#endif
  od
}
#endif

#ifdef HOLD
/* the operator replays a dead event (back to the queue, new token) or
 * purges it (finished: head moves past it) */
active proctype Operator()
{
end:
  do
  :: atomic {
       head <= K && ev_st[head] == DEAD ->
       if
       :: ev_st[head] = QUEUED; ev_tok[head]++; ev_place[head] = P_READY;
          ent_tok[head] = ev_tok[head]; ent_own[head] = 0; ent_idle[head] = 0
       :: ev_st[head] = DONE; advance()
       fi
     }
  od
}
#endif

init
{
  atomic {
    j = 0;
    do
    :: j < N -> run Worker(j); j++
    :: else -> break
    od;
    j = 0
  }
}

#ifdef LIVE
/* O3: every acknowledged event is eventually finished */
ltl o3 { [] ((acked == K) -> <> (head > K)) }
#endif

/*
 * queue.pml -- the queue transitions of one idempotency key, for SPIN.
 *
 * One event (one key, one payload) is sent several times by a provider to
 * a `delivery: queue` route served by N gateway instances on one Redis.
 * The model follows the Lua scripts of queue/redis.go (enqueue, begin,
 * settle, promote, replay, purge, cancel, hand-back; XAUTOCLAIM for the
 * reclaim), queue/memory.go (the same steps under one mutex), the workers
 * of queue/manager.go (read, reclaim, try, settle until the lease's
 * deadline, stop and hand back), queue/retry.go (decide) and the enqueue
 * of proxy/queue.go. Each script is one atomic step here, as in Redis.
 * model/README.md says what is abstracted away and how to run the checks.
 *
 * STORE (one route, one shard, one key)
 *   the key record (webhook_qkey): st, eid, tok, qa (tries this round);
 *   the event hash (webhook_event): its body (kbody);
 *   the ready stream with its consumer group: slots of entries {e, t},
 *     each ready or pending (owned by one consumer, with an idle flag: the
 *     lease ran out, or the entry was handed back);
 *   the retry zset: slots of "eid|tok" members;
 *   the DLQ: the record's st == DEAD with the body kept.
 *
 * PROCESSES
 *   Provider   sends the copies; each one is enqueued (queue mode) or, after
 *              a mode switch, delivered by the sync path.
 *   Worker(i)  instance i's worker: read or reclaim an entry, begin (fenced
 *              by owner and token; renews the lease), send, settle (fenced
 *              by owner and token). It can
 *              crash at any step, stall past its lease, or be cut by a
 *              shutdown that hands its entry back.
 *   Expirer    the lease: a pending entry whose owner no longer holds it
 *              (dead, restarted, or done with it) goes idle (lock_ttl).
 *   Promoter   due retries become ready entries (any instance's loop).
 *   Env        the operator: keys reset (cancel), DLQ replay and purge;
 *              the reload that switches the route's delivery mode.
 *
 * TIMING. No clock. From route timeout + settle room < lock_ttl and the
 * code: a lease runs out only when its owner no longer holds the entry, or
 * when the owner stalls (a bounded number of STALLS: a pause, or a settle
 * that could not reach Redis before the deadline). The due time of a retry
 * is abstracted: promote may run at any time.
 *
 * CONFIGURATIONS (-D flags given to spin -a; model/check.sh runs them)
 *   N=2|3 instances, COPIES, CRASHES, STALLS, SHUTDOWNS (hand-backs),
 *   MAXATT (queue.retry.max_attempts), RESETS (0|1), REPLAYS, PURGES,
 *   SWITCH (one reload flips the route between queue and sync),
 *   UNIFIED (the sync path and the workers use the queue's key record,
 *   as the ledger issue intends; without it, as built: the sync path has
 *   its own ledger and a route no longer in queue mode has no workers),
 *   ROLLING (a rolling switch: a sync door and a queue door take copies
 *   at once, with the two records as built; INSCRIPT: the enqueue's script
 *   reads the sync record (one Redis server), else the queue door claims
 *   the sync key around its enqueue; PEEK_ONLY, the mutation: it only
 *   reads the sync record before it enqueues, the code before the fix),
 *   LIVE (compile the liveness claim Q4; pan -a -f).
 *   Mutations, one per transition (each must be caught):
 *   ENQ_ACK_FIRST, BEGIN_NO_TOKEN, SETTLE_NO_OWNER, SETTLE_NO_TOKEN,
 *   RETRY_SAME_TOKEN, RECLAIM_ANYTIME, HANDBACK_DROPS, DEAD_NEVER,
 *   REPLAY_OLD_TOKEN, PURGE_FORGETS, RESET_LIVE; and STRICT_STALL,
 *   STRICT_KILL, STRICT_GHOST withdraw one excuse of Q2.
 *   BEGIN_NOT_OWNED: begin does not check that the entry is pending to
 *   the caller nor renew its lease (the code before the fix); a worker
 *   stalled between its read and its begin begins beside the instance
 *   that took the entry over (Q2). As built, begin checks the owner as
 *   settle does and renews the lease (XCLAIM to itself), so the stall
 *   excuse covers only a try stalled after its begin. WIDE_STALL widens
 *   it back (a stall before the begin is excused while the entry is still
 *   in the stream), as the checks of the code before the fix did: with
 *   BEGIN_NOT_OWNED it lets BEGIN_NO_TOKEN, RETRY_SAME_TOKEN and
 *   REPLAY_OLD_TOKEN show that the token fence alone stops what they
 *   break (the owner check at begin now stops it too).
 *
 * PROPERTIES (each assert names its property with a tag variable)
 *   Q1 "one place". After every step: an event acknowledged in this epoch
 *      has its record; a queued record's event sits in exactly one place
 *      (one stream entry, ready or in flight, or one retry member, with
 *      the record's eid and token); a dead-lettered or finished one in
 *      none.
 *   Q2 "delivered once". Within one reset epoch, the upstream accepts a
 *      copy after it accepted one only when this copy or every copy it
 *      accepted before is excused:
 *        kill   its instance crashed (or a shutdown cut the try) after the
 *               upstream took it and before the settle;
 *        stall  its worker's lease ran out while it had begun the try and
 *               not settled (a stall before the begin is no excuse: the
 *               begin checks the owner and renews the lease; WIDE_STALL
 *               excuses it while the entry is still in the stream);
 *        ghost  the upstream took it but the worker saw a timeout.
 *   Q3 "finished means delivered". A record becomes finished, and a copy
 *      is answered with a stored 2xx, only when the upstream accepted a
 *      copy of that epoch's event.
 *   Q4 "no key stuck" (-DLIVE, weak fairness): a queued record is
 *      eventually finished, dead-lettered or reset.
 *   Q5 "a reset cancels". No try begins on an event enqueued before the
 *      last reset.
 *   Q6 "one event per key". Within one epoch the key gets one event: a
 *      copy never creates a second (a dead or purged key stays dead).
 */

/* As built: begin checks the owner and renews the lease. */
#ifndef BEGIN_NOT_OWNED
#define BEGIN_OWNED
#endif

#ifndef N
#define N 2
#endif
#ifndef COPIES
#define COPIES 2
#endif
#ifndef CRASHES
#define CRASHES 1
#endif
#ifndef STALLS
#define STALLS 1
#endif
#ifndef SHUTDOWNS
#define SHUTDOWNS 0
#endif
#ifndef MAXATT
#define MAXATT 2
#endif
#ifndef RESETS
#define RESETS 0
#endif
#ifndef REPLAYS
#define REPLAYS 0
#endif
#ifndef PURGES
#define PURGES 0
#endif

#define E  3                /* stream entry slots                          */
#define R  2                /* retry zset slots                            */
#define EV 5                /* event ids 1..EV-1                           */
#define NT 12               /* tokens 1..NT-1                              */

/* record states */
#define ABSENT 0
#define QUEUED 1
#define DEAD   2
#define DONE   3

/* worker stages */
#define W_IDLE   0          /* holds nothing                                */
#define W_HELD   1          /* read or reclaimed an entry, not begun        */
#define W_ANS    2          /* begun; the request is on its way upstream    */
#define W_SETTLE 3          /* has the answer: settle w_kind                */

/* settlements (retry.go decide) */
#define K_DONE  1
#define K_RETRY 2
#define K_DEAD  3

/* route modes */
#define M_QUEUE 0
#define M_SYNC  1

/* ---------------- the store ---------------- */
byte kst;                   /* record state                                 */
byte keid;                  /* record's event id (0 none)                   */
byte ktok;                  /* record's token (0 none: dead, done)          */
byte qa;                    /* tries this round                             */
bit  kbody;                 /* the event hash (body) exists                 */
byte deadtok;               /* token the event had when it died             */
                            /* (REPLAY_OLD_TOKEN only)                      */

byte s_id[E];               /* entry id, 0: free slot                       */
byte s_eid[E];
byte s_tok[E];
bit  s_pend[E];             /* pending (read by a consumer), else ready     */
byte s_own[E];              /* owner: i+1, 0 a consumer that is gone        */
bit  s_idle[E];             /* idle for lock_ttl: XAUTOCLAIM may take it    */

byte r_eid[R];              /* retry member "eid|tok"; r_eid 0: free        */
byte r_tok[R];

bit  pend_add;               /* ENQ_ACK_FIRST: the append still to come     */
bit  sdone;                 /* as built: the sync store's finished record   */

/* ---------------- counters ---------------- */
byte nid;                   /* the id, token or eid just minted: the least   */
                            /* one no slot, lease or record refers to (as   */
                            /* good as a fresh random one, and it keeps the */
                            /* state space small)                           */
byte ep;                    /* reset epoch                                   */
bit  mode;                  /* M_QUEUE or M_SYNC                             */
bit  switched;
byte budget = COPIES;
byte crashes, stalls, shutdowns, resets, replays, purges;

/* ---------------- workers ---------------- */
byte w_st[N];
byte w_id[N];               /* the lease: entry id, eid, token               */
byte w_eid[N];
byte w_tok[N];
bit  w_acc[N];              /* the upstream accepted this try                */
bit  w_exc[N];              /* ... and it is excused (see Q2)                */
byte w_tep[N];              /* the try's epoch                               */
byte w_qa[N];               /* Job.Try                                       */
byte w_kind[N];
bit  w_stall[N];            /* its lease ran out while it held the entry     */

/* ---------------- history, for the properties ---------------- */
byte eid_ep[EV];            /* epoch each event was enqueued in              */
bit  enq[RESETS + 1];       /* an event was acknowledged in epoch e          */
bit  ep_acc[RESETS + 1];    /* the upstream accepted a copy of epoch e       */
bit  dirty[RESETS + 1];     /* a try (or sync forward) of epoch e that the   */
                            /* upstream accepted has ended unexcused         */

/* assertion tags: always 0, they name the property in pan's output */
bit Q1_, Q2_, Q3_, Q5_, Q6_;

byte j, k;                  /* scratch; 0 between atomic steps               */

#define RUNS (mode == M_QUEUE || UNIFIED_ON)
#ifdef UNIFIED
#define UNIFIED_ON 1
#else
#define UNIFIED_ON 0
#endif

/* Q1 */
#define POS_S(x) (s_id[x] != 0 && s_eid[x] == keid && s_tok[x] == ktok)
#define POS_R(x) (r_eid[x] != 0 && r_eid[x] == keid && r_tok[x] == ktok)
#define NPOS (POS_S(0) + POS_S(1) + POS_S(2) + POS_R(0) + POS_R(1))
#define Q1_CHECK assert(Q1_ == 0 && (!enq[ep] || kst != ABSENT) && \
                        (kst != QUEUED || NPOS == 1))

/* Q2: a copy of epoch e may be accepted when it is excused, or when no
 * accepted copy of e is unexcused: none that ended, none in flight. */
#define LIVE_OK(m, e) (w_st[m] == W_IDLE || !w_acc[m] || w_tep[m] != e || w_exc[m])
#if N > 2
#define OTHERS_OK(e) (LIVE_OK(0, e) && LIVE_OK(1, e) && LIVE_OK(2, e))
#else
#define OTHERS_OK(e) (LIVE_OK(0, e) && LIVE_OK(1, e))
#endif
#define ONCE_OK(e) (!dirty[e] && OTHERS_OK(e))

#ifdef STRICT_KILL
#define EXCUSE_KILL(m) skip
#else
#define EXCUSE_KILL(m) w_exc[m] = 1
#endif
#ifdef STRICT_STALL
#define EXCUSE_STALL(m) skip
#else
#define EXCUSE_STALL(m) w_exc[m] = 1
#endif
#ifdef STRICT_GHOST
#define EXCUSE_GHOST(m) skip
#else
#define EXCUSE_GHOST(m) w_exc[m] = 1
#endif

/* the upstream accepts worker i's try */
inline accept(i) {
  assert(Q2_ == 0 && (w_exc[i] || ONCE_OK(w_tep[i])));
  w_acc[i] = 1;
  ep_acc[w_tep[i]] = 1
}

/* the upstream accepts a sync forward of epoch e (never excused here) */
inline accept_sync(e) {
  assert(Q2_ == 0 && ONCE_OK(e));
  dirty[e] = 1;
  ep_acc[e] = 1
}

/* worker i's try ends */
inline try_end(i) {
  if
  :: w_acc[i] && !w_exc[i] -> dirty[w_tep[i]] = 1
  :: else -> skip
  fi
}

#define ID_USED(v) (s_id[0] == v || s_id[1] == v || s_id[2] == v || W_ID_USED(v))
#if N > 2
#define W_ID_USED(v) (w_id[0] == v || w_id[1] == v || w_id[2] == v)
#define W_TOK_USED(v) (w_tok[0] == v || w_tok[1] == v || w_tok[2] == v)
#define W_EID_USED(v) (w_eid[0] == v || w_eid[1] == v || w_eid[2] == v)
#else
#define W_ID_USED(v) (w_id[0] == v || w_id[1] == v)
#define W_TOK_USED(v) (w_tok[0] == v || w_tok[1] == v)
#define W_EID_USED(v) (w_eid[0] == v || w_eid[1] == v)
#endif
#define TOK_USED(v) (ktok == v || deadtok == v || s_tok[0] == v || s_tok[1] == v || \
                     s_tok[2] == v || r_tok[0] == v || r_tok[1] == v || W_TOK_USED(v))
#define EID_USED(v) (keid == v || s_eid[0] == v || s_eid[1] == v || s_eid[2] == v || \
                     r_eid[0] == v || r_eid[1] == v || W_EID_USED(v))

/* nid := a fresh entry id, token or event id */
inline fresh_id() {
  nid = 1;
  do
  :: ID_USED(nid) -> nid++
  :: else -> break
  od
}
inline fresh_tok() {
  nid = 1;
  do
  :: TOK_USED(nid) -> nid++
  :: else -> break
  od;
  assert(nid < NT)
}
inline fresh_eid() {
  nid = 1;
  do
  :: EID_USED(nid) -> nid++
  :: else -> break
  od;
  assert(nid < EV)
}

/* XADD eid|tok to the ready stream */
inline xadd(e, t) {
  k = 0;
  do
  :: k < E && s_id[k] != 0 -> k++
  :: k < E && s_id[k] == 0 -> break
  :: k == E -> assert(false)              /* E too small                 */
  od;
  fresh_id();
  s_id[k] = nid; nid = 0; s_eid[k] = e; s_tok[k] = t;
  s_pend[k] = 0; s_own[k] = 0; s_idle[k] = 0;
  k = 0
}

/* XACK + XDEL of slot x */
inline xdel(x) {
  s_id[x] = 0; s_eid[x] = 0; s_tok[x] = 0;
  s_pend[x] = 0; s_own[x] = 0; s_idle[x] = 0
}

/* k := the slot of entry id w_id[i], or E when it is gone */
inline find_entry(i) {
  k = 0;
  do
  :: k < E && s_id[k] != w_id[i] -> k++
  :: k < E && s_id[k] == w_id[i] -> break
  :: k == E -> break
  od
}

inline zadd(e, t) {
  k = 0;
  do
  :: k < R && r_eid[k] != 0 -> k++
  :: k < R && r_eid[k] == 0 -> break
  :: k == R -> assert(false)
  od;
  r_eid[k] = e; r_tok[k] = t;
  k = 0
}

inline worker_reset(i) {
  w_st[i] = W_IDLE; w_id[i] = 0; w_eid[i] = 0; w_tok[i] = 0;
  w_acc[i] = 0; w_exc[i] = 0; w_tep[i] = 0;
  w_qa[i] = 0; w_kind[i] = 0; w_stall[i] = 0
}

/* the lease of instance i's consumer goes to its next incarnation: the
 * old consumer name is never used again */
inline disown(i) {
  k = 0;
  do
  :: k < E -> if :: s_own[k] == i + 1 -> s_own[k] = 0 :: else -> skip fi; k++
  :: else -> break
  od;
  k = 0
}

/* ------------------------------------------------------------------------
 * Provider: each copy, at any time. Queue mode: the enqueue script (claim,
 * event, XADD in one step; the 202 only after). Sync mode: the sync path,
 * one atomic step here (keyprotocol.pml checks its own windows).
 */
/* the enqueue script, for a copy (proxy/queue.go enqueue) */
inline enqueue_copy() {
  if
  :: kst == ABSENT ->
       assert(Q6_ == 0 && !enq[ep]);       /* Q6 */
       fresh_eid(); keid = nid; eid_ep[keid] = ep;
       fresh_tok(); ktok = nid; nid = 0;
       kst = QUEUED; kbody = 1; qa = 0;
#ifdef ENQ_ACK_FIRST
       pend_add = 1;
#else
       xadd(keid, ktok);
#endif
       enq[ep] = 1                         /* the 202                */
  :: kst == QUEUED || kst == DEAD -> skip  /* Pending: 202 replayed  */
  :: kst == DONE ->
       assert(Q3_ == 0 && ep_acc[eid_ep[keid]])   /* Q3: stored 2xx  */
  fi
}

#ifdef ROLLING
#define ROLLING_ON 1
#else
#define ROLLING_ON 0
#endif

active proctype Provider()
{
end:
  do
  :: atomic {
       budget > 0 && mode == M_QUEUE && !ROLLING_ON ->
       budget--;
       enqueue_copy();
       Q1_CHECK
     }
#ifdef ENQ_ACK_FIRST
  /* mutation: the 202 went out before this, the stream append */
  :: atomic { pend_add -> pend_add = 0; xadd(keid, ktok); Q1_CHECK }
#endif
  :: atomic {
       budget > 0 && mode == M_SYNC && !ROLLING_ON ->
       budget--;
#ifdef UNIFIED
       /* one record: finished is replayed, queued or dead answered as
        * pending, absent is claimed, forwarded and finished */
       if
       :: kst == DONE -> assert(Q3_ == 0 && ep_acc[eid_ep[keid]])
       :: kst == QUEUED || kst == DEAD -> skip
       :: kst == ABSENT ->
            assert(Q6_ == 0 && !enq[ep]);
            fresh_eid(); keid = nid; nid = 0; eid_ep[keid] = ep;
            accept_sync(ep);
            kst = DONE; ktok = 0; kbody = 0;
            enq[ep] = 1
       fi;
#else
       /* as built: the sync store knows nothing of the queue's record */
       if
       :: sdone -> skip                         /* replayed               */
       :: else ->
            accept_sync(ep);
            sdone = 1
       fi;
#endif
       Q1_CHECK
     }
  od
}


#ifdef ROLLING
/* ------------------------------------------------------------------------
 * A rolling switch: while instances move a route between sync and queue
 * one after the other, some run it as a sync route and others as a queue
 * route, with the two records as built (the sync store's lock and
 * finished record, the queue's key record), and the provider's copies
 * reach both kinds at once. Each door handles one copy at a time, in the
 * separate store steps the code takes.
 */
bit slock;                  /* the sync store's lock of the key             */

/* a sync instance (proxy/deliver.go): claim the key in the sync store,
 * then look in the queue's record (queueRecord), then forward or answer */
active proctype SyncDoor()
{
  bit held;
end:
  do
  :: atomic {
       budget > 0 && !held ->
       budget--;
       if
       :: sdone -> skip                          /* replayed               */
       :: !sdone && slock -> skip                /* 409; the provider      */
                                                 /* sends another copy     */
       :: !sdone && !slock -> slock = 1; held = 1
       fi
     }
  :: atomic {
       held ->
       if
       :: kst == QUEUED || kst == DEAD -> skip   /* the queue's ack, not   */
                                                 /* forwarded              */
       :: kst == DONE ->                         /* the queue's answer,    */
            assert(Q3_ == 0 && ep_acc[eid_ep[keid]]);   /* recorded        */
            sdone = 1
       :: kst == ABSENT -> accept_sync(ep); sdone = 1
       fi;
       slock = 0; held = 0;
       Q1_CHECK
     }
  od
}

/* a queue instance (proxy/queue.go): with INSCRIPT (one Redis server) the
 * enqueue's script reads the sync record itself, one step; else (Cluster,
 * Kafka, memory) the key is claimed in the sync store, the event queued,
 * the claim released. PEEK_ONLY (the code before): the sync record is
 * read and the event queued, nothing claimed. */
active proctype QueueDoor()
{
  bit held;
end:
  do
  :: atomic {
       budget > 0 && !held ->
       budget--;
       if
       :: sdone -> skip                          /* replayed               */
       :: !sdone && slock -> skip                /* 409                    */
       :: !sdone && !slock ->
#if defined(INSCRIPT)
            enqueue_copy();
            Q1_CHECK
#elif defined(PEEK_ONLY)
            held = 1
#else
            slock = 1; held = 1
#endif
       fi
     }
  :: atomic {
       held ->
       enqueue_copy();
#ifndef PEEK_ONLY
       slock = 0;
#endif
       held = 0;
       Q1_CHECK
     }
  od
}
#endif

/* ------------------------------------------------------------------------
 * Worker(i): manager.go readLoop, reclaim, try, settle; one worker slot.
 */
#define READY(x) (s_id[x] != 0 && !s_pend[x])
#ifdef RECLAIM_ANYTIME
#define TAKEABLE(x) (s_id[x] != 0 && s_pend[x] && s_own[x] != i + 1)
#else
#define TAKEABLE(x) (s_id[x] != 0 && s_pend[x] && s_idle[x])
#endif
/* entry slot x is now pending to instance i's consumer, and held */
inline take(i, x) {
  s_pend[x] = 1; s_own[x] = i + 1; s_idle[x] = 0;
  w_id[i] = s_id[x]; w_eid[i] = s_eid[x]; w_tok[i] = s_tok[x];
  w_st[i] = W_HELD
}
/* slot x is pending to instance i and is its lease's entry */
#define OWNED(x) (s_id[x] != 0 && s_id[x] == w_id[i] && s_pend[x] && s_own[x] == i + 1)
#define OWNS_LIVE(x) (s_id[x] != 0 && s_id[x] == w_id[i] && s_pend[x] && \
                      s_own[x] == i + 1 && !s_idle[x])

#ifdef BEGIN_NO_TOKEN
#define BEGIN_FENCE (kst == QUEUED && keid == w_eid[i] && kbody)
#else
#define BEGIN_FENCE (kst == QUEUED && keid == w_eid[i] && kbody && ktok == w_tok[i])
#endif
#ifdef SETTLE_NO_TOKEN
#define SETTLE_STALE (kst != QUEUED)
#else
#define SETTLE_STALE (kst != QUEUED || ktok != w_tok[i])
#endif

proctype Worker(byte i)
{
end:
  do
  /* Read (XREADGROUP >): a ready entry, now pending to this consumer. */
  :: atomic { w_st[i] == W_IDLE && RUNS && READY(0) -> take(i, 0) }
  :: atomic { w_st[i] == W_IDLE && RUNS && READY(1) -> take(i, 1) }
  :: atomic { w_st[i] == W_IDLE && RUNS && READY(2) -> take(i, 2) }
  /* Reclaim (XAUTOCLAIM, min idle lock_ttl): an entry idle for the lease;
   * XAUTOCLAIM moves the ownership. */
  :: atomic { w_st[i] == W_IDLE && RUNS && TAKEABLE(0) -> take(i, 0) }
  :: atomic { w_st[i] == W_IDLE && RUNS && TAKEABLE(1) -> take(i, 1) }
  :: atomic { w_st[i] == W_IDLE && RUNS && TAKEABLE(2) -> take(i, 2) }
  /* Begin (beginScript): fenced by the owner (XPENDING) and the record's
   * state, eid and token; renews the lease. */
  :: atomic {
       w_st[i] == W_HELD ->
       if
#ifdef BEGIN_OWNED
       :: !(OWNED(0) || OWNED(1) || OWNED(2)) ->   /* taken over: forget  */
            worker_reset(i)
       :: (OWNED(0) || OWNED(1) || OWNED(2)) && BEGIN_FENCE ->
#else
       :: BEGIN_FENCE ->
#endif
            assert(Q5_ == 0 && eid_ep[w_eid[i]] == ep);   /* Q5 */
            if                                  /* saturates: decide only */
            :: qa < MAXATT -> qa++              /* asks qa >= MAXATT      */
            :: else -> skip
            fi;
            w_tep[i] = ep; w_qa[i] = qa;
#ifdef WIDE_STALL
            find_entry(i);
            if
            :: w_stall[i] && k < E -> EXCUSE_STALL(i)
            :: else -> skip
            fi;
            k = 0;
#endif
#ifdef BEGIN_OWNED
            find_entry(i);                      /* renews the lease       */
            s_idle[k] = 0;                      /* (XCLAIM to itself)     */
            k = 0;
#endif
            w_st[i] = W_ANS
#ifdef BEGIN_OWNED
       :: (OWNED(0) || OWNED(1) || OWNED(2)) && !BEGIN_FENCE ->
#else
       :: else ->                               /* leftover: dropped      */
#endif
            find_entry(i);
            if
            :: k < E -> xdel(k)
            :: else -> skip
            fi;
            k = 0;
            worker_reset(i)
       fi;
       Q1_CHECK
     }
  /* The upstream's answer, and decide (retry.go). */
  :: atomic {
       w_st[i] == W_ANS ->
       if
       :: accept(i); w_kind[i] = K_DONE       /* 2xx                    */
       :: w_kind[i] = K_DEAD                    /* final status (4xx)     */
       :: w_kind[i] = K_RETRY                   /* 5xx, or no answer      */
       :: EXCUSE_GHOST(i); accept(i); w_kind[i] = K_RETRY
                                                /* taken, but timed out   */
       fi;
#ifndef DEAD_NEVER
       if
       :: w_kind[i] == K_RETRY && w_qa[i] >= MAXATT -> w_kind[i] = K_DEAD
       :: else -> skip
       fi;
#endif
       w_st[i] = W_SETTLE
     }
  /* Settle (settleScript): fenced by the entry's owner, then the token. */
  :: atomic {
       w_st[i] == W_SETTLE ->
       try_end(i);
       find_entry(i);
       if
#ifndef SETTLE_NO_OWNER
       :: k == E || !s_pend[k] || s_own[k] != i + 1 -> skip       /* NotOwner */
       :: k < E && s_pend[k] && s_own[k] == i + 1 ->
#else
       :: k == E -> skip
       :: k < E ->
#endif
            xdel(k);
            if
            :: SETTLE_STALE -> skip                         /* Stale                  */
            :: else ->
               if
               :: w_kind[i] == K_DONE ->
                    assert(Q3_ == 0 && ep_acc[eid_ep[keid]]);   /* Q3     */
                    kst = DONE; ktok = 0; kbody = 0
               :: w_kind[i] == K_RETRY ->
#ifndef RETRY_SAME_TOKEN
                    fresh_tok(); ktok = nid; nid = 0;
#endif
                    zadd(keid, ktok)
               :: w_kind[i] == K_DEAD ->
#ifdef REPLAY_OLD_TOKEN
                    deadtok = ktok;
#endif
                    kst = DEAD; ktok = 0
               fi
            fi
       fi;
       k = 0;
       worker_reset(i);
       Q1_CHECK
     }
  /* Stall past the lease (a pause, or a settle that could not reach
   * Redis before the deadline): the entry goes idle while held. */
  :: atomic {
       stalls < STALLS && w_st[i] != W_IDLE &&
       (OWNS_LIVE(0) || OWNS_LIVE(1) || OWNS_LIVE(2)) ->
       stalls++;
       find_entry(i);
       s_idle[k] = 1;
       w_stall[i] = 1;
       if
       :: w_st[i] != W_HELD -> EXCUSE_STALL(i)
       :: else -> skip
       fi;
       k = 0
     }
  /* Crash: everything the instance held is lost; its consumer is gone,
   * and its entries wait for the lease. */
  :: atomic {
       crashes < CRASHES && w_st[i] != W_IDLE ->
       crashes++;
       if
       :: w_st[i] == W_ANS ->
            if
            :: skip                             /* not taken upstream     */
            :: EXCUSE_KILL(i); accept(i)        /* taken                  */
            fi
       :: else -> skip
       fi;
       if
       :: w_acc[i] && (w_st[i] == W_ANS || w_kind[i] == K_DONE) -> EXCUSE_KILL(i)
       :: else -> skip
       fi;
       try_end(i);
       disown(i);
       worker_reset(i)
     }
  /* Shutdown (stop): a try still waiting for the upstream is cut; the
   * entries held are handed back (idle at once). */
  :: atomic {
       shutdowns < SHUTDOWNS && (w_st[i] == W_HELD || w_st[i] == W_ANS) ->
       shutdowns++;
       if
       :: w_st[i] == W_ANS ->
            if
            :: skip
            :: EXCUSE_KILL(i); accept(i)        /* cut, but taken         */
            fi
       :: else -> skip
       fi;
       try_end(i);
       find_entry(i);
       if
       :: k < E && s_pend[k] && s_own[k] == i + 1 ->
#ifdef HANDBACK_DROPS
            xdel(k)
#else
            s_idle[k] = 1
#endif
       :: else -> skip
       fi;
       disown(i);
       worker_reset(i);
       Q1_CHECK
     }
  od
}

/* ------------------------------------------------------------------------
 * Expirer: a pending entry its owner no longer holds goes idle after
 * lock_ttl (XAUTOCLAIM's min idle time).
 */
#define HOLDS(x) (s_own[x] != 0 && w_id[s_own[x] - 1] == s_id[x])
active proctype Expirer()
{
end:
  do
  :: atomic { s_id[0] != 0 && s_pend[0] && !s_idle[0] && !HOLDS(0) -> s_idle[0] = 1 }
  :: atomic { s_id[1] != 0 && s_pend[1] && !s_idle[1] && !HOLDS(1) -> s_idle[1] = 1 }
  :: atomic { s_id[2] != 0 && s_pend[2] && !s_idle[2] && !HOLDS(2) -> s_idle[2] = 1 }
  od
}

/* ------------------------------------------------------------------------
 * Promoter: promoteScript, run by any instance that runs the route.
 */
active proctype Promoter()
{
end:
  do
  :: atomic { RUNS && r_eid[0] != 0 -> xadd(r_eid[0], r_tok[0]); r_eid[0] = 0; r_tok[0] = 0; Q1_CHECK }
  :: atomic { RUNS && r_eid[1] != 0 -> xadd(r_eid[1], r_tok[1]); r_eid[1] = 0; r_tok[1] = 0; Q1_CHECK }
  od
}

/* ------------------------------------------------------------------------
 * Env: the operator and the reloads.
 */
active proctype Env()
{
end:
  do
  /* keys reset on a queue route (cancelScript): the record and its event
   * go; entries left in the stream or retry set are leftovers. */
  :: atomic {
       resets < RESETS ->
       resets++;
#ifdef RESET_LIVE
       if
       :: kst == QUEUED -> skip                 /* mutation: not cancelled */
       :: else -> kst = ABSENT; keid = 0; ktok = 0; kbody = 0; qa = 0
       fi;
#else
       kst = ABSENT; keid = 0; ktok = 0; kbody = 0; qa = 0;
#endif
       sdone = 0;
       ep++;
       Q1_CHECK
     }
  /* DLQ replay (replayScript): back to the ready stream, new token. */
  :: atomic {
       replays < REPLAYS && kst == DEAD && kbody ->
       replays++;
#ifdef REPLAY_OLD_TOKEN
       ktok = deadtok;
#else
       fresh_tok(); ktok = nid; nid = 0;
#endif
       kst = QUEUED; qa = 0;
       xadd(keid, ktok);
       Q1_CHECK
     }
  /* DLQ purge (purgeScript): the body goes, the key stays dead. */
  :: atomic {
       purges < PURGES && kst == DEAD && kbody ->
       purges++;
       kbody = 0;
#ifdef PURGE_FORGETS
       kst = ABSENT; keid = 0;
#endif
       Q1_CHECK
     }
#ifdef SWITCH
  /* a reload flips the route's delivery */
  :: atomic { !switched -> switched = 1; mode = 1 - mode }
#endif
  od
}

init
{
  atomic {
#ifdef SWITCH
    if
    :: mode = M_QUEUE
    :: mode = M_SYNC
    fi;
#endif
    j = 0;
    do
    :: j < N -> run Worker(j); j++
    :: else -> break
    od;
    j = 0
  }
}

#ifdef LIVE
/* Q4: a queued record is eventually finished, dead-lettered or reset. */
ltl q4 { [] ((kst == QUEUED) -> <> (kst != QUEUED)) }
#endif

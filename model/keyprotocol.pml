/*
 * keyprotocol.pml -- clawgate's idempotency-key protocol, for SPIN.
 *
 * One event (one idempotency key, one payload) is sent several times by a
 * provider to N gateway instances that share one store (Redis). The model
 * follows proxy/deliver.go, proxy/forward.go, dedupe/cache.go and the sync
 * transitions of the key record's Lua library, ledger/lua.go (key_claim,
 * key_done, key_release, key_reset; store/redis.go's own scripts before
 * schema version 2). The lock is the record's state lock with its owner
 * token and a lease deadline on Redis' clock (Expirer: the lease running
 * out); the reset tombstone is a deadline field of the record that a later
 * claim and release keep, as the separate tombstone key was: the shape of
 * each transition is unchanged. model/README.md says what is abstracted
 * away and how to run the checks.
 *
 * PROCESSES
 *   Provider     sends the copies: retries and spontaneous duplicates, at
 *                any time, to any instance. It also stands for the first
 *                steps of a delivery, which only read the instance's memory:
 *                a window hit is replayed at once; a copy arriving while the
 *                instance forwards the key gets 409 (cache.Begin).
 *   Instance(i)  one delivery of the key at a time on instance i:
 *                claim -> forward -> upstream answer -> finish or release.
 *                It can crash (or be cut by a shutdown) at any step.
 *   Finisher     the background retries of a Finish that did not get
 *                through before the answer (forward.go finishLater); one
 *                process per pending finish, dies with its instance.
 *   Expirer      the lock's TTL in the store.
 *   Env          the operator's reset and its pub/sub message to each
 *                instance (-DRESET), Redis restarting without its data
 *                (-DLOSS), reset tombstones expiring.
 *
 * STORE CALLS are atomic, as each Lua script runs atomically in Redis. A
 * call can fail in two ways, both an error for the caller: it did not run
 * (Redis unreachable), or it ran and the reply was lost (timeout). Redis is
 * persistent (no data loss, only unavailability) unless -DLOSS.
 *
 * TIMING. There is no clock; only these facts, from the configuration rule
 * route timeout + finish room < lock_ttl and from the code:
 *   - a lock cannot expire while its owner waits for the upstream or makes
 *     its first settling call;
 *   - the owner's background finish stops at the lock's local deadline,
 *     which comes before (or at) the lock's expiry in Redis; a finisher may
 *     reach that deadline at any moment (it gives up nondeterministically).
 *   Together: a lock expires only once no live process of its owner will
 *   make another call with its token (pend[t] == 0). A reset tombstone
 *   lives as long as the lock it replaced would have.
 *
 * CONFIGURATIONS (-D flags given to spin -a; model/check.sh runs them)
 *   N=2|3       instances                 COPIES   copies the provider sends
 *   CRASHES     crashes in a run           LOSS     Redis may lose all data once
 *   RESET       one operator reset         GENRULE  the window's reset-generation rule
 *   TOMB_ALWAYS the reset leaves a tombstone even when no lock existed
 *               (what clawgate builds; without it, only over a live lock)
 *   NO_REFINISH Finish without the new rule "no lock, no record, no
 *               tombstone: record anyway" (the old script)
 *   STRICT_KILL, STRICT_GAVEUP, STRICT_GHOST, STRICT_LOSS
 *               drop one excuse from P1; such a run must find a violation,
 *               which shows the excuse is needed (P1 is not vacuous)
 *   LIVE        compile the liveness claim P3 (pan -a -f)
 *   NO_TTL      sabotage: locks never expire; P3 must then fail
 *
 * PROPERTIES (each assert below names its property)
 *   P1 "forwarded once". Within one reset epoch, the upstream does not
 *      receive, nor accept, a copy after it accepted one, unless every copy
 *      it accepted so far in that epoch is excused. A copy is excused when:
 *        kill   its instance crashed (or a shutdown cut it) after the
 *               upstream accepted it and before its outcome was recorded
 *               in the store: the kill window;
 *        gaveup its background finish reached the lock's deadline without
 *               getting through (Redis unreachable for the whole finish
 *               room): a kill window without a crash;
 *        ghost  the upstream accepted it but the gateway saw a timeout and
 *               released the lock, as designed (only an upstream that
 *               honours Idempotency-Key can help there);
 *        loss   (-DLOSS only) the data loss erased its recorded outcome;
 *               or it held the lock that was lost and another copy
 *               claimed the key before its pending finish reached the
 *               store, or it is that other copy (the two race upstream).
 *               A pending finish that reaches the store first records the
 *               outcome again (the new Finish rule), and nothing is
 *               excused.
 *      A reset starts a new epoch; a copy belongs to the epoch of its
 *      claim (copies in flight at the reset belong to the old one).
 *   P2 "no ack without acceptance". The provider never gets a 2xx unless
 *      the upstream accepted the event at some point.
 *   P3 "never stuck in flight" (liveness, -DLIVE, weak fairness). Every
 *      lock is eventually gone (finished, released or expired), so a
 *      provider that keeps retrying gets an answer other than 409.
 *   P4 "a reset is a reset" (-DRESET).
 *      (a) window: once the reset reached an instance and the deliveries
 *          that instance began before that have ended, it never replays
 *          an outcome from before the reset from its window;
 *      (b) store: after the reset, a claim never returns an outcome
 *          recorded before it (the reset's promise: the next delivery is
 *          forwarded again).
 */

#ifndef N
#define N 2
#endif
#ifndef COPIES
#define COPIES 4
#endif
#ifndef CRASHES
#define CRASHES 1
#endif
#if COPIES > 7
#error "COPIES must be at most 7 (the token arrays and the ALL_EXCUSED and OLD_PENDING macros)"
#endif

#define T 8                 /* token slots; tokens are 1..COPIES            */

/* stages of an instance's delivery */
#define IDLE  0             /* no delivery of the key on this instance      */
#define CLAIM 1             /* arrived, window missed: claim in the store   */
#define FWD   2             /* holds the lock: send the copy upstream       */
#define UP    3             /* the upstream has the copy: its answer        */
#define REL   4             /* upstream failed: release the lock            */
#define FIN   5             /* upstream 2xx: finish, answer, window         */

/* ---------------- the store: one key ---------------- */
byte lock;                  /* 0: no lock; else the owner's token           */
bit  rec;                   /* a finished outcome is recorded               */
bit  rec_ep;                /* the epoch of the recorded outcome            */
byte rec_tok;               /* the token that recorded it (-DLOSS only)     */
byte tomb;                  /* reset tombstone: 0 none; else the token of   */
                            /* the lock it replaced (TOMB_ALWAYS: T)        */
bit  ep;                    /* reset epoch: resets run in the store (0..1)  */

/* ---------------- tokens (one per successful claim) ---------------- */
byte ntok;                  /* tokens handed out so far                     */
bit  pend[T];               /* a live process of the owner will still make  */
                            /* a call with it (its deadline has not passed) */
bit  unrec[T];              /* accepted upstream, outcome not recorded, and */
                            /* the owner still holds it                     */
bit  tok_ep[T];             /* epoch of the claim                           */
byte tok_inst[T];           /* instance that claimed                        */

/* ---------------- instances ---------------- */
byte st[N];                 /* delivery stage                               */
byte tk[N];                 /* the delivery's token                         */
byte win[N];                /* local window: 0 empty, e+1 an outcome of     */
                            /* epoch e                                      */
byte gen[N];                /* reset generation: resets that reached it     */
byte dg[N];                 /* gen when the current delivery began (d.gen)  */
byte inc[N];                /* incarnation, bumped by a crash               */

/* ---------------- provider and environment ---------------- */
byte budget = COPIES;       /* copies still to send                         */
byte crashes;               /* crashes so far                               */
bit  lost;                  /* the data loss happened (-DLOSS)              */
byte loss_open;             /* token of the lock the loss erased, until its */
                            /* owner's next call reaches the store          */

/* ---------------- history, for the properties ---------------- */
bit  acct[T];               /* the upstream accepted the copy of token t    */
bit  exct[T];               /* ... and that copy is excused (see P1)        */
bit  acc_any;               /* the upstream accepted some copy              */

byte j;                     /* scratch; 0 between atomic steps              */

/* P1: every copy of epoch e the upstream accepted so far is excused. */
#define OKK(k, e) (!(acct[k] && tok_ep[k] == e) || exct[k])
#define ALL_EXCUSED(e) (OKK(1, e) && OKK(2, e) && OKK(3, e) && OKK(4, e) && \
                        OKK(5, e) && OKK(6, e) && OKK(7, e))
#define P1_ONCE(e) assert(ALL_EXCUSED(e))

/* P2: at every 2xx the provider gets. */
#define P2_ACKED assert(acc_any)

/* the excuses of P1, each of which a STRICT_ flag can withdraw */
#ifdef STRICT_KILL
#define EXCUSE_KILL(t) skip
#else
#define EXCUSE_KILL(t) exct[t] = 1
#endif
#ifdef STRICT_GAVEUP
#define EXCUSE_GAVEUP(t) skip
#else
#define EXCUSE_GAVEUP(t) exct[t] = 1
#endif
#ifdef STRICT_GHOST
#define EXCUSE_GHOST(t) skip
#else
#define EXCUSE_GHOST(t) exct[t] = 1
#endif
#ifdef STRICT_LOSS
#define EXCUSE_LOSS(t) skip
#else
#define EXCUSE_LOSS(t) exct[t] = 1
#endif

/* Reset tombstones. As built, the tombstone replaces a lock and lives as
 * long as that lock would have (until its owner makes no more calls). With
 * TOMB_ALWAYS it lives lock_ttl from the reset, which outlasts every owner
 * that claimed before the reset. */
#define OLDP(k) (pend[k] && tok_ep[k] == 0)
#define OLD_PENDING (OLDP(1) || OLDP(2) || OLDP(3) || OLDP(4) || OLDP(5) || \
                     OLDP(6) || OLDP(7))
#ifdef TOMB_ALWAYS
#define TOMB_EXPIRES (tomb != 0 && !OLD_PENDING)
#else
#define TOMB_EXPIRES (tomb != 0 && !pend[tomb])
#endif

/* The upstream accepts the copy of token t. */
inline accept(t) {
  P1_ONCE(tok_ep[t]);
  acct[t] = 1;
  acc_any = 1
}

/* A call of token t reached the store, or t's owner stopped: a lost lock
 * of t is no longer waiting for t's finish. */
inline settled(t) {
  if
  :: loss_open == t -> loss_open = 0
  :: else -> skip
  fi
}

/* The finish script (store/redis.go finishScript), atomic: record when t
 * owns the lock; or, the new rule, when there is no lock, no record and no
 * tombstone. Otherwise nothing changes (ErrNotOwner). */
inline finish_exec(t) {
  if
  :: lock == t ->
       rec = 1; rec_ep = tok_ep[t]; lock = 0
#ifdef LOSS
       ; rec_tok = t
#endif
#ifndef NO_REFINISH
  :: lock == 0 && !rec && tomb == 0 ->
       rec = 1; rec_ep = tok_ep[t]
#ifdef LOSS
       ; rec_tok = t
#endif
#endif
  :: else -> skip
  fi;
  if
  :: rec -> unrec[t] = 0          /* its outcome is in the store          */
  :: else -> skip
  fi;
  settled(t)
}

/* Add an outcome of epoch e to instance i's window (cache.Add). With the
 * generation rule it is refused when a reset reached i after the delivery
 * began. */
inline window_add(e) {
#ifdef GENRULE
  if
  :: gen[i] == dg[i] -> win[i] = e + 1
  :: else -> skip
  fi
#else
  win[i] = e + 1
#endif
}

/* The claim script's "claimed" branch: lock under a fresh token. owned is
 * 0 when the reply is lost (a lock nobody holds, left to expire). */
inline take_lock(owned) {
  ntok++;
  lock = ntok;
  tok_ep[ntok] = ep;
  tok_inst[ntok] = i;
  pend[ntok] = owned;
  if
  :: loss_open != 0 ->              /* raced the lost lock's pending finish */
       EXCUSE_LOSS(loss_open); EXCUSE_LOSS(ntok)
  :: else -> skip
  fi
}

/* ------------------------------------------------------------------------
 * Provider. Each copy goes to any instance at any time: this covers the
 * retries after 409, 503, 502/504, a timeout or a cut connection, and
 * spontaneous duplicates, concurrent ones included. On the instance
 * (deliver.go): a window hit is replayed; else, if the instance already
 * forwards the key, 409; else the delivery begins, noting the window's
 * reset generation (d.gen = cache.Gen()), and goes on to the claim.
 */
active proctype Provider()
{
end:
  do
  :: atomic {
       budget > 0 ->
       budget--;
       if
       :: j = 0
       :: j = 1
#if N > 2
       :: j = 2
#endif
       fi;
       if
       :: win[j] != 0 ->
            P2_ACKED;
            /* P4(a): once the reset reached instance j, and no delivery
             * that began there before it is still going, the window holds
             * no outcome from before the reset. */
            assert(gen[j] == 0 || (st[j] != IDLE && dg[j] != gen[j]) || win[j] > gen[j])
       :: else ->
            if
            :: st[j] != IDLE -> skip             /* 409: forwarded here now */
            :: else -> st[j] = CLAIM; dg[j] = gen[j]
            fi
       fi;
       j = 0
     }
  od
}

/* ------------------------------------------------------------------------
 * Finisher: forward.go finishLater. Tries Finish(t) again until it gets an
 * answer (recorded, or not the owner) or the deadline passes. Dies with
 * its instance (incarnation me).
 */
proctype Finisher(byte i; byte t; byte me)
{
  do
  :: atomic { inc[i] != me -> break }          /* the instance crashed    */
  :: atomic {
       inc[i] == me ->                         /* deadline: give up       */
       if
       :: unrec[t] -> EXCUSE_GAVEUP(t); unrec[t] = 0
       :: else -> skip
       fi;
       pend[t] = 0;
       settled(t);
       break
     }
  :: atomic {
       inc[i] == me ->                         /* ran, reply lost: again  */
       finish_exec(t)
     }
  :: atomic {
       inc[i] == me ->                         /* ran and answered        */
       finish_exec(t);
       unrec[t] = 0;
       pend[t] = 0;
       break
     }
  od
  /* A try that did not run at all changes nothing: not modelled. */
}

/* ------------------------------------------------------------------------
 * Instance i: deliver.go from the claim on, and forward.go.
 */
proctype Instance(byte i)
{
  byte t;
end:
  do
  /* Claim (claimScript). */
  :: atomic {
       st[i] == CLAIM ->
       if
       :: skip                                 /* did not run: 503        */
       :: lock == 0 && !rec ->                 /* ran, reply lost: 503    */
            take_lock(0)
       :: rec ->                               /* finished: replay        */
            P2_ACKED;
#ifdef RESET
            assert(rec_ep == ep);              /* P4(b)                   */
#endif
            window_add(rec_ep)
       :: !rec && lock != 0 -> skip            /* in flight: 409          */
       :: !rec && lock == 0 ->                 /* claimed                 */
            take_lock(1);
            tk[i] = ntok;
            st[i] = FWD
       fi;
       if
       :: st[i] == CLAIM -> st[i] = IDLE       /* answered                */
       :: else -> skip
       fi
     }
  /* Forward: the upstream receives the copy. */
  :: atomic {
       st[i] == FWD ->
       P1_ONCE(tok_ep[tk[i]]);
       st[i] = UP
     }
  /* The upstream's answer. */
  :: atomic {
       st[i] == UP ->
       t = tk[i];
       if
       :: true ->                              /* 2xx                     */
            accept(t); unrec[t] = 1; st[i] = FIN
       :: st[i] = REL                          /* 5xx, refused, or timeout */
                                               /* before it was processed  */
       :: true ->                              /* processed, but timed out */
            accept(t); EXCUSE_GHOST(t); st[i] = REL
       fi;
       t = 0
     }
  /* Release (releaseScript); the provider gets 5xx, 502 or 504. */
  :: atomic {
       st[i] == REL ->
       t = tk[i];
       pend[t] = 0;
       if
       :: skip                                 /* did not run             */
       :: lock == t -> lock = 0                /* ran                     */
       :: else -> skip                         /* ran: not the owner      */
       fi;
       settled(t);
       st[i] = IDLE; tk[i] = 0; t = 0
     }
  /* Finish (the tries before the answer), the 2xx answer and the window.
   * A finish that got no answer goes on in the background. */
  :: atomic {
       st[i] == FIN ->
       t = tk[i];
       if
       :: run Finisher(i, t, inc[i])           /* did not run             */
       :: true ->                              /* ran, reply lost         */
            finish_exec(t);
            run Finisher(i, t, inc[i])
       :: true ->                              /* ran and answered        */
            finish_exec(t);
            unrec[t] = 0; pend[t] = 0
       fi;
       P2_ACKED;
       window_add(tok_ep[t]);
       st[i] = IDLE; tk[i] = 0; t = 0
     }
  /* Crash, or a shutdown that cuts the delivery: the window and all
   * pending work of the instance are lost; it restarts empty. A hard crash
   * leaves the lock to expire; a shutdown releases the lock of a delivery
   * still waiting for the upstream (gateway.go ReleaseHeld), which may
   * still take the copy. */
  :: atomic {
       crashes < CRASHES ->
       crashes++;
       if
       :: st[i] == UP ->
            if
            :: skip                                 /* not taken upstream */
            :: true -> accept(tk[i]); unrec[tk[i]] = 1    /* taken        */
            fi;
            if
            :: skip                                 /* hard crash         */
            :: lock == tk[i] -> lock = 0            /* shutdown release   */
            fi
       :: else -> skip
       fi;
       j = 1;
       do
       :: j < T ->
            if
            :: tok_inst[j] == i && unrec[j] -> EXCUSE_KILL(j); unrec[j] = 0
            :: else -> skip
            fi;
            if
            :: tok_inst[j] == i && pend[j] -> pend[j] = 0; settled(j)
            :: else -> skip
            fi;
            j++
       :: else -> break
       od;
       j = 0;
       st[i] = IDLE; tk[i] = 0; win[i] = 0;
       inc[i]++
     }
  od
}

/* ------------------------------------------------------------------------
 * Expirer: the lock's TTL. A separate process, so that weak fairness makes
 * an expirable lock expire (P3).
 */
active proctype Expirer()
{
end:
  do
#ifdef NO_TTL
  :: atomic { false -> skip }           /* sabotage: locks never expire   */
#else
  :: atomic { lock != 0 && !pend[lock] -> lock = 0 }
#endif
  od
}

/* ------------------------------------------------------------------------
 * Env: tombstones expire; the operator resets the key once (-DRESET) and
 * the message reaches each instance later, in any order; Redis restarts
 * once without its data (-DLOSS).
 */
active proctype Env()
{
end:
  do
  :: atomic { TOMB_EXPIRES -> tomb = 0 }
#ifdef RESET
  /* keys reset: the inspect script with delete (store.Delete). */
  :: atomic {
       ep == 0 ->
       ep = 1;
#ifdef TOMB_ALWAYS
       tomb = T;
#else
       if
       :: lock != 0 -> tomb = lock           /* first build: only over a lock */
       :: else -> skip
       fi;
#endif
       lock = 0; rec = 0; rec_ep = 0
     }
  /* the pub/sub message reaches instance k: cache.Remove */
  :: atomic { ep == 1 && gen[0] == 0 -> gen[0] = 1; win[0] = 0 }
  :: atomic { ep == 1 && gen[1] == 0 -> gen[1] = 1; win[1] = 0 }
#if N > 2
  :: atomic { ep == 1 && gen[2] == 0 -> gen[2] = 1; win[2] = 0 }
#endif
#endif
#ifdef LOSS
  /* Redis restarts without its data: lock, record and tombstone vanish. */
  :: atomic {
       !lost ->
       lost = 1;
       if
       :: rec -> EXCUSE_LOSS(rec_tok)          /* an outcome was erased   */
       :: else -> skip
       fi;
       if
       :: lock != 0 && pend[lock] -> loss_open = lock
       :: else -> skip
       fi;
       lock = 0; rec = 0; rec_ep = 0; rec_tok = 0; tomb = 0
     }
#endif
  od
}

init
{
  atomic {
    j = 0;
    do
    :: j < N -> run Instance(j); j++
    :: else -> break
    od;
    j = 0
  }
}

#ifdef LIVE
/* P3: whenever the key is locked, it is eventually unlocked. */
ltl p3 { [] ((lock != 0) -> <> (lock == 0)) }
#endif

#!/usr/bin/env bash
# bench/run.sh: clawgate next to Nginx, HAProxy and Caddy in front of the
# same upstream, on loopback; prints the tables and writes
# docs/benchmarks.md. `make bench`.
#
# Targets (BENCH_TARGETS), each against the same upstream (bench/cmd/upstream):
#   direct                    wrk straight to the upstream: the machine's ceiling
#   nginx                     plain proxy_pass, upstream keep-alive, worker_processes
#                             auto (bench/nginx.conf.tmpl); the reference of every ratio
#   haproxy                   plain HTTP reverse proxy, http-reuse always, nbthread =
#                             nproc, master-worker (bench/haproxy.cfg.tmpl)
#   caddy                     reverse_proxy, admin off, auto_https off, its own loopback
#                             port only (bench/Caddyfile.tmpl)
#   floor-forward             bench/cmd/floor -mode forward: a fasthttp server that
#                             reads the body, hashes it (SHA-256) and forwards it
#                             with a fasthttp HostClient, answering the upstream's
#                             answer: the floor of a unique delivery
#   floor-answer              bench/cmd/floor -mode answer: reads the body, hashes
#                             it and answers a fixed JSON 200 from memory: the
#                             floor of a duplicate; it runs the duplicates case
#                             only (it never forwards, so unique, mix and the
#                             fixed-rate case would measure nothing)
#   clawgate-memory           clawgate (net/http front door) on the memory store
#   clawgate-redis            the same on Redis
#   clawgate-redis-nohistory  clawgate-redis's config plus `dedupe: { history: 0 }`
#                             (no key keeps a history); the report compares
#                             clawgate-redis's req/s with its own, unique case
#   clawgate-fasthttp-memory  clawgate-memory's config plus `server: fasthttp`
#   clawgate-fasthttp-redis   clawgate-redis's config plus `server: fasthttp`
#   clawgate-redis-queue      clawgate on Redis with `delivery: queue` (answers 202
#                             once the event is stored; workers forward it in the
#                             background: its req/s are acknowledgements, and after
#                             each run the script waits for the queue to drain
#                             before the next)
#   clawgate-redis-queue-ordered
#                             clawgate-redis-queue's config plus per-object order,
#                             `order: { by: "json:data.object.id" }`, fed by a second
#                             request file whose bodies carry ORDER_OBJECTS (1,000)
#                             object ids at data.object.id (delivery i's object is
#                             i mod 1,000; presign -objects), the same size and
#                             otherwise the same JSON; FLUSHALL and the drain wait as
#                             for the queue; the report compares its acks/s and its
#                             delivered events/s with clawgate-redis-queue's
#   clawgate-kafka-queue      the same queue route with `queue.backend: kafka` (the
#                             events in Kafka topics, the keys' ledger on the same
#                             Redis) against bench/cmd/kfake: franz-go's kfake, an
#                             in-process Go fake of Kafka on loopback with no disk
#                             and no replication, started afresh for each run, so
#                             its figures are not a real cluster's
# Cases: unique signed deliveries, pure duplicates, an 80/20 mix; then a
# fixed-rate latency case (with, for the queues, the accepted-to-delivered
# delay from the gateway's histogram) and the memory store's bytes per key.
# For every run the report shows req/s and CPU microseconds per request
# (wrk's load, the upstream, the proxy, Redis and kfake, from /proc), both
# as ratios to Nginx's in the same round, every clawgate target's ratios to
# its floor in the same round (unique and mix: floor-forward; duplicates:
# floor-answer), and what other work on the machine took meanwhile.
# Method and results: docs/benchmarks.md.
#
# Knobs (environment):
#   ROUNDS=3          rounds of every case x target (medians are reported)
#   DURATION=5        seconds per wrk run
#   CONNECTIONS=64    wrk connections;  THREADS=2  wrk threads
#   RATE=2000         fixed-rate requests/s; RATE_DURATION=6 s per target
#   RATE_ROUNDS=$ROUNDS   (0: skip the fixed-rate case)
#   MEMKEY_KEYS=1000000   finished keys for the memory measurement (0: skip)
#   SCALE=1           run the scaling benchmarks (BenchmarkScale*) for the
#                     "How the cost grows" table (0: skip); SCALE_TIME=2s
#                     per case (go test -benchtime); SCALE_KEYS=1000000,10000000
#                     finished keys held on memory, SCALE_REDIS_KEYS=1000000
#                     on Redis, SCALE_DEPTHS=0,100000,1000000 events waiting
#   BENCH_KEYS        pre-signed deliveries (default 100,000 x DURATION, at
#                     least 200,000): more than any target sends in one run
#   BENCH_LOGS=file   access logs to files in the temp dir (as run in
#                     production): clawgate's, Nginx's, HAProxy's (its log
#                     lines on its stdout, appended to a file) and Caddy's;
#                     "null": clawgate to /dev/null, Nginx's access_log off,
#                     no log line in HAProxy's and Caddy's configs
#   BENCH_CASES="unique dup mix"
#   BENCH_TARGETS="direct nginx haproxy caddy floor-forward floor-answer
#                  clawgate-memory clawgate-redis clawgate-redis-nohistory
#                  clawgate-fasthttp-memory clawgate-fasthttp-redis
#                  clawgate-redis-queue clawgate-redis-queue-ordered
#                  clawgate-kafka-queue"
#                     (the ratios need nginx and the floors in the list)
#   ORDER_OBJECTS=1000  distinct object ids (order.by values) in the ordered
#                     queue's request file
#   QUEUE_DRAIN=60    seconds to wait, after each run against a queue
#                     target, for every accepted event to be delivered (and,
#                     before it, for the pre-flight event)
#   BENCH_DOC         markdown output (default docs/benchmarks.md; none in
#                     quick mode); BENCH_RESULTS=FILE keeps the raw lines
#                     (and FILE.meta, FILE.scale: bench/cmd/report -results
#                     FILE -meta FILE.meta -scale FILE.scale renders the run
#                     again)
#   BENCH_QUICK=1     smoke run: 1 round of 2 s, 3 s fixed rate, 100k keys
#   BENCH_KEEP=1      keep the temp dir (configs, logs) for inspection
#   BENCH_NICE=N      run the whole bench at niceness N (e.g. -10, as root) so
#                     other work on a shared machine disturbs it less; it takes
#                     CPU from that work, so it is off by default
#
# Exit status: 0 when every run answered 2xx with no socket error, 1
# otherwise (the tables are still printed). A target missed is reported,
# not an error. Everything listens on 127.0.0.1 and every load run stops by
# itself after its duration.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/route.sh
. "$ROOT/bench/route.sh"
CALLER_PWD=$PWD
cd "$ROOT"
START_TIME=$EPOCHREALTIME

if [[ ${BENCH_QUICK:-0} == 1 ]]; then
	: "${ROUNDS:=1}" "${DURATION:=2}" "${RATE_DURATION:=3}" "${RATE_ROUNDS:=1}" "${MEMKEY_KEYS:=100000}"
	: "${SCALE_TIME:=200x}" "${SCALE_KEYS:=100000}" "${SCALE_REDIS_KEYS:=50000}" "${SCALE_DEPTHS:=0,50000}"
	: "${BENCH_DOC=}"
fi
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
CONNECTIONS=${CONNECTIONS:-64}
THREADS=${THREADS:-2}
RATE=${RATE:-2000}
RATE_DURATION=${RATE_DURATION:-6}
RATE_ROUNDS=${RATE_ROUNDS:-$ROUNDS}
MEMKEY_KEYS=${MEMKEY_KEYS:-1000000}
SCALE=${SCALE:-1}
SCALE_TIME=${SCALE_TIME:-2s}
SCALE_KEYS=${SCALE_KEYS:-1000000,10000000}
SCALE_REDIS_KEYS=${SCALE_REDIS_KEYS:-1000000}
SCALE_DEPTHS=${SCALE_DEPTHS:-0,100000,1000000}
BENCH_LOGS=${BENCH_LOGS:-file}
BENCH_CASES=${BENCH_CASES:-unique dup mix}
ALL_TARGETS="direct nginx haproxy caddy floor-forward floor-answer clawgate-memory clawgate-redis clawgate-redis-nohistory clawgate-fasthttp-memory clawgate-fasthttp-redis clawgate-redis-queue clawgate-redis-queue-ordered clawgate-kafka-queue"
BENCH_TARGETS=${BENCH_TARGETS:-$ALL_TARGETS}
QUEUE_DRAIN=${QUEUE_DRAIN:-60}
ORDER_OBJECTS=${ORDER_OBJECTS:-1000}
BENCH_DOC=${BENCH_DOC-$ROOT/docs/benchmarks.md}
# Paths given by the caller are relative to where run.sh was started.
[[ -n $BENCH_DOC && $BENCH_DOC != /* ]] && BENCH_DOC=$CALLER_PWD/$BENCH_DOC
[[ -n ${BENCH_RESULTS:-} && $BENCH_RESULTS != /* ]] && BENCH_RESULTS=$CALLER_PWD/$BENCH_RESULTS

log() { printf '[bench %s] %s\n' "$(date +%T)" "$*" >&2; }
die() {
	log "FATAL: $*"
	exit 1
}

for v in ROUNDS DURATION CONNECTIONS THREADS RATE RATE_DURATION QUEUE_DRAIN ORDER_OBJECTS; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v=${!v} must be a positive integer"
done
[[ $RATE_ROUNDS =~ ^[0-9]+$ ]] || die "RATE_ROUNDS=$RATE_ROUNDS must be an integer (0: no fixed-rate case)"
[[ $SCALE =~ ^[01]$ ]] || die "SCALE=$SCALE must be 0 or 1"
[[ $MEMKEY_KEYS =~ ^[0-9]+$ ]] || die "MEMKEY_KEYS=$MEMKEY_KEYS must be an integer (0: no memory measurement)"
((CONNECTIONS >= THREADS)) || die "CONNECTIONS ($CONNECTIONS) must be at least THREADS ($THREADS)"
((RATE_DURATION >= 2)) || die "RATE_DURATION must be at least 2 (the first second is warm-up)"
min_keys=$((DURATION * 100000 > 200000 ? DURATION * 100000 : 200000))
BENCH_KEYS=${BENCH_KEYS:-$min_keys}
[[ $BENCH_KEYS =~ ^[1-9][0-9]*$ ]] || die "BENCH_KEYS=$BENCH_KEYS must be a positive integer"
((RATE * RATE_DURATION < BENCH_KEYS)) || die "RATE x RATE_DURATION needs more than BENCH_KEYS=$BENCH_KEYS deliveries"
case $BENCH_LOGS in file | null) ;; *) die "BENCH_LOGS=$BENCH_LOGS: file or null" ;; esac
for c in $BENCH_CASES; do case $c in unique | dup | mix) ;; *) die "unknown case $c in BENCH_CASES" ;; esac; done
read -r -a TARGETS <<<"$BENCH_TARGETS"
((${#TARGETS[@]} > 0)) || die "BENCH_TARGETS is empty"
for t in "${TARGETS[@]}"; do
	[[ " $ALL_TARGETS " == *" $t "* ]] || die "unknown target $t in BENCH_TARGETS (known: $ALL_TARGETS)"
done
# has TARGET: whether TARGET is one of BENCH_TARGETS.
has() { [[ " ${TARGETS[*]} " == *" $1 "* ]]; }
# skips CASE TARGET: whether TARGET sits out CASE (a case name, or "rate"
# for the fixed-rate case): floor-answer answers every request from memory
# and never forwards, so only the duplicates case measures anything on it.
skips() { [[ $2 == floor-answer && $1 != dup ]]; }
# uses_redis TARGET: the clawgate targets whose store (or ledger) is the bench Redis.
uses_redis() { [[ $1 == clawgate-*redis* || $1 == clawgate-kafka-queue ]]; }
# is_queue TARGET: the clawgate targets with `delivery: queue`.
is_queue() { [[ $1 == clawgate-*-queue || $1 == clawgate-*-queue-ordered ]]; }
NEED_REDIS=0
for t in "${TARGETS[@]}"; do if uses_redis "$t"; then NEED_REDIS=1; fi; done

if [[ -n ${BENCH_NICE:-} ]]; then
	[[ $BENCH_NICE =~ ^-?[0-9]+$ ]] || die "BENCH_NICE=$BENCH_NICE must be an integer"
	renice -n "$BENCH_NICE" -p $$ >/dev/null || die "renice -n $BENCH_NICE failed (negative values need root)"
fi

# --- tools -----------------------------------------------------------------

pkgs=(wrk wrk nginx nginx-light redis-server redis-server)
has haproxy && pkgs+=(haproxy haproxy)
has caddy && pkgs+=(caddy caddy)
scripts/ensure-pkg.sh "${pkgs[@]}"
command -v go >/dev/null || die "go is not on PATH"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/clawgate-bench.XXXXXX")
BIN=$TMP/bin
RESULTS=$TMP/results.txt
META=$TMP/meta.txt
: >"$RESULTS"

# Processes this script started, stopped by pid at exit.
PIDS=()
forget_pid() {
	local keep=() p
	for p in "${PIDS[@]}"; do [[ $p == "$1" ]] || keep+=("$p"); done
	PIDS=("${keep[@]+"${keep[@]}"}")
}
stop_pid() {
	local pid=$1 i state=""
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 100; i++)); do
		# (bash reaps its children as they exit, so the file can go at any
		# moment: a failed read means the process is gone; read, not
		# $(<file), which under set -e ends the script when it fails)
		{ read -r state <"/proc/$pid/stat"; } 2>/dev/null || break
		state=${state##*) }
		[[ ${state:0:1} == Z ]] && break
		sleep 0.05
	done
	if [[ -r /proc/$pid/stat && ${state:0:1} != Z ]]; then
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || true
	forget_pid "$pid"
}
cleanup() {
	local rc=$? p
	for p in "${PIDS[@]+"${PIDS[@]}"}"; do stop_pid "$p"; done
	if [[ ${BENCH_KEEP:-0} == 1 ]]; then
		log "kept $TMP"
	else
		rm -rf "$TMP"
	fi
	return $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

log "building clawgate and the bench tools into $TMP"
go build -o "$TMP/clawgate" ./cmd/clawgate || die "go build ./cmd/clawgate failed"
mkdir -p "$BIN"
go build -o "$BIN/" ./bench/cmd/... || die "go build ./bench/cmd/... failed"

# wait_port PORT PID: until 127.0.0.1:PORT accepts, while PID lives.
wait_port() {
	local port=$1 pid=$2 i
	for ((i = 0; i < 200; i++)); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
		kill -0 "$pid" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

# --- CPU accounting from /proc ---------------------------------------------

CLK_TCK=$(getconf CLK_TCK)
# ticks PID...: utime+stime of the live ones, in clock ticks.
ticks() {
	local sum=0 pid s a
	for pid in "$@"; do
		s=$(cat "/proc/$pid/stat" 2>/dev/null) || continue
		s=${s##*) }
		read -r -a a <<<"$s"
		sum=$((sum + a[11] + a[12]))
	done
	echo "$sum"
}
# child_ticks: sets CHILD_TICKS to cutime+cstime of this shell (the CPU of
# the children it has reaped: wrk's when taken around it). Call it directly,
# not in $(...), which would read the subshell's.
child_ticks() {
	local me=$BASHPID s a
	read -r s <"/proc/$me/stat"
	s=${s##*) }
	read -r -a a <<<"$s"
	CHILD_TICKS=$((a[13] + a[14]))
}
# task_ticks PID TID: sets TASK_TICKS to utime+stime of one thread of PID,
# in clock ticks, 0 when it is gone. Builtins only, called directly: no
# child process whose CPU child_ticks would count.
task_ticks() {
	local s a
	TASK_TICKS=0
	{ read -r s <"/proc/$1/task/$2/stat"; } 2>/dev/null || return 0
	s=${s##*) }
	read -r -a a <<<"$s"
	TASK_TICKS=$((a[11] + a[12]))
}
# nap SECONDS: sleep without forking (read times out on a pipe nobody
# writes), for the polls inside a measured wrk run.
exec {NAP_FD}<> <(:)
nap() { read -r -t "$1" -u "$NAP_FD" _ || true; }
# machine: "busy total" jiffies of all CPUs.
machine() {
	local _c u n s idle iow irq sirq steal
	read -r _c u n s idle iow irq sirq steal _ </proc/stat
	echo "$((u + n + s + irq + sirq + steal)) $((u + n + s + idle + iow + irq + sirq + steal))"
}
children_of() {
	local f s a
	for f in /proc/[0-9]*/stat; do
		{ read -r s <"$f"; } 2>/dev/null || continue
		s=${s##*) }
		read -r -a a <<<"$s"
		[[ ${a[1]} == "$1" ]] && { f=${f#/proc/}; echo "${f%/stat}"; }
	done
	return 0
}

# --- request file ----------------------------------------------------------

export CLAWGATE_BENCH_SECRET="bench-secret-$RANDOM$RANDOM"
REQ=$TMP/requests.txt
log "pre-signing $BENCH_KEYS deliveries (1 KiB bodies)"
"$BIN/presign" -n "$BENCH_KEYS" -out "$REQ" -secret-env CLAWGATE_BENCH_SECRET
PREFLIGHT_INDEX=$((BENCH_KEYS - 1)) # never reached by a run that does not wrap
# The ordered queue's file: the same deliveries (keys, size, JSON) with an
# object id at data.object.id, ORDER_OBJECTS of them (i mod ORDER_OBJECTS),
# what its route's order.by reads. The other targets keep the plain file.
REQ_ORDERED=$TMP/requests-ordered.txt
if has clawgate-redis-queue-ordered; then
	log "pre-signing $BENCH_KEYS deliveries over $ORDER_OBJECTS objects for the ordered queue"
	"$BIN/presign" -n "$BENCH_KEYS" -objects "$ORDER_OBJECTS" -out "$REQ_ORDERED" -secret-env CLAWGATE_BENCH_SECRET
fi
# req_file TARGET: sets REQ_FILE to the request file TARGET is fed (no
# subshell: run_wrk's CPU accounting counts every child process).
req_file() {
	REQ_FILE=$REQ
	if [[ $1 == clawgate-redis-queue-ordered ]]; then REQ_FILE=$REQ_ORDERED; fi
}

# --- upstream, nginx, haproxy, caddy, redis ----------------------------------

mapfile -t ports < <("$BIN/freeport" -n 8)
((${#ports[@]} == 8)) || die "freeport failed"
NGINX_PORT=${ports[0]} REDIS_PORT=${ports[1]} CG_PORT=${ports[2]} CG_ADMIN_PORT=${ports[3]} KAFKA_PORT=${ports[4]}
HAPROXY_PORT=${ports[5]} CADDY_PORT=${ports[6]} FLOOR_PORT=${ports[7]}

"$BIN/upstream" -listen 127.0.0.1:0 -addr-file "$TMP/upstream.addr" >"$TMP/upstream.log" 2>&1 &
UP_PID=$!
PIDS+=("$UP_PID")
for ((i = 0; i < 100; i++)); do [[ -s $TMP/upstream.addr ]] && break; sleep 0.05; done
UP_ADDR=$(<"$TMP/upstream.addr") || die "upstream did not start: $(cat "$TMP/upstream.log")"
wait_port "${UP_ADDR##*:}" "$UP_PID" || die "upstream did not start"

NGINX_PIDS=()
if has nginx; then
	ND=$TMP/nginx
	mkdir -p "$ND"
	user_line=""
	[[ $(id -u) == 0 ]] && user_line="user $(id -un) $(id -gn);" # else nginx wants the user "nobody"
	access_log="$ND/access.log"
	[[ $BENCH_LOGS == null ]] && access_log=off
	sed -e "s|@DIR@|$ND|g" -e "s|@USER@|$user_line|" -e "s|@ACCESS_LOG@|$access_log|" \
		-e "s|@UPSTREAM@|$UP_ADDR|" -e "s|@LISTEN@|127.0.0.1:$NGINX_PORT|" \
		bench/nginx.conf.tmpl >"$ND/nginx.conf"
	nginx -t -q -p "$ND" -c "$ND/nginx.conf" -e "$ND/error.log" || die "nginx -t failed: $(cat "$ND/error.log")"
	nginx -p "$ND" -c "$ND/nginx.conf" -e "$ND/error.log" >"$ND/stdout.log" 2>&1 &
	NGINX_MASTER=$!
	PIDS+=("$NGINX_MASTER")
	wait_port "$NGINX_PORT" "$NGINX_MASTER" || die "nginx did not start: $(cat "$ND/error.log")"
	for ((i = 0; i < 40; i++)); do
		mapfile -t workers < <(children_of "$NGINX_MASTER")
		((${#workers[@]} >= $(nproc))) && break
		sleep 0.05
	done
	NGINX_PIDS=("$NGINX_MASTER" "${workers[@]}")
fi

# HAProxy in master-worker mode, in the foreground (-W -db, as its official
# container image runs it); its CPU is the master's and the workers'. It
# logs only to syslog or to a file descriptor: with BENCH_LOGS=file its
# access lines go to its stdout, HD/access.log (log_reset frees it between
# runs).
HAPROXY_PIDS=()
if has haproxy; then
	HD=$TMP/haproxy
	mkdir -p "$HD"
	log_line="# no access log (BENCH_LOGS=null)"
	[[ $BENCH_LOGS == file ]] && log_line="log stdout format raw local0 info"
	sed -e "s|@NBTHREAD@|$(nproc)|" -e "s|@LOG@|$log_line|" \
		-e "s|@UPSTREAM@|$UP_ADDR|" -e "s|@LISTEN@|127.0.0.1:$HAPROXY_PORT|" \
		bench/haproxy.cfg.tmpl >"$HD/haproxy.cfg"
	haproxy -c -q -f "$HD/haproxy.cfg" >"$HD/check.log" 2>&1 || die "haproxy -c failed: $(cat "$HD/check.log")"
	: >"$HD/access.log"
	haproxy -W -db -f "$HD/haproxy.cfg" >>"$HD/access.log" 2>"$HD/error.log" &
	HAPROXY_MASTER=$!
	PIDS+=("$HAPROXY_MASTER")
	wait_port "$HAPROXY_PORT" "$HAPROXY_MASTER" || die "haproxy did not start: $(cat "$HD/error.log")"
	for ((i = 0; i < 40; i++)); do
		mapfile -t workers < <(children_of "$HAPROXY_MASTER")
		((${#workers[@]} >= 1)) && break
		sleep 0.05
	done
	((${#workers[@]} >= 1)) || die "haproxy started no worker: $(cat "$HD/error.log")"
	HAPROXY_PIDS=("$HAPROXY_MASTER" "${workers[@]}")
fi

# Caddy: one process; its own XDG dirs in the temp dir, no admin endpoint,
# no automatic HTTPS, only CADDY_PORT on loopback, so a packaged caddy
# service running on :80, :443 and admin :2019 is no conflict.
CADDY_PID=""
if has caddy; then
	CD=$TMP/caddy
	mkdir -p "$CD"
	log_line="# no access log (BENCH_LOGS=null)"
	[[ $BENCH_LOGS == file ]] && log_line="log {\n\t\toutput file $CD/access.log {\n\t\t\troll_disabled\n\t\t}\n\t}"
	sed -e "s|@LOG@|$log_line|" -e "s|@UPSTREAM@|$UP_ADDR|" -e "s|@LISTEN@|127.0.0.1:$CADDY_PORT|" \
		bench/Caddyfile.tmpl >"$CD/Caddyfile"
	XDG_DATA_HOME=$CD/data XDG_CONFIG_HOME=$CD/config HOME=$CD \
		caddy validate --config "$CD/Caddyfile" --adapter caddyfile >"$CD/check.log" 2>&1 ||
		die "caddy validate failed: $(tail -n 5 "$CD/check.log")"
	XDG_DATA_HOME=$CD/data XDG_CONFIG_HOME=$CD/config HOME=$CD \
		caddy run --config "$CD/Caddyfile" --adapter caddyfile >"$CD/stdout.log" 2>"$CD/error.log" &
	CADDY_PID=$!
	PIDS+=("$CADDY_PID")
	wait_port "$CADDY_PORT" "$CADDY_PID" || die "caddy did not start: $(tail -n 5 "$CD/error.log")"
fi

REDIS_PID=""
if ((NEED_REDIS)); then
	mkdir -p "$TMP/redis"
	redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no \
		--dir "$TMP/redis" --logfile "$TMP/redis/redis.log" --daemonize no &
	REDIS_PID=$!
	PIDS+=("$REDIS_PID")
	wait_port "$REDIS_PORT" "$REDIS_PID" || die "redis-server did not start: $(cat "$TMP/redis/redis.log")"
fi
redis_flush() {
	local fd reply=""
	exec {fd}<>"/dev/tcp/127.0.0.1/$REDIS_PORT" || return 1
	printf '*1\r\n$8\r\nFLUSHALL\r\n' >&"$fd"
	IFS= read -r -t 10 reply <&"$fd" || true
	exec {fd}>&-
	[[ $reply == +OK* ]]
}

# kfake (bench/cmd/kfake): one in-process fake broker on KAFKA_PORT, started
# afresh for every run of the Kafka target (empty topics, no consumer
# groups, no committed offsets: nothing of an earlier run) and stopped
# before any other target runs, so it takes no CPU or memory from them.
KAFKA_PID=""
start_kafka() {
	rm -f "$TMP/kafka.addr"
	"$BIN/kfake" -port "$KAFKA_PORT" -addr-file "$TMP/kafka.addr" -log warn >"$TMP/kafka.out" 2>"$TMP/kafka.log" &
	KAFKA_PID=$!
	PIDS+=("$KAFKA_PID")
	for ((i = 0; i < 100; i++)); do [[ -s $TMP/kafka.addr ]] && break; sleep 0.05; done
	[[ -s $TMP/kafka.addr ]] || die "kfake did not start: $(tail -n 5 "$TMP/kafka.log")"
	wait_port "$KAFKA_PORT" "$KAFKA_PID" || die "kfake did not start: $(tail -n 5 "$TMP/kafka.log")"
}
stop_kafka() {
	if [[ -n $KAFKA_PID ]]; then
		stop_pid "$KAFKA_PID"
		KAFKA_PID=""
	fi
}

# --- clawgate --------------------------------------------------------------

# write_config NAME: clawgate-NAME.yaml for target clawgate-NAME (memory,
# redis, redis-nohistory, fasthttp-memory, fasthttp-redis, redis-queue,
# redis-queue-ordered, kafka-queue). redis-nohistory is redis's plus
# `dedupe: { history: 0 }`. The fasthttp- ones are the same config plus `server:
# fasthttp`, the front door on fasthttp's server instead of net/http's;
# redis-queue-ordered is redis-queue's plus `order: { by:
# "json:data.object.id" }`.
write_config() {
	local store="backend: memory" queue="" delivery="" server="" dedupe=""
	[[ $1 == *-nohistory ]] && dedupe="
dedupe:
  history: 0"
	[[ $1 == fasthttp-* ]] && server="
server: fasthttp"
	[[ $1 == *redis* || $1 == kafka-queue ]] && store="backend: redis
  redis:
    addrs: [\"127.0.0.1:$REDIS_PORT\"]"
	# The queue: 202 once stored, the default 8 workers forward; max_depth
	# far above what one run sends, so no run is ever answered 503 for it.
	[[ $1 == *-queue || $1 == *-queue-ordered ]] && queue="queue:
  max_depth: 10000000" && delivery="
    delivery: queue"
	# Per-object order: the events of one object (data.object.id in the
	# ordered request file's bodies) delivered one at a time, in order.
	[[ $1 == *-queue-ordered ]] && delivery+="
    order: { by: \"json:data.object.id\" }"
	# On Kafka: the events in kfake's topics (created at start, 8
	# partitions), the keys' ledger on the same Redis.
	[[ $1 == kafka-queue ]] && queue+="
  backend: kafka
  kafka:
    brokers: [\"127.0.0.1:$KAFKA_PORT\"]
    topic_prefix: \"bench.\"
    partitions: 8"
	cat >"$TMP/clawgate-$1.yaml" <<EOF
# Written by bench/run.sh; everything not shown is at its default.
listen: "127.0.0.1:$CG_PORT"$server
admin:
  listen: "127.0.0.1:$CG_ADMIN_PORT"
store:
  $store$dedupe
$queue
$(bench_route "$UP_ADDR" "$delivery")
EOF
	"$TMP/clawgate" check -config "$TMP/clawgate-$1.yaml" >"$TMP/check.out" 2>&1 ||
		die "clawgate check rejected $TMP/clawgate-$1.yaml: $(cat "$TMP/check.out")"
}
for t in "${TARGETS[@]}"; do
	if [[ $t == clawgate-* ]]; then write_config "${t#clawgate-}"; fi
done

CG_PID=""
CG_LOG=$TMP/clawgate.log
[[ $BENCH_LOGS == null ]] && CG_LOG=/dev/null
start_clawgate() { # NAME, as write_config's
	"$TMP/clawgate" serve -config "$TMP/clawgate-$1.yaml" -grace 2s 2>"$CG_LOG" &
	CG_PID=$!
	PIDS+=("$CG_PID")
	wait_port "$CG_PORT" "$CG_PID" || die "clawgate did not start: $(tail -n 5 "$CG_LOG")"
}
stop_clawgate() {
	if [[ -n $CG_PID ]]; then
		stop_pid "$CG_PID"
		CG_PID=""
	fi
}

# The floors (bench/cmd/floor): a fresh process for every run, on
# FLOOR_PORT, stopped before the next target runs (as clawgate is); they
# log nothing.
FLOOR_PID=""
start_floor() { # MODE: forward or answer
	"$BIN/floor" -mode "$1" -listen "127.0.0.1:$FLOOR_PORT" -upstream "$UP_ADDR" >"$TMP/floor.log" 2>&1 &
	FLOOR_PID=$!
	PIDS+=("$FLOOR_PID")
	wait_port "$FLOOR_PORT" "$FLOOR_PID" || die "floor -mode $1 did not start: $(tail -n 5 "$TMP/floor.log")"
}
stop_floor() {
	if [[ -n $FLOOR_PID ]]; then
		stop_pid "$FLOOR_PID"
		FLOOR_PID=""
	fi
}

# log_reset FILE: frees a proxy's access log between runs. Nginx and Caddy
# append (O_APPEND), so it is truncated. HAProxy writes its log lines at its
# own offset even into a file opened for appending (a truncated one grows
# back, sparse, to where it was), so its file keeps its size and only its
# blocks are freed (a hole punched over them); run_wrk measures the bytes a
# run logged from the size before and after either way.
log_reset() {
	if [[ $1 == "${HD:-}/access.log" ]]; then
		fallocate --punch-hole --offset 0 --length "$(size_of "$1")" "$1" 2>/dev/null || true
	else
		: >"$1"
	fi
}

# setup_target TARGET: fresh state for one run; sets URL, PROXY_PIDS,
# LOGFILE, REQ_FILE.
setup_target() {
	req_file "$1"
	stop_clawgate
	stop_floor
	stop_kafka
	PROXY_PIDS=()
	LOGFILE=""
	case $1 in
	direct) URL=http://$UP_ADDR ;;
	nginx)
		URL=http://127.0.0.1:$NGINX_PORT
		PROXY_PIDS=("${NGINX_PIDS[@]}")
		[[ $BENCH_LOGS == file ]] && { LOGFILE=$ND/access.log; log_reset "$LOGFILE"; }
		;;
	haproxy)
		URL=http://127.0.0.1:$HAPROXY_PORT
		PROXY_PIDS=("${HAPROXY_PIDS[@]}")
		[[ $BENCH_LOGS == file ]] && { LOGFILE=$HD/access.log; log_reset "$LOGFILE"; }
		;;
	caddy)
		URL=http://127.0.0.1:$CADDY_PORT
		PROXY_PIDS=("$CADDY_PID")
		[[ $BENCH_LOGS == file ]] && { LOGFILE=$CD/access.log; log_reset "$LOGFILE"; }
		;;
	floor-*)
		start_floor "${1#floor-}"
		URL=http://127.0.0.1:$FLOOR_PORT
		PROXY_PIDS=("$FLOOR_PID")
		;;
	clawgate-*)
		if uses_redis "$1"; then redis_flush || die "FLUSHALL on the bench redis failed"; fi
		[[ $1 == clawgate-kafka-queue ]] && start_kafka
		start_clawgate "${1#clawgate-}"
		URL=http://127.0.0.1:$CG_PORT
		PROXY_PIDS=("$CG_PID")
		[[ $BENCH_LOGS == file ]] && LOGFILE=$CG_LOG
		;;
	esac
	return 0 # (a false [[ ]] above, with BENCH_LOGS=null, is not a failure)
}

preflight() { # INDEX
	"$BIN/rate" -url "$URL" -requests "$REQ_FILE" -once -index "$1" >"$TMP/preflight.out" 2>&1 ||
		die "pre-flight request to $TARGET failed ($URL): $(cat "$TMP/preflight.out")"
}

# queue_ready TARGET: on a queue target, waits (at most QUEUE_DRAIN s) until
# the pre-flight event is delivered, so the load starts with the workers
# consuming: on Kafka the consumer group's first join and partition
# assignment happen after the gateway listens, and without this wait the
# first events of a run would wait for them (the pre-flight delivery itself
# is in the run's delay histogram either way). Sets QUEUE_BASE to the
# events delivered by then (the pre-flight's), which queue_drain reports as
# delivered_before.
queue_ready() {
	local out
	QUEUE_BASE=0
	is_queue "$1" || return 0
	out=$("$BIN/promq" -url "http://127.0.0.1:$CG_ADMIN_PORT/metrics" -route bench -drain "${QUEUE_DRAIN}s" 2>&1) ||
		die "promq failed on $1: $out"
	[[ $out == *" drained=1 "* ]] ||
		die "the pre-flight event to $1 was not delivered within ${QUEUE_DRAIN}s: $out; gateway log: $(grep -v '"msg":"delivery"' "$CG_LOG" | tail -n 5)"
	QUEUE_BASE=$(sed -n 's/.* delivered=\([0-9]*\) .*/\1/p' <<<"$out")
	[[ -n $QUEUE_BASE ]] || die "promq printed no delivered count on $1: $out"
}

size_of() { if [[ -n $1 && -f $1 ]]; then stat -c %s "$1"; else echo 0; fi; }

# queue_drain TARGET SINCE: on a queue target, waits (at most QUEUE_DRAIN s
# from SINCE, the end of the load run) until every event the gateway accepted
# is delivered, polling the admin /metrics, so that no background delivery of
# this run goes on into the next one. Sets QUEUE_FIELDS to what bench/cmd/promq
# read (queued, delivered, drained, drain_ms, the accepted-to-delivered delay's
# p50 and p99 from the histogram) and delivered_before (queue_ready's
# QUEUE_BASE: delivered before the load began), "" on the other targets;
# queue_print shows them.
queue_drain() {
	local out
	QUEUE_FIELDS=""
	is_queue "$1" || return 0
	out=$("$BIN/promq" -url "http://127.0.0.1:$CG_ADMIN_PORT/metrics" -route bench \
		-drain "${QUEUE_DRAIN}s" -since "${2/,/.}" 2>&1) || die "promq failed on $1: $out"
	out=$(grep '^PROMQ ' <<<"$out") || die "promq printed no result on $1"
	QUEUE_FIELDS="${out#PROMQ } delivered_before=$QUEUE_BASE"
}
queue_print() {
	[[ -n $QUEUE_FIELDS ]] || return 0
	awk '{
		for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		printf "[bench]   queue: %s accepted, %s delivered, %s %.1f s after the run; accepted to delivered p50 %.2f ms, p99 %.2f ms (histogram)\n",
			v["queued"], v["delivered"], (v["drained"] == 1 ? "drained" : "NOT drained, gave up"), v["drain_ms"]/1000,
			v["delay_p50_us"]/1000, v["delay_p99_us"]/1000 }' <<<"$QUEUE_FIELDS" >&2
}

# --- one wrk run -----------------------------------------------------------

run_wrk() { # ROUND CASE TARGET
	local round=$1 case=$2 TARGET=$3 line
	setup_target "$TARGET"
	if [[ $case == dup ]]; then preflight 0; else preflight "$PREFLIGHT_INDEX"; fi
	queue_ready "$TARGET"
	local log0 px0 up0 rd0 kf0 ch0 m0 px1 up1 rd1 kf1 ch1 m1 t0 t1
	log0=$(size_of "$LOGFILE")
	px0=$(ticks "${PROXY_PIDS[@]+"${PROXY_PIDS[@]}"}")
	up0=$(ticks "$UP_PID")
	rd0=$(ticks $REDIS_PID)
	kf0=$(ticks $KAFKA_PID)
	m0=$(machine)
	child_ticks
	ch0=$CHILD_TICKS
	t0=$EPOCHREALTIME
	timeout -k 5 $((DURATION + 120)) wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --timeout 5s \
		-s "$ROOT/bench/wrk/deliveries.lua" "$URL/" -- "$REQ_FILE" "$case" "$THREADS" >"$TMP/wrk.out" 2>&1 &
	local tpid=$! wpid="" tasks setup=0 i
	PIDS+=("$tpid")
	# wrk's main thread loads the request file into each thread's Lua state
	# in turn, starting each thread once its state is loaded, and then
	# sleeps through the run: its CPU once all THREADS threads exist is
	# wrk's setup, which is left out of wrk's share (what remains is the
	# load it sent). Polled with builtins only (no child process, whose CPU
	# would land in wrk's figure). Without /proc/PID/task/TID/children
	# (CONFIG_PROC_CHILDREN) the setup stays in wrk's share.
	for ((i = 0; i < 6000; i++)); do
		kill -0 "$tpid" 2>/dev/null || break
		# (the children file has no newline: read fails but sets wpid)
		[[ -n $wpid ]] || { read -r wpid _ <"/proc/$tpid/task/$tpid/children"; } 2>/dev/null || true
		if [[ -n $wpid ]]; then
			tasks=(/proc/"$wpid"/task/*)
			((${#tasks[@]} >= THREADS + 1)) && break
		fi
		nap 0.02
	done
	if [[ -n $wpid ]]; then
		nap 0.05
		task_ticks "$wpid" "$wpid"
		setup=$TASK_TICKS
	fi
	if ! wait "$tpid"; then
		forget_pid "$tpid"
		die "wrk failed on $TARGET: $(cat "$TMP/wrk.out")"
	fi
	forget_pid "$tpid"
	t1=$EPOCHREALTIME
	child_ticks
	ch1=$CHILD_TICKS
	px1=$(ticks "${PROXY_PIDS[@]+"${PROXY_PIDS[@]}"}")
	up1=$(ticks "$UP_PID")
	rd1=$(ticks $REDIS_PID)
	kf1=$(ticks $KAFKA_PID)
	m1=$(machine)
	queue_drain "$TARGET" "$t1" # after the CPU readings: the wrk window's accounting is not changed by it
	line=$(grep '^BENCH ' "$TMP/wrk.out") || die "wrk printed no result for $TARGET: $(cat "$TMP/wrk.out")"
	line=${line#BENCH }
	local dur req log1
	dur=$(sed -n 's/.*duration_us=\([0-9]*\).*/\1/p' <<<"$line")
	req=$(sed -n 's/^requests=\([0-9]*\).*/\1/p' <<<"$line")
	log1=$(size_of "$LOGFILE")
	# CPU in percent of one core over wrk's measured duration (wrk's: its
	# load only, its setup apart in cpu_wrk_setup_ms); proxy_cpu_us and
	# total_cpu_us: CPU time over the whole wrk invocation, the proxy's and
	# everything serving the requests (wrk's load, the upstream, the proxy,
	# Redis, kfake), which the report divides by the requests completed.
	# The machine's busy share over the whole wrk invocation; "others": the
	# machine's busy cores minus ours (wrk's setup and kfake's included),
	# i.e. other tenants.
	local cpu
	cpu=$(awk -v hz="$CLK_TCK" -v d="$dur" -v px=$((px1 - px0)) -v up=$((up1 - up0)) -v rd=$((rd1 - rd0)) \
		-v kf=$((kf1 - kf0)) -v ch=$((ch1 - ch0)) -v su="$setup" -v m0="$m0" -v m1="$m1" -v lb=$((log1 - log0)) -v req="$req" \
		-v ncpu="$(nproc)" -v t0="$t0" -v t1="$t1" 'BEGIN {
		s = d / 1e6; w = t1 - t0; split(m0, a, " "); split(m1, b, " ")
		if (su > ch) su = ch
		busy = (b[2] > a[2]) ? 100 * (b[1] - a[1]) / (b[2] - a[2]) : 0
		others = busy * ncpu - 100 * (px + up + rd + kf + ch) / hz / w
		printf "cpu_proxy=%.0f cpu_upstream=%.0f cpu_redis=%.0f cpu_kafka=%.0f cpu_wrk=%.0f cpu_wrk_setup_ms=%.0f cpu_machine=%.0f cpu_others=%.0f proxy_cpu_us=%.0f total_cpu_us=%.0f wall_ms=%.0f log_bytes_per_req=%.0f",
			100*px/hz/s, 100*up/hz/s, 100*rd/hz/s, 100*kf/hz/s, 100*(ch-su)/hz/s, 1000*su/hz, busy, (others > 0 ? others : 0),
			1e6*px/hz, 1e6*(px+up+rd+kf+ch-su)/hz, 1000*w, (req > 0 ? lb/req : 0) }')
	# Which statuses, when some failed: from the access log of the run
	# (nginx's combined format: field 9; HAProxy's httplog: field 6;
	# clawgate's and Caddy's JSON lines: "status").
	local statuses=""
	if [[ $line != *" status_err=0 "* && -n $LOGFILE && -s $LOGFILE ]]; then
		if [[ $TARGET == nginx || $TARGET == haproxy ]]; then
			local f=9
			[[ $TARGET == haproxy ]] && f=6
			statuses=$(tail -c +$((log0 + 1)) "$LOGFILE" | awk -v f="$f" '$f !~ /^2/ { n[$f]++ } END { for (s in n) printf "%s%s:%d", (i++ ? "," : ""), s, n[s] }')
		else
			statuses=$(tail -c +$((log0 + 1)) "$LOGFILE" | grep -o '"status":[0-9]*' | cut -d: -f2 |
				awk '$1 !~ /^2/ { n[$1]++ } END { for (s in n) printf "%s%s:%d", (i++ ? "," : ""), s, n[s] }')
		fi
	fi
	echo "kind=wrk round=$round case=$case target=$TARGET $line $cpu${statuses:+ statuses=$statuses}${QUEUE_FIELDS:+ $QUEUE_FIELDS}" >>"$RESULTS"
	awk -v r="$round/$ROUNDS" -v c="$case" -v t="$TARGET" '{
		for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		n = (v["requests"] > 0) ? v["requests"] : 1
		printf "[bench] round %s  %-6s  %-24s  %8.0f req/s  p50 %6.2f ms  p99 %7.2f ms  >=400: %s  cpu/req: all %5.1f us, proxy %5.1f us  others %s%%\n",
			r, c, t, v["rps"], v["p50_us"]/1000, v["p99_us"]/1000, v["status_err"], v["total_cpu_us"]/n, v["proxy_cpu_us"]/n, v["cpu_others"] }' <<<"$line $cpu" >&2
	queue_print
	[[ -n $LOGFILE && $LOGFILE != "$CG_LOG" ]] && log_reset "$LOGFILE"
	return 0
}

run_rate() { # ROUND TARGET
	local round=$1 TARGET=$2 line
	setup_target "$TARGET"
	preflight "$PREFLIGHT_INDEX"
	queue_ready "$TARGET"
	timeout -k 5 $((RATE_DURATION + 60)) "$BIN/rate" -url "$URL" -requests "$REQ_FILE" -rate "$RATE" \
		-duration "${RATE_DURATION}s" -warmup 1s -conns 64 >"$TMP/rate.out" 2>&1 ||
		die "rate failed on $TARGET: $(cat "$TMP/rate.out")"
	queue_drain "$TARGET" "$EPOCHREALTIME"
	line=$(grep '^RATE ' "$TMP/rate.out") || die "rate printed no result for $TARGET: $(cat "$TMP/rate.out")"
	line=${line#RATE }
	echo "kind=rate round=$round target=$TARGET $line${QUEUE_FIELDS:+ $QUEUE_FIELDS}" >>"$RESULTS"
	awk -v r="$round/$RATE_ROUNDS" -v t="$TARGET" '{
		for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		printf "[bench] fixed rate %s  %-24s  p50 %6.2f ms  p99 %7.2f ms  p99.9 %7.2f ms  non-2xx %s  errors %s\n",
			r, t, v["p50_us"]/1000, v["p99_us"]/1000, v["p999_us"]/1000, v["non2xx"], v["errors"] }' <<<"$line" >&2
	queue_print
}

# --- the runs ----------------------------------------------------------------

LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
nc=$(wc -w <<<"$BENCH_CASES")
nw=0 nr=0 # runs per round: throughput (cases x targets), fixed rate
for t in "${TARGETS[@]}"; do
	for c in $BENCH_CASES; do skips "$c" "$t" || nw=$((nw + 1)); done
	skips rate "$t" || nr=$((nr + 1))
done
est=$((ROUNDS * nw * (DURATION + 2) + RATE_ROUNDS * nr * (RATE_DURATION + 2)))
drain_note=""
for t in "${TARGETS[@]}"; do if is_queue "$t"; then drain_note=x; fi; done
[[ -n $drain_note ]] && drain_note=", plus the queue's drain after each of its runs"
log "running: $ROUNDS round(s) x $nc case(s) x ${#TARGETS[@]} target(s) x ${DURATION}s, then fixed rate $RATE/s; about $((est / 60))m$((est % 60))s$drain_note"
log "wrk -t$THREADS -c$CONNECTIONS; upstream $UP_ADDR, nginx :$NGINX_PORT, haproxy :$HAPROXY_PORT, caddy :$CADDY_PORT, redis :$REDIS_PORT, kfake :$KAFKA_PORT, floors :$FLOOR_PORT, clawgate :$CG_PORT; logs: $BENCH_LOGS"
has floor-answer && log "floor-answer runs the duplicates case only (it never forwards: unique, mix and fixed rate would measure nothing)"

# round_order R: the targets in round R's order, one a line: rotated by one
# per round (no target is always first after an idle pause), and backwards
# in every second round, so that two targets a round compares (a target and
# its floor or Nginx, Redis with and without the history) run in both orders
# over the rounds rather than always in the same one.
round_order() {
	local r=$1 n=${#TARGETS[@]} k i
	for ((k = 0; k < n; k++)); do
		i=$(((k + r - 1) % n))
		((r % 2 == 0)) && i=$((n - 1 - i))
		echo "${TARGETS[$i]}"
	done
}
for ((r = 1; r <= ROUNDS; r++)); do
	mapfile -t order < <(round_order "$r")
	for c in $BENCH_CASES; do
		for t in "${order[@]}"; do
			skips "$c" "$t" || run_wrk "$r" "$c" "$t"
		done
	done
done
for ((r = 1; r <= RATE_ROUNDS; r++)); do
	mapfile -t order < <(round_order "$r")
	for t in "${order[@]}"; do
		skips rate "$t" || run_rate "$r" "$t"
	done
done
stop_clawgate
stop_floor
stop_kafka

if ((MEMKEY_KEYS > 0)); then
	log "memory store: $MEMKEY_KEYS finished keys with 100-byte bodies"
	line=$(timeout 600 "$BIN/memkey" -keys "$MEMKEY_KEYS" -body 100) || die "memkey failed"
	echo "kind=memkey ${line#MEMKEY }" >>"$RESULTS"
	# The same with each key's history at its default (dedupe.history).
	line=$(timeout 600 "$BIN/memkey" -keys "$MEMKEY_KEYS" -body 100 -history 50) || die "memkey -history failed"
	echo "kind=memkey ${line#MEMKEY }" >>"$RESULTS"
fi

# --- how the cost grows --------------------------------------------------------

SCALE_OUT=$TMP/scale.txt
SCALE_ARG=()
if ((SCALE)); then
	SCALE_ARG=(-scale "$SCALE_OUT")
	log "scaling benchmarks (BenchmarkScale*: body, routes, scheme, keys held, queue depth)"
	(cd "$ROOT" && CLAWGATE_SCALE_KEYS=$SCALE_KEYS CLAWGATE_SCALE_REDIS_KEYS=$SCALE_REDIS_KEYS CLAWGATE_SCALE_DEPTHS=$SCALE_DEPTHS \
		go test -run '^$' -bench '^BenchmarkScale' -benchtime "$SCALE_TIME" -timeout 60m ./proxy/ ./queue/) >"$SCALE_OUT" ||
		die "scaling benchmarks failed: $(tail -n 20 "$SCALE_OUT")"
fi

# --- report ------------------------------------------------------------------

LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
wall=$(awk -v a="$START_TIME" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }')
mem_kib=$(awk '/^MemTotal:/ { print $2 }' /proc/meminfo)
cpu_model=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)
{
	echo "Date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "CPU: ${cpu_model:-unknown} ($(nproc) CPUs online, nproc)"
	echo "Memory: $((mem_kib / 1024)) MiB"
	echo "Kernel: $(uname -sr)"
	echo "Go: $(go version | cut -d' ' -f3-)"
	echo "nginx: $(nginx -v 2>&1 | sed 's/^nginx version: //') ($(dpkg-query -W -f='${binary:Package} ${Version}' nginx-light 2>/dev/null || echo package unknown))"
	has haproxy && echo "haproxy: $(haproxy -v | head -n1 | awk '{print "HAProxy", $3}') ($(dpkg-query -W -f='${binary:Package} ${Version}' haproxy 2>/dev/null || echo package unknown)), nbthread $(nproc), master-worker"
	has caddy && echo "caddy: $(caddy version | awk '{print "Caddy", $1}') ($(dpkg-query -W -f='${binary:Package} ${Version}' caddy 2>/dev/null || echo package unknown))"
	echo "redis: $(redis-server --version | awk '{print $3}' | sed 's/v=/redis-server /')"
	echo "wrk: $(wrk -v 2>&1 | head -n1 | awk '{print $1, $2}')"
	[[ " ${TARGETS[*]} " == *" clawgate-kafka-queue "* ]] &&
		echo "Kafka: kfake (github.com/twmb/franz-go/pkg/kfake $(go list -m -f '{{.Version}}' github.com/twmb/franz-go/pkg/kfake 2>/dev/null || echo '?')): an in-process Go fake of Kafka, 1 broker, memory only, no replication, on loopback"
	echo "clawgate: $(git describe --always --dirty 2>/dev/null || echo unknown) (go build ./cmd/clawgate)"
	echo "Targets: ${TARGETS[*]}"
	echo "Rounds: $ROUNDS"
	echo "Duration: $DURATION s"
	echo "Connections: $CONNECTIONS"
	echo "Threads: $THREADS"
	echo "Deliveries: $BENCH_KEYS"
	echo "Request file: $(($(stat -c %s "$REQ") / 1048576)) MiB for $BENCH_KEYS deliveries"
	if has clawgate-redis-queue-ordered; then
		echo "Ordered objects: $ORDER_OBJECTS"
		echo "Ordered request file: $(($(stat -c %s "$REQ_ORDERED") / 1048576)) MiB for $BENCH_KEYS deliveries over $ORDER_OBJECTS objects (presign -objects $ORDER_OBJECTS)"
	fi
	echo "Fixed rate: $RATE requests/s"
	echo "Fixed-rate duration: $RATE_DURATION s"
	echo "Fixed-rate rounds: $RATE_ROUNDS"
	echo "Queue drain wait: $QUEUE_DRAIN s"
	echo "Access logs: $BENCH_LOGS"
	echo "Niceness: $(ps -o ni= -p $$ | tr -d ' ')"
	echo "Load average (1, 5, 15 min) at start: $LOAD_START"
	echo "Load average at end: $LOAD_END"
	echo "Wall time of the whole run: $((wall / 60)) min $((wall % 60)) s"
} >"$META"

if [[ -n ${BENCH_RESULTS:-} ]]; then
	cp "$RESULTS" "$BENCH_RESULTS"
	cp "$META" "$BENCH_RESULTS.meta"
	[[ -s $SCALE_OUT ]] && cp "$SCALE_OUT" "$BENCH_RESULTS.scale"
fi
rc=0
"$BIN/report" -results "$RESULTS" -meta "$META" "${SCALE_ARG[@]}" ${BENCH_DOC:+-doc "$BENCH_DOC" -analysis "$ROOT/bench/analysis.md"} || rc=$?
log "done in $((wall / 60))m$((wall % 60))s"
exit $rc

#!/usr/bin/env bash
# bench/profile.sh: where clawgate's CPU goes in one case of `make bench`.
#
# Starts the bench upstream, Redis when the store is redis, and clawgate
# with the bench's route (hmac, the key from json:id, dedupe enforce, the
# access log to a file, as bench/run.sh does), loads it with wrk for
# DURATION seconds (bench/wrk/deliveries.lua, CASE unique or dup), takes a
# CPU profile of the middle of the run from the admin listener
# (/debug/pprof/profile) and prints its top entries, flat and cumulative,
# with the req/s and clawgate's CPU per request. The profile is kept in
# OUT (default: a temp file, printed). docs/benchmarks.md ("What bounds the
# speed targets") reads three of these.
#
#   bench/profile.sh                              fasthttp door, memory store, unique
#   SERVER=net/http STORE=redis CASE=unique bench/profile.sh
#   HISTORY=0 ...                                 dedupe.history: 0
#   DELIVERY=queue STORE=redis ...                the delivery queue on Redis
#
# Everything listens on 127.0.0.1 and stops by itself.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/route.sh
. "$ROOT/bench/route.sh"
SERVER=${SERVER:-fasthttp}
STORE=${STORE:-memory}
CASE=${CASE:-unique}
DURATION=${DURATION:-25}
CONNECTIONS=${CONNECTIONS:-64}
HISTORY=${HISTORY:-}
DELIVERY=${DELIVERY:-sync}
TOP=${TOP:-30}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/clawgate-profile.XXXXXX")
OUT=${OUT:-$TMP/cpu.pprof}
PIDS=()
redis=""
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	[[ $OUT == "$TMP"/* ]] && cp "$OUT" "${TMPDIR:-/tmp}/clawgate-profile.pprof" 2>/dev/null || true
	rm -rf "$TMP"
}
trap cleanup EXIT
command -v wrk >/dev/null || { echo "profile.sh: wrk is not installed (make bench-deps)" >&2; exit 1; }

cd "$ROOT"
go build -o "$TMP/clawgate" ./cmd/clawgate
for c in presign upstream freeport; do go build -o "$TMP/$c" "./bench/cmd/$c"; done
export CLAWGATE_BENCH_SECRET=profile-secret-$RANDOM$RANDOM$RANDOM$RANDOM
"$TMP/presign" -n $((DURATION * 40000)) -out "$TMP/req.txt" -path /webhook/bench >/dev/null
mapfile -t ports < <("$TMP/freeport" -n 3)

"$TMP/upstream" -listen 127.0.0.1:0 -addr-file "$TMP/up.addr" >/dev/null 2>&1 &
PIDS+=($!)
for _ in $(seq 50); do [[ -s $TMP/up.addr ]] && break; sleep 0.1; done
UP=$(cat "$TMP/up.addr")

store="backend: memory"
if [[ $STORE == redis ]]; then
	redis-server --port "${ports[2]}" --bind 127.0.0.1 --save "" --appendonly no >"$TMP/redis.log" 2>&1 &
	redis=$!
	PIDS+=("$redis")
	for _ in $(seq 50); do redis-cli -p "${ports[2]}" ping >/dev/null 2>&1 && break; sleep 0.1; done
	store="backend: redis
  redis: { addrs: [\"127.0.0.1:${ports[2]}\"] }"
fi
extra=""
[[ -n $HISTORY ]] && extra+="
dedupe: { history: $HISTORY }"
queue=""
route_delivery=""
if [[ $DELIVERY == queue ]]; then
	queue="queue: { max_depth: 10000000 }"
	route_delivery="
    delivery: queue"
fi
cat >"$TMP/cg.yaml" <<EOF
listen: "127.0.0.1:${ports[0]}"
server: $SERVER
admin: { listen: "127.0.0.1:${ports[1]}" }
store:
  $store$extra
$queue
$(bench_route "$UP" "$route_delivery")
EOF
"$TMP/clawgate" check -config "$TMP/cg.yaml" >/dev/null
"$TMP/clawgate" serve -config "$TMP/cg.yaml" -grace 1s 2>"$TMP/cg.log" &
cg=$!
PIDS+=("$cg")
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:${ports[1]}/healthz" && break; sleep 0.1; done

ticks() { awk '{print $14 + $15}' /proc/"$1"/stat; }
t0=$(ticks "$cg")
[[ -n ${redis:-} ]] && r0=$(ticks "$redis")
wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" -s bench/wrk/deliveries.lua "http://127.0.0.1:${ports[0]}/" -- "$TMP/req.txt" "$CASE" 2 >"$TMP/wrk.out" 2>&1 &
wrkpid=$!
sleep 2
curl -s -o "$OUT" "http://127.0.0.1:${ports[1]}/debug/pprof/profile?seconds=$((DURATION - 5))"
wait "$wrkpid"
t1=$(ticks "$cg")
[[ -n ${redis:-} ]] && r1=$(ticks "$redis")
line=$(grep '^BENCH ' "$TMP/wrk.out" || true)
reqs=$(sed -n 's/.*requests=\([0-9]*\).*/\1/p' <<<"$line")
rps=$(sed -n 's/.*rps=\([0-9.]*\).*/\1/p' <<<"$line")
hz=$(getconf CLK_TCK)
echo "clawgate $SERVER, $STORE store, $DELIVERY, case $CASE${HISTORY:+, history $HISTORY}: ${rps%.*} req/s over ${DURATION}s," \
	"proxy CPU $(awk -v t=$((t1 - t0)) -v hz="$hz" -v n="$reqs" 'BEGIN { printf "%.1f", t / hz * 1e6 / n }') µs per request" \
	${redis:+"(Redis $(awk -v t=$((r1 - r0)) -v hz="$hz" -v n="$reqs" 'BEGIN { printf "%.1f", t / hz * 1e6 / n }') µs)"}
go tool pprof -top -nodecount="$TOP" "$TMP/clawgate" "$OUT" 2>/dev/null | sed -n '1,'"$((TOP + 6))"'p'
echo "--- cumulative"
go tool pprof -top -cum -nodecount="$TOP" "$TMP/clawgate" "$OUT" 2>/dev/null | sed -n '6,'"$((TOP + 6))"'p'
[[ $OUT == "$TMP"/* ]] && echo "profile: ${TMPDIR:-/tmp}/clawgate-profile.pprof (binary: rebuild the same commit)"

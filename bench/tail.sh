#!/usr/bin/env bash
# bench/tail.sh: where the fixed-rate tail comes from on a busy machine.
#
# clawgate (fasthttp front door, memory store, the bench's hmac route) and,
# for comparison, the upstream alone ("direct"), each at RATE deliveries/s
# for 8 s (bench/cmd/rate: open loop, latency from each request's scheduled
# send time), in ROUNDS rounds, each round once per variant:
#
#   default     GC on (gctrace=1 records every cycle's stop-the-world phases)
#   GOGC=off    no garbage collection at all during the run
#
# For each run it prints the latency percentiles, clawgate's CPU time and the
# time its threads spent runnable but waiting for a CPU (the kernel's
# /proc/PID/task/*/schedstat, second field, summed over its threads), the
# number of GC cycles and the longest stop-the-world phase (wall clock). Run
# it while other work loads the machine to see what the tail is made of;
# docs/benchmarks.md ("The tail on a busy machine") has a run and what it
# shows. Everything listens on 127.0.0.1 and stops by itself.
#
#   bench/tail.sh                 ROUNDS=3 RATE=2000 by default
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/route.sh
. "$ROOT/bench/route.sh"
ROUNDS=${ROUNDS:-3}
RATE=${RATE:-2000}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/clawgate-tail.XXXXXX")
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$TMP"
}
trap cleanup EXIT

cd "$ROOT"
go build -o "$TMP/clawgate" ./cmd/clawgate
for c in presign rate upstream freeport; do go build -o "$TMP/$c" "./bench/cmd/$c"; done
export CLAWGATE_BENCH_SECRET=tail-secret-$RANDOM$RANDOM$RANDOM$RANDOM
"$TMP/presign" -n 60000 -out "$TMP/req.txt" -path /webhook/bench >/dev/null
mapfile -t ports < <("$TMP/freeport" -n 2)

"$TMP/upstream" -listen 127.0.0.1:0 -addr-file "$TMP/up.addr" &
PIDS+=($!)
for _ in $(seq 50); do [[ -s $TMP/up.addr ]] && break; sleep 0.1; done
UP=$(cat "$TMP/up.addr")
cat >"$TMP/cg.yaml" <<EOF
listen: "127.0.0.1:${ports[0]}"
server: fasthttp
admin: { listen: "127.0.0.1:${ports[1]}" }
store: { backend: memory }
$(bench_route "$UP")
EOF

# schedstat PID: "CPU-ns WAIT-ns" summed over the process's threads.
schedstat() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{r += $1; w += $2} END {printf "%.0f %.0f", r, w}'; }
pct() { grep -o 'p50_us=[0-9]* p90_us=[0-9]* p99_us=[0-9]* p999_us=[0-9]*' <<<"$1"; }

offset=0
for ((r = 1; r <= ROUNDS; r++)); do
	for variant in default GOGC=off; do
		envs=(GODEBUG=gctrace=1)
		[[ $variant == GOGC=off ]] && envs+=(GOGC=off)
		env "${envs[@]}" "$TMP/clawgate" serve -config "$TMP/cg.yaml" -grace 1s 2>"$TMP/cg.log" &
		cg=$!
		for _ in $(seq 100); do "$TMP/rate" -url "http://127.0.0.1:${ports[0]}" -requests "$TMP/req.txt" -once -index 59999 >/dev/null 2>&1 && break; sleep 0.1; done
		load=$(cut -d' ' -f1 /proc/loadavg)
		s0=$(schedstat "$cg")
		out=$("$TMP/rate" -url "http://127.0.0.1:${ports[0]}" -requests "$TMP/req.txt" -rate "$RATE" -duration 8s -warmup 1s -conns 64 -offset "$offset")
		s1=$(schedstat "$cg")
		kill "$cg"
		wait "$cg" 2>/dev/null || true
		direct=$("$TMP/rate" -url "http://$UP" -requests "$TMP/req.txt" -rate "$RATE" -duration 8s -warmup 1s -conns 64 -offset "$offset")
		offset=$(((offset + 17000) % 40000))
		gcs=$(grep -c '^gc ' "$TMP/cg.log" || true)
		stw=$(grep '^gc ' "$TMP/cg.log" | awk '{split($5, a, "+"); s = a[1] + a[3]; if (s > m) m = s} END {printf "%.1f", m}' || true)
		printf 'round %d %-8s load %s | clawgate %s | direct %s | cpu %d ms, waiting for a CPU %d ms | gc cycles %s, longest stop %s ms\n' \
			"$r" "$variant" "$load" "$(pct "$out")" "$(pct "$direct" | cut -d' ' -f3-)" \
			$(((${s1% *} - ${s0% *}) / 1000000)) $(((${s1#* } - ${s0#* }) / 1000000)) "$gcs" "$stw"
	done
done

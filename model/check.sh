#!/usr/bin/env bash
# model/check.sh: check the key protocol model (keyprotocol.pml) and the
# queue model (queue.pml) with SPIN, exhaustively, in every configuration;
# see model/README.md.
#
# Each configuration either must hold (errors: 0 and a complete search) or
# must show one named violation (a run that shows the model can find what a
# passing run claims is absent). One line per configuration; exit status 1
# when any configuration does not do what it must.
#
# Installs spin and a C compiler with apt-get when either is missing (root
# on Debian). MODEL_JOBS (default 2) runs that many checks at a time;
# MODEL_ONLY, a grep -E pattern, runs only the configurations it matches
# (MODEL_ONLY=^q- the queue model's safety runs).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
jobs=${MODEL_JOBS:-2}

if ! command -v spin >/dev/null 2>&1 || ! command -v cc >/dev/null 2>&1; then
	if [ "$(id -u)" != 0 ]; then
		echo "model/check.sh: spin or cc missing, and not root to install them" >&2
		exit 1
	fi
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq spin gcc >/dev/null
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# name | expect | spin -D flags | extra cc flags | pan flags [| model]
#   model: keyprotocol.pml when absent, else MODEL.pml (queue, order)
#   expect: holds, or the property whose violation the run must find:
#   keyprotocol.pml: P1 (forwarded once), P3 (liveness), P4a (reset:
#   window), P4b (reset: store); queue.pml: Q1 (one place), Q2 (delivered
#   once), Q3 (finished means delivered), Q4 (no key stuck), Q5 (a reset
#   cancels), Q6 (one event per key); order.pml: O1 (one at a time), O2
#   (in order), O3 (none stuck)
safety="-DSAFETY -DCOLLAPSE"
live="-DCOLLAPSE -DNFAIR=8"
# must-fail queue runs stop at their first violation: compile them fast
quick="-DSAFETY -DCOLLAPSE -O0"
q="-DN=2 -DCOPIES=2 -DCRASHES=1 -DSTALLS=1"
# begin's owner check also stops what the token mutations break; they run
# without it (and with the stall excuse those checks had) to show that the
# token fence alone stops it
tokenonly="-DBEGIN_NOT_OWNED -DWIDE_STALL"
configs=(
	"two-instances|holds|-DN=2 -DCOPIES=5 -DCRASHES=2|$safety|"
	"three-instances|holds|-DN=3 -DCOPIES=5 -DCRASHES=1|$safety|"
	"data-loss|holds|-DN=2 -DLOSS -DCOPIES=5 -DCRASHES=1|$safety|"
	"reset-generation|holds|-DN=2 -DRESET -DGENRULE -DTOMB_ALWAYS -DCOPIES=4 -DCRASHES=1|$safety|"
	"live-two-instances|holds|-DLIVE -DN=2 -DCOPIES=5 -DCRASHES=2|$live|-a -f"
	"live-three-instances|holds|-DLIVE -DN=3 -DCOPIES=4 -DCRASHES=1|$live|-a -f"
	"live-data-loss|holds|-DLIVE -DN=2 -DLOSS -DCOPIES=4 -DCRASHES=1|$live|-a -f"
	"live-reset|holds|-DLIVE -DN=2 -DRESET -DGENRULE -DTOMB_ALWAYS -DCOPIES=3 -DCRASHES=1|$live|-a -f"
	"reset-no-generation|P4a|-DN=2 -DRESET -DTOMB_ALWAYS -DCOPIES=4 -DCRASHES=1|$safety|"
	"reset-tombstone-lock-only|P4b|-DN=2 -DRESET -DGENRULE -DCOPIES=4 -DCRASHES=1|$safety|"
	"data-loss-old-finish|P1|-DN=2 -DLOSS -DNO_REFINISH -DCOPIES=4 -DCRASHES=1|$safety|"
	"no-kill-excuse|P1|-DN=2 -DSTRICT_KILL -DCOPIES=4 -DCRASHES=1|$safety|"
	"no-gaveup-excuse|P1|-DN=2 -DSTRICT_GAVEUP -DCOPIES=4 -DCRASHES=1|$safety|"
	"no-ghost-excuse|P1|-DN=2 -DSTRICT_GHOST -DCOPIES=4 -DCRASHES=1|$safety|"
	"no-loss-excuse|P1|-DN=2 -DLOSS -DSTRICT_LOSS -DCOPIES=4 -DCRASHES=1|$safety|"
	"live-no-ttl|P3|-DLIVE -DN=2 -DNO_TTL -DCOPIES=4 -DCRASHES=1|$live|-a -f"
	"q-workers|holds|-DN=2 -DCOPIES=3 -DCRASHES=2 -DSTALLS=2 -DSHUTDOWNS=1|$safety||queue"
	"q-three-instances|holds|-DN=3 -DCOPIES=2 -DCRASHES=1 -DSTALLS=1 -DSHUTDOWNS=1|$safety||queue"
	"q-operator|holds|$q -DRESETS=1 -DREPLAYS=1 -DPURGES=1|$safety||queue"
	"q-switch-unified|holds|$q -DCOPIES=3 -DSWITCH -DUNIFIED|$safety||queue"
	"q-token-fence-only|holds|$q $tokenonly -DREPLAYS=1|$safety||queue"
	"q-rolling-switch|holds|$q -DCOPIES=3 -DROLLING|$safety||queue"
	"q-rolling-switch-inscript|holds|$q -DCOPIES=3 -DROLLING -DINSCRIPT|$safety||queue"
	"live-q-rolling-switch|holds|-DLIVE $q -DROLLING|$live|-a -f|queue"
	"q-rolling-peek-only|Q2|$q -DCOPIES=3 -DROLLING -DPEEK_ONLY|$quick||queue"
	"live-q-workers|holds|-DLIVE $q -DSHUTDOWNS=1|$live|-a -f|queue"
	"live-q-operator|holds|-DLIVE $q -DSTALLS=0 -DRESETS=1 -DREPLAYS=1 -DPURGES=1|$live|-a -f|queue"
	"live-q-switch-unified|holds|-DLIVE $q -DSWITCH -DUNIFIED|$live|-a -f|queue"
	"q-enqueue-ack-first|Q1|$q -DENQ_ACK_FIRST|$quick||queue"
	"q-begin-no-token|Q2|$q $tokenonly -DBEGIN_NO_TOKEN|$quick||queue"
	"q-settle-no-owner|Q2|$q -DSETTLE_NO_OWNER|$quick||queue"
	"q-settle-no-token|Q3|$q -DRESETS=1 -DSETTLE_NO_TOKEN|$quick||queue"
	"q-retry-same-token|Q2|$q $tokenonly -DRETRY_SAME_TOKEN|$quick||queue"
	"q-reclaim-anytime|Q2|$q -DRECLAIM_ANYTIME|$quick||queue"
	"q-handback-drops|Q1|$q -DSHUTDOWNS=1 -DHANDBACK_DROPS|$quick||queue"
	"live-q-dead-never|Q4|-DLIVE $q -DDEAD_NEVER|$live|-a -f|queue"
	"q-replay-old-token|Q2|$q $tokenonly -DREPLAYS=1 -DREPLAY_OLD_TOKEN|$quick||queue"
	"q-purge-forgets|Q1|$q -DPURGES=1 -DPURGE_FORGETS|$quick||queue"
	"q-reset-live|Q5|$q -DRESETS=1 -DRESET_LIVE|$quick||queue"
	"q-switch-as-built|Q2|$q -DCOPIES=3 -DSWITCH|$quick||queue"
	"live-q-switch-as-built|Q4|-DLIVE $q -DSWITCH|$live|-a -f -A|queue"
	"q-no-stall-excuse|Q2|$q -DSTRICT_STALL|$quick||queue"
	"q-no-kill-excuse|Q2|$q -DSTRICT_KILL|$quick||queue"
	"q-no-ghost-excuse|Q2|$q -DSTRICT_GHOST|$quick||queue"
	"q-begin-not-owned|Q2|$q -DBEGIN_NOT_OWNED|$quick||queue"
	"o-two-instances|holds|-DN=2 -DK=3|$safety||order"
	"o-split-handback|holds|-DSPLIT_HANDBACK|$safety||order"
	"o-hold|holds|-DHOLD|$safety||order"
	"live-o-two-instances|holds|-DLIVE|$live|-a -f|order"
	"live-o-split-handback|holds|-DLIVE -DSPLIT_HANDBACK|$live|-a -f|order"
	"live-o-hold|holds|-DLIVE -DHOLD|$live|-a -f|order"
	"o-no-gate|O1|-DNO_GATE|$quick||order"
	"o-advance-on-retry|O2|-DADVANCE_ON_RETRY|$quick||order"
	"o-no-stall-excuse|O1|-DSTRICT_STALL|$quick||order"
	"live-o-no-handback|O3|-DLIVE -DNO_HANDBACK|$live|-a -f|order"
	"live-o-no-sweep|O3|-DLIVE -DSPLIT_HANDBACK -DNO_SWEEP|$live|-a -f|order"
)

# run NAME SPINFLAGS CCFLAGS PANFLAGS MODEL: generate, compile and run one
# verifier in its own directory; leaves pan.out, rc and secs there.
run() {
	local d=$tmp/$1 t0 rc=0
	mkdir -p "$d"
	cp "$here/$5.pml" "$d/"
	cd "$d"
	t0=$(date +%s.%N)
	# shellcheck disable=SC2086 # the flag lists are meant to split
	{ spin $2 -a "$5.pml" >spin.out 2>&1 &&
		cc -w -O1 $3 -o pan pan.c >cc.out 2>&1 &&
		./pan -m20000 $4 >pan.out 2>&1; } || rc=$?
	echo "$rc" >rc
	echo "$(date +%s.%N) $t0" | awk '{printf "%.1f", $1 - $2}' >secs
}

# MODEL_ONLY (a grep -E pattern) keeps the configurations it matches.
if [ -n "${MODEL_ONLY:-}" ]; then
	keep=()
	for c in "${configs[@]}"; do
		if grep -Eq -- "$MODEL_ONLY" <<<"${c%%|*}"; then keep+=("$c"); fi
	done
	configs=("${keep[@]}")
fi

for c in "${configs[@]}"; do
	IFS='|' read -r name expect sflags cflags pflags m <<<"$c"
	while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
	run "$name" "$sflags" "$cflags" "$pflags" "${m:-keyprotocol}" &
done
wait

# violated NAME: which property the run found violated ("" if none).
violated() {
	local out=$tmp/$1/pan.out
	if grep -q 'acceptance cycle' "$out"; then
		if [ -e "$tmp/$1/queue.pml" ]; then echo Q4; elif [ -e "$tmp/$1/order.pml" ]; then echo O3; else echo P3; fi
	elif grep -q 'assertion violated (*[QO][1-6]_==0' "$out"; then
		sed -n 's/.*assertion violated (*\([QO][1-6]\)_==0.*/\1/p' "$out" | head -1
	elif grep -q 'assertion violated.*acct\[' "$out"; then echo P1
	elif grep -q 'assertion violated (acc_any)' "$out"; then echo P2
	elif grep -q 'assertion violated.*win\[j\]>gen\[j\]' "$out"; then echo P4a
	elif grep -q 'assertion violated (rec_ep==ep)' "$out"; then echo P4b
	elif grep -q 'errors: [1-9]' "$out"; then echo other
	fi
}

status=0
total=0
printf '%-26s %-30s %12s %12s %12s %6s %7s\n' configuration result stored matched transitions depth time
for c in "${configs[@]}"; do
	IFS='|' read -r name expect _ <<<"$c"
	d=$tmp/$name
	out=$d/pan.out
	rc=$(cat "$d/rc")
	secs=$(cat "$d/secs")
	total=$(awk -v a="$total" -v b="$secs" 'BEGIN { printf "%.1f", a + b }')
	stored=$(awk '/states, stored/ { print $1; exit }' "$out" 2>/dev/null || true)
	matched=$(awk '/states, matched/ { print $1; exit }' "$out" 2>/dev/null || true)
	trans=$(awk '/transitions \(=/ { print $1; exit }' "$out" 2>/dev/null || true)
	depth=$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' "$out" 2>/dev/null | head -1 || true)
	v=$(violated "$name")
	if [ ! -s "$out" ] || ! grep -q 'errors:' "$out"; then
		result="FAILED: no verdict (rc $rc)"
	elif grep -q 'max search depth too small' "$out"; then
		result="FAILED: depth limit hit"
	elif [ "$expect" = holds ]; then
		if [ "$rc" = 0 ] && grep -q 'errors: 0' "$out" && ! grep -q 'Search not completed' "$out"; then
			result="holds"
		else
			result="FAILED: violates ${v:-?}"
		fi
	elif [ "$v" = "$expect" ]; then
		result="violates $expect, as it must"
	else
		result="FAILED: expected $expect, got ${v:-none}"
	fi
	printf '%-26s %-30s %12s %12s %12s %6s %6ss\n' "$name" "$result" "${stored:--}" "${matched:--}" "${trans:--}" "${depth:--}" "$secs"
	case $result in
	FAILED*)
		status=1
		echo "---- $name: spin, cc and pan output" >&2
		cat "$d/spin.out" "$d/cc.out" >&2 2>/dev/null || true
		grep -v '^\s*$' "$out" >&2 2>/dev/null || true
		;;
	esac
done
echo "model: ${#configs[@]} configurations, ${total}s of checking"
exit "$status"

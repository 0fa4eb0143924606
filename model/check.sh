#!/usr/bin/env bash
# model/check.sh: check the key protocol model (keyprotocol.pml) with SPIN,
# exhaustively, in every configuration; see model/README.md.
#
# Each configuration either must hold (errors: 0 and a complete search) or
# must show one named violation (a run that shows the model can find what a
# passing run claims is absent). One line per configuration; exit status 1
# when any configuration does not do what it must.
#
# Installs spin and a C compiler with apt-get when either is missing (root
# on Debian). MODEL_JOBS (default 2) runs that many checks at a time.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
model=$here/keyprotocol.pml
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

# name | expect | spin -D flags | extra cc -D flags | pan flags
#   expect: holds, or the property whose violation the run must find:
#   P1 (forwarded once), P3 (liveness), P4a (reset: window), P4b (reset: store)
safety="-DSAFETY -DCOLLAPSE"
live="-DCOLLAPSE -DNFAIR=8"
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
)

# run NAME SPINFLAGS CCFLAGS PANFLAGS: generate, compile and run one verifier
# in its own directory; leaves pan.out, rc and secs there.
run() {
	local d=$tmp/$1 t0 rc=0
	mkdir -p "$d"
	cp "$model" "$d/"
	cd "$d"
	t0=$(date +%s.%N)
	# shellcheck disable=SC2086 # the flag lists are meant to split
	{ spin $2 -a keyprotocol.pml >spin.out 2>&1 &&
		cc -w -O1 $3 -o pan pan.c >cc.out 2>&1 &&
		./pan -m20000 $4 >pan.out 2>&1; } || rc=$?
	echo "$rc" >rc
	echo "$(date +%s.%N) $t0" | awk '{printf "%.1f", $1 - $2}' >secs
}

for c in "${configs[@]}"; do
	IFS='|' read -r name expect sflags cflags pflags <<<"$c"
	while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
	run "$name" "$sflags" "$cflags" "$pflags" &
done
wait

# violated NAME: which property the run found violated ("" if none).
violated() {
	local out=$tmp/$1/pan.out
	if grep -q 'acceptance cycle' "$out"; then echo P3
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

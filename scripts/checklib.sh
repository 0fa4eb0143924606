# Shared by scripts/check-*.sh: ok/FAIL/skip lines, counters and run.
# Source it after `cd` to the repository root; it sets passed, failed,
# skipped and tmp (removed on exit).

passed=0
failed=0
skipped=()
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ok()   { passed=$((passed + 1)); echo "ok:   $*"; }
bad()  { failed=$((failed + 1)); echo "FAIL: $*"; }
skip() { skipped+=("$*"); echo "skip: $*"; }

# run DESCRIPTION CMD...: runs CMD, prints its output on failure (or VERBOSE).
run() {
	local desc=$1 out
	shift
	if out=$("$@" 2>&1); then
		ok "$desc"
		[ -n "${VERBOSE:-}" ] && [ -n "$out" ] && echo "$out" | sed 's/^/      /'
	else
		bad "$desc"
		echo "$out" | sed 's/^/      /'
	fi
	return 0
}

# summary NAME: the skipped checks, then "NAME: N passed, N failed, N
# skipped"; returns non-zero when a check failed (the script's last line).
summary() {
	echo
	if [ ${#skipped[@]} -gt 0 ]; then
		echo "skipped:"
		printf '  - %s\n' "${skipped[@]}"
	fi
	echo "$1: $passed passed, $failed failed, ${#skipped[@]} skipped"
	[ "$failed" -eq 0 ]
}

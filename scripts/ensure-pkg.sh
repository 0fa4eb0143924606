#!/bin/sh
# ensure-pkg.sh CMD DEBIAN_PKG [CMD DEBIAN_PKG ...]
#
# Makes sure every CMD is on PATH. A missing one is installed from its
# Debian package with apt-get when running as root on a system that has it
# (apt-get update runs once, and only if something is missing); otherwise
# the script names what to install and exits 1. Silent when all are there.
set -eu

usage() {
	echo "usage: $0 CMD DEBIAN_PKG [CMD DEBIAN_PKG ...]" >&2
	exit 2
}

[ $# -ge 2 ] || usage
[ $(($# % 2)) -eq 0 ] || usage

missing_cmds=""
missing_pkgs=""
while [ $# -gt 0 ]; do
	cmd=$1
	pkg=$2
	shift 2
	if ! command -v "$cmd" >/dev/null 2>&1; then
		missing_cmds="$missing_cmds $cmd"
		case " $missing_pkgs " in
		*" $pkg "*) ;;
		*) missing_pkgs="$missing_pkgs $pkg" ;;
		esac
	fi
done

[ -n "$missing_cmds" ] || exit 0

if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
	echo "ensure-pkg: installing$missing_pkgs (missing:$missing_cmds)" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# shellcheck disable=SC2086 # one word per package
	apt-get install -y -qq $missing_pkgs >/dev/null
	still=""
	for cmd in $missing_cmds; do
		command -v "$cmd" >/dev/null 2>&1 || still="$still $cmd"
	done
	if [ -n "$still" ]; then
		echo "ensure-pkg: installed$missing_pkgs but still missing:$still" >&2
		exit 1
	fi
	exit 0
fi

echo "ensure-pkg: missing:$missing_cmds; install the Debian/Ubuntu packages$missing_pkgs" >&2
echo "  (as root: apt-get update && apt-get install -y$missing_pkgs)" >&2
exit 1

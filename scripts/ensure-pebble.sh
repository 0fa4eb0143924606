#!/bin/sh
# ensure-pebble.sh: makes sure Pebble, Let's Encrypt's ACME test server,
# and its DNS test server are installed for the tls.acme tests (server's
# TestACMEPebble). A missing one is installed from the Go module proxy with
# `go install` into $(go env GOPATH)/bin, where the tests look for them
# besides PATH. Silent when both are there.
set -eu

PEBBLE_VERSION=${PEBBLE_VERSION:-v2.10.3}
GO=${GO:-go}
bin=$($GO env GOBIN)
[ -n "$bin" ] || bin=$($GO env GOPATH)/bin

for cmd in pebble pebble-challtestsrv; do
	if command -v "$cmd" >/dev/null 2>&1 || [ -x "$bin/$cmd" ]; then
		continue
	fi
	echo "ensure-pebble: installing $cmd $PEBBLE_VERSION into $bin"
	$GO install "github.com/letsencrypt/pebble/v2/cmd/$cmd@$PEBBLE_VERSION"
done

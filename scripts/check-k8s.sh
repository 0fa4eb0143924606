#!/usr/bin/env bash
# scripts/check-k8s.sh: checks the Helm chart (deploy/helm/clawgate) and the
# systemd unit (deploy/systemd/clawgate.service) without a cluster or a
# running systemd. Exits non-zero if any check fails; prints what it skipped
# and why.
#
#   helm: the one on PATH, else $(go env GOPATH)/bin/helm, else installed
#     there once with `go install helm.sh/helm/v3/cmd/helm@v3.22.0` (a build
#     of a minute or two; reused afterwards). HELM=/path/to/helm overrides.
#   helm lint (default values, and --strict with the admin token Secret set)
#   helm template in several variants, the objects checked by
#     deploy/helm/chartcheck: kinds, probes, security context, config
#     checksum, Secret references, the ServiceMonitor's job (the rules'),
#     the PrometheusRule and dashboard ConfigMap against deploy/rules and
#     deploy/grafana, the HPA, and `clawgate check` of the rendered
#     gateway.yaml with the Deployment's environment (Secrets faked)
#   deploy/systemd/clawgate.service: its keys (grep, always), Type=notify
#     with the server's READY=1, TimeoutStopSec
#     above serve's default -grace, `systemd-analyze verify` and the
#     `systemd-analyze security` exposure (where systemd-analyze exists)
#
# Environment: VERBOSE=1 prints the output of passing commands too.
set -uo pipefail

cd "$(dirname "$0")/.." || exit 1

HELM_MODULE=helm.sh/helm/v3
HELM_VERSION=v3.22.0
chart=deploy/helm/clawgate
unit=deploy/systemd/clawgate.service

# shellcheck source=scripts/checklib.sh
. scripts/checklib.sh

have_go=
command -v go >/dev/null 2>&1 && have_go=1

# --- clawgate, for `clawgate check`, the exec probes and systemd-analyze ---------
clawgate=
if [ -n "$have_go" ]; then
	if out=$(CGO_ENABLED=0 go build -trimpath -o "$tmp/clawgate" ./cmd/clawgate 2>&1); then
		clawgate=$tmp/clawgate
	else
		# The Go tests report a build failure; the checks that need the
		# binary are skipped.
		skip "the checks that run clawgate: ./cmd/clawgate does not build: $(echo "$out" | grep -vE "^(#|go: downloading)" | head -n1)"
	fi
fi

# --- helm ------------------------------------------------------------------------
helm_ok() { # PATH: a Helm 3 binary?
	[ -x "$1" ] && "$1" version --template '{{.Version}}' 2>/dev/null | grep -q '^v3\.'
}

helm=${HELM:-}
if [ -z "$helm" ]; then
	if command -v helm >/dev/null 2>&1 && helm_ok "$(command -v helm)"; then
		helm=$(command -v helm)
	elif [ -n "$have_go" ] && helm_ok "$(go env GOPATH)/bin/helm"; then
		helm=$(go env GOPATH)/bin/helm
	elif [ -n "$have_go" ]; then
		gobin=$(go env GOPATH)/bin
		echo "helm not found: go install $HELM_MODULE/cmd/helm@$HELM_VERSION into $gobin (a build of a minute or two, once)"
		if ! out=$(go list -m "$HELM_MODULE@$HELM_VERSION" 2>&1); then
			bad "helm: module $HELM_MODULE@$HELM_VERSION is not reachable (GOPROXY=$(go env GOPROXY)): $(echo "$out" | tail -n1)"
		else
			start=$SECONDS
			if out=$(GOBIN=$gobin go install "$HELM_MODULE/cmd/helm@$HELM_VERSION" 2>&1); then
				helm=$gobin/helm
				echo "installed $helm in $((SECONDS - start))s"
			else
				bad "go install $HELM_MODULE/cmd/helm@$HELM_VERSION"
				echo "$out" | tail -n 20 | sed 's/^/      /'
			fi
		fi
	else
		bad "helm not found and no go to install it with (or set HELM=/path/to/helm)"
	fi
fi
if [ -n "$helm" ] && ! helm_ok "$helm"; then
	bad "$helm is not a Helm 3 binary: $("$helm" version 2>&1 | head -n1)"
	helm=
fi

if [ -n "$helm" ]; then
	echo "using $helm $("$helm" version --template '{{.Version}}' 2>/dev/null)"
	run "helm lint $chart" "$helm" lint "$chart"
	run "helm lint --strict $chart (adminToken.existingSecret set)" \
		"$helm" lint --strict "$chart" --set adminToken.existingSecret=clawgate-secrets
	if [ -n "$have_go" ] && go build -o "$tmp/chartcheck" ./deploy/helm/chartcheck 2>"$tmp/chartcheck.err"; then
		"$tmp/chartcheck" -helm "$helm" -chart "$chart" -clawgate "$clawgate" >"$tmp/chartcheck.out" 2>&1
		rc=$?
		# Its ok/FAIL/skip lines are this script's.
		while IFS= read -r line; do
			case $line in
			"ok:   "*) ok "${line#ok:   }" ;;
			"FAIL: "*) bad "${line#FAIL: }" ;;
			"skip: "*) skip "${line#skip: }" ;;
			"chartcheck: "*) ;;
			*) echo "$line" ;;
			esac
		done <"$tmp/chartcheck.out"
		if [ "$rc" -ne 0 ] && ! grep -q '^FAIL: ' "$tmp/chartcheck.out"; then
			bad "deploy/helm/chartcheck exited $rc"
		fi
	else
		bad "go build ./deploy/helm/chartcheck: $(head -n 5 "$tmp/chartcheck.err" 2>/dev/null)"
	fi
else
	skip "helm lint and the rendered chart checks (no helm; see the FAIL above)"
fi

# --- systemd unit ----------------------------------------------------------------
if [ ! -f "$unit" ]; then
	bad "$unit is missing"
else
	# Each line must appear as it is (a regular expression, whole line).
	missing=""
	while IFS= read -r want; do
		grep -qE "^${want}\$" "$unit" || missing="$missing
      $want"
	done <<'EOF'
Type=notify
ExecStart=/usr/local/bin/clawgate serve -config /etc/clawgate/gateway\.yaml
ExecReload=/bin/kill -HUP \$MAINPID
Restart=on-failure
(DynamicUser=yes|User=clawgate)
EnvironmentFile=-/etc/clawgate/env
ProtectSystem=strict
ProtectHome=yes
PrivateTmp=yes
PrivateDevices=yes
NoNewPrivileges=yes
CapabilityBoundingSet=CAP_NET_BIND_SERVICE
AmbientCapabilities=CAP_NET_BIND_SERVICE
RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX
SystemCallFilter=@system-service
SystemCallArchitectures=native
LockPersonality=yes
MemoryDenyWriteExecute=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
RestrictNamespaces=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
LimitNOFILE=[0-9]+
WantedBy=multi-user\.target
EOF
	if [ -z "$missing" ]; then
		ok "$unit: ExecStart, ExecReload (SIGHUP), Restart, DynamicUser, EnvironmentFile and the hardening keys"
	else
		bad "$unit lacks these lines:$missing"
	fi
	# Type=notify needs serve to send READY=1 (server/sdnotify.go), or
	# systemd kills it at TimeoutStartSec.
	if grep -q 'notify("READY=1")' server/server.go; then
		ok "$unit: Type=notify, and the server sends READY=1 (server/server.go)"
	else
		bad "$unit: Type=notify, but server/server.go no longer sends READY=1 (systemd would kill clawgate at TimeoutStartSec)"
	fi
	if grep -qE '^(User=root|CapabilityBoundingSet=.*CAP_SYS_ADMIN|PrivateNetwork=yes)' "$unit"; then
		bad "$unit: runs as root, with CAP_SYS_ADMIN, or without the network"
	fi

	# TimeoutStopSec above serve's default -grace (read from serve.go).
	grace=$(sed -nE 's/.*fs\.Duration\("grace", ([0-9]+)\*time\.Second.*/\1/p' cmd/clawgate/serve.go | head -n1)
	stop=$(sed -nE 's/^TimeoutStopSec=([0-9]+)s?$/\1/p' "$unit")
	if [ -z "$grace" ]; then
		skip "TimeoutStopSec against serve's default -grace (not found in cmd/clawgate/serve.go)"
	elif [ -n "$stop" ] && [ "$stop" -gt "$grace" ]; then
		ok "$unit: TimeoutStopSec=${stop}s is above serve's default -grace ${grace}s"
	else
		bad "$unit: TimeoutStopSec '${stop:-unset}' must be whole seconds above serve's default -grace (${grace}s)"
	fi

	if command -v systemd-analyze >/dev/null 2>&1; then
		sdv=$(systemd-analyze --version 2>/dev/null | head -n1)
		# verify wants the ExecStart binary to exist: a copy of the unit
		# pointing at the one built above.
		bin=$clawgate
		[ -n "$bin" ] || bin=$(command -v true)
		sed "s|/usr/local/bin/clawgate|$bin|g" "$unit" >"$tmp/clawgate.service"
		run "systemd-analyze verify $unit ($sdv)" systemd-analyze verify "$tmp/clawgate.service"
		if out=$(systemd-analyze security --offline=true "$tmp/clawgate.service" 2>&1); then
			level=$(echo "$out" | sed -nE 's/.*Overall exposure level for [^:]*: ([0-9.]+).*/\1/p')
			if [ -n "$level" ] && awk -v l="$level" 'BEGIN { exit !(l <= 2.5) }'; then
				ok "systemd-analyze security $unit: exposure $level (at most 2.5)"
			else
				bad "systemd-analyze security $unit: exposure '${level:-?}', want at most 2.5"
				echo "$out" | grep '✗' | sed 's/^/      /'
			fi
		else
			skip "systemd-analyze security --offline ($sdv does not support it: $(echo "$out" | tail -n1))"
		fi
	else
		skip "systemd-analyze verify and security (systemd-analyze not installed, e.g. in a container; Debian package systemd)"
	fi
fi

summary check-k8s

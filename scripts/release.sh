#!/usr/bin/env bash
# scripts/release.sh VERSION: the release archives, reproducibly.
#
#   make release VERSION=v0.2.0        (or scripts/release.sh v0.2.0)
#
# Writes, for each of linux, darwin and windows on amd64 and arm64,
#   dist/clawgate_X.Y.Z_OS_ARCH.tar.gz   (.zip for windows)
# holding clawgate_X.Y.Z_OS_ARCH/{clawgate[.exe],LICENSE,README.md}, and
# dist/SHA256SUMS (sha256sum's format: `sha256sum -c SHA256SUMS` checks it).
#
# Before building it checks that the version is released everywhere it is
# named: CHANGELOG.md has a "## [X.Y.Z]" section and the Helm chart's
# appVersion (the image tag it deploys) is X.Y.Z. Fix those and commit.
#
# Reproducible: the same commit, Go version and VERSION give the same bytes.
# The binaries are static (CGO_ENABLED=0), built with -trimpath and
# -buildvcs=false, stamped with -X main.version=X.Y.Z -X main.commit=COMMIT;
# archive entries are sorted, owned by 0:0, with fixed modes and mtime
# SOURCE_DATE_EPOCH (default: the commit's time), gzip without name or time
# (-n), zip without extra attributes (-X). scripts/check-deploy.sh builds
# one target twice and compares.
#
# Environment:
#   DIST=dir                 output directory (default dist; emptied first)
#   RELEASE_TARGETS="linux/amd64 ..."   build only these (default: all six)
#   SOURCE_DATE_EPOCH=secs   the archive mtime (default: the commit's time)
set -euo pipefail

cd "$(dirname "$0")/.."

die() {
	echo "release: $*" >&2
	exit 1
}

[ $# -eq 1 ] || die "usage: scripts/release.sh vX.Y.Z (make release VERSION=vX.Y.Z)"
tag=$1
[[ $tag =~ ^v?([0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?)$ ]] ||
	die "VERSION '$tag' is not vX.Y.Z (or vX.Y.Z-pre): make release VERSION=v0.1.0"
version=${BASH_REMATCH[1]}

# --- the version is the one everything else names ----------------------------
chart=deploy/helm/clawgate/Chart.yaml
app_version=$(sed -nE 's/^appVersion: *"?([^"]*)"? *$/\1/p' "$chart")
[ "$app_version" = "$version" ] ||
	die "$chart appVersion is '$app_version', not $version: set appVersion: \"$version\" (the image tag the chart deploys) and commit"
grep -qE "^## \[$(sed 's/\./\\./g' <<<"$version")\]" CHANGELOG.md ||
	die "CHANGELOG.md has no '## [$version] - DATE' section: move the Unreleased entries under it and commit"

# --- inputs ---------------------------------------------------------------------
command -v go >/dev/null || die "go not found"
for tool in tar gzip zip sha256sum; do
	command -v "$tool" >/dev/null || die "$tool not found (Debian package $tool, or coreutils for sha256sum)"
done
tar --version 2>/dev/null | grep -q 'GNU tar' || die "GNU tar needed (--sort, --mtime, --owner)"

commit=$(git rev-parse HEAD 2>/dev/null) || die "not a git checkout: the commit is part of the version stamp"
if ! git diff --quiet HEAD -- 2>/dev/null; then
	echo "release: warning: uncommitted changes; the commit is stamped $commit-dirty" >&2
	commit=$commit-dirty
fi
: "${SOURCE_DATE_EPOCH:=$(git log -1 --format=%ct HEAD)}"
export SOURCE_DATE_EPOCH

targets=${RELEASE_TARGETS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64}
dist=${DIST:-dist}
rm -rf "$dist"
mkdir -p "$dist"
dist=$(cd "$dist" && pwd)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The environment must not change the output: a fixed umask and time zone
# (zip stores local time), no cgo, the baseline instruction sets.
umask 022
export TZ=UTC LC_ALL=C CGO_ENABLED=0 GOAMD64=v1 GOARM64=v8.0 GOFLAGS=-mod=readonly

echo "release: clawgate $version (commit $commit, $(go env GOVERSION), SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH)"
for target in $targets; do
	goos=${target%/*} goarch=${target#*/}
	name=clawgate_${version}_${goos}_${goarch}
	exe=clawgate
	[ "$goos" = windows ] && exe=clawgate.exe
	stage=$work/$name
	mkdir -p "$stage"
	GOOS=$goos GOARCH=$goarch go build -trimpath -buildvcs=false \
		-ldflags "-s -w -X main.version=$version -X main.commit=$commit" \
		-o "$stage/$exe" ./cmd/clawgate
	cp LICENSE README.md "$stage/"
	chmod 0755 "$stage" "$stage/$exe"
	chmod 0644 "$stage/LICENSE" "$stage/README.md"
	find "$stage" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
	if [ "$goos" = windows ]; then
		archive=$name.zip
		# Sorted names; -X: no uid/gid or extended-time fields.
		(cd "$work" && find "$name" | sort | zip -X -q -9 -@ "$dist/$archive")
	else
		archive=$name.tar.gz
		tar -C "$work" --sort=name --format=gnu --mtime="@$SOURCE_DATE_EPOCH" \
			--owner=0 --group=0 --numeric-owner -cf - "$name" | gzip -n -9 >"$dist/$archive"
	fi
	echo "  $archive"
done

(cd "$dist" && sha256sum -- clawgate_* >SHA256SUMS)
echo "release: $(wc -l <"$dist/SHA256SUMS") archives and SHA256SUMS in $dist"

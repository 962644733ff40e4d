#!/usr/bin/env bash
# Builds labctl's release files into $DIST (default dist/), as kind ships
# its own: one executable per platform, labctl-<os>-<arch>[.exe], and
# checksums.txt (sha256sum's format) over them. CGO is off and paths are
# trimmed, so a release builds the same on any machine; VERSION is stamped
# into `labctl version`.
#
#   VERSION=v0.5.0 hack/dist.sh
#   VERSION=v0.5.0 TARGETS="linux/amd64" hack/dist.sh    # one platform
set -euo pipefail
cd "$(dirname "$0")/.."
: "${VERSION:?set VERSION to the release tag, e.g. v0.5.0}"
targets=${TARGETS:-"linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64"}
out=${DIST:-dist}
go=${GO:-go}

rm -rf "$out"
mkdir -p "$out"
for target in $targets; do
  os=${target%/*}
  arch=${target#*/}
  name="labctl-$os-$arch"
  [ "$os" = windows ] && name="$name.exe"
  echo "building $name"
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch "$go" build -trimpath \
    -ldflags "-s -w -X main.version=$VERSION" -o "$out/$name" ./cmd/labctl
done
(cd "$out" && sha256sum -- labctl-* > checksums.txt)
echo "wrote $(ls "$out" | wc -l) files to $out"

#!/usr/bin/env bash
# Prints the directory of the kube-apiserver and etcd binaries the
# controller tests (envtest) need, and says on stderr where they come from.
# Nothing is downloaded: they are, in order,
#   1. KUBEBUILDER_ASSETS, when it holds both;
#   2. labctl's control-plane cache (what `labctl controlplane build
#      --print-dir` prints once it has built them);
#   3. built by labctl: `go run ./cmd/labctl controlplane build` when this
#      project sits in labctl's repository, else a `labctl` on PATH
#      (a cold build takes 12-20 minutes).
set -euo pipefail

complete() { [ -x "$1/kube-apiserver" ] && [ -x "$1/etcd" ]; }

if [ -n "${KUBEBUILDER_ASSETS:-}" ]; then
	if complete "$KUBEBUILDER_ASSETS"; then
		echo "envtest binaries: $KUBEBUILDER_ASSETS (from KUBEBUILDER_ASSETS)" >&2
		echo "$KUBEBUILDER_ASSETS"
		exit 0
	fi
	echo "KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS lacks kube-apiserver or etcd: looking elsewhere" >&2
fi

# labctl keeps one directory per version set, <versions>/bin (Go's
# os.UserCacheDir, as labctl uses it); any complete one serves envtest,
# the newest first.
case "$(uname -s)" in
Darwin) cache="${XDG_CACHE_HOME:-$HOME/Library/Caches}" ;;
*) cache="${XDG_CACHE_HOME:-${HOME:-}/.cache}" ;;
esac
if [ -d "$cache/labctl/controlplane" ]; then
	while IFS= read -r dir; do
		if complete "$dir"; then
			echo "envtest binaries: $dir (from labctl's control-plane cache)" >&2
			echo "$dir"
			exit 0
		fi
	done < <(ls -1dt "$cache"/labctl/controlplane/*/bin 2>/dev/null)
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if grep -qs '^module github.com/labctl/labctl$' "$here/../go.mod"; then
	echo "envtest binaries: not found; building them with labctl's \`controlplane build\` (12-20 minutes the first time)" >&2
	dir="$(cd "$here/.." && go run ./cmd/labctl controlplane build --print-dir)"
elif command -v labctl >/dev/null; then
	echo "envtest binaries: not found; building them with \`labctl controlplane build\` (12-20 minutes the first time)" >&2
	dir="$(labctl controlplane build --print-dir)"
else
	echo "envtest binaries: not found. Set KUBEBUILDER_ASSETS to a directory with kube-apiserver and etcd, or install labctl (it builds them: labctl controlplane build)." >&2
	exit 1
fi
if ! complete "$dir"; then
	echo "envtest binaries: labctl printed $dir, which lacks kube-apiserver or etcd" >&2
	exit 1
fi
echo "envtest binaries: $dir (built by labctl controlplane build)" >&2
echo "$dir"

#!/usr/bin/env bash
# Measures what the issues name as targets and prints a table. Timing is
# measured here, never asserted in tests. Uses a throw-away state/cache dir
# for clusters so the user's own clusters are untouched.
set -euo pipefail
cd "$(dirname "$0")/.."
LABCTL=${LABCTL:-bin/labctl}
BIN_DIR=${LABCTL_BIN_DIR:?set LABCTL_BIN_DIR (make bench does)}
work=$(mktemp -d)
export XDG_STATE_HOME=$work/state KUBECONFIG=$work/kubeconfig
trap '"$LABCTL" down --name bench >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", b-a}'; }
rows=()
row() { rows+=("$1|$2|$3"); }

# Warm the reference operator's build once, as a user's second `up` would.
"$LABCTL" up --provider local --name bench --bin-dir "$BIN_DIR" >/dev/null 2>&1
"$LABCTL" down --name bench >/dev/null 2>&1

# First run online: an empty binaries cache and a local server laid out like
# dl.k8s.io and etcd's and kwok's GitHub releases (serving the binaries of
# $BIN_DIR, with checksum files beside them). The point is that nothing is
# built: the server's speed is not what is measured.
online_first_run() {
  local site=$work/site arch k8s etcd kwok rel port pid
  arch=$(go env GOARCH)
  read -r k8s etcd kwok < <("$LABCTL" version | sed -n 's/^kubernetes \(v[^,]*\), etcd \(v[^,]*\), kwok \(v[^ ]*\).*/\1 \2 \3/p')
  rel=$site/dl.k8s.io/release/$k8s/bin/linux/$arch
  mkdir -p "$rel" "$site/github.com/etcd-io/etcd/releases/download/$etcd/etcd-$etcd-linux-$arch" \
    "$site/github.com/kubernetes-sigs/kwok/releases/download/$kwok"
  put() { ln -L "$1" "$2" 2>/dev/null || cp -L "$1" "$2"; (cd "$(dirname "$2")" && sha256sum "$(basename "$2")" >"$(basename "$2").sha256"); }
  for c in kube-apiserver kube-controller-manager kube-scheduler; do put "$BIN_DIR/$c" "$rel/$c"; done
  put "$BIN_DIR/kwok" "$site/github.com/kubernetes-sigs/kwok/releases/download/$kwok/kwok-linux-$arch"
  (cd "$site/github.com/etcd-io/etcd/releases/download/$etcd" &&
    put "$BIN_DIR/etcd" "etcd-$etcd-linux-$arch/etcd" && rm "etcd-$etcd-linux-$arch/etcd.sha256" &&
    tar -ch "etcd-$etcd-linux-$arch" | gzip -1 >"etcd-$etcd-linux-$arch.tar.gz" && rm -r "etcd-$etcd-linux-$arch" &&
    sha256sum "etcd-$etcd-linux-$arch.tar.gz" >SHA256SUMS)
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  (cd "$site" && exec python3 -m http.server --bind 127.0.0.1 "$port" >/dev/null 2>&1) &
  pid=$!
  for _ in $(seq 50); do curl -fs -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
  # Go's build cache stays where it is: only labctl's cache starts empty.
  local t0 t1 bins ok=pass
  t0=$(now)
  GOCACHE=$(go env GOCACHE) XDG_CACHE_HOME=$work/cache LABCTL_CONTROLPLANE_MIRROR=http://127.0.0.1:$port/ KUBEBUILDER_ASSETS= \
    "$LABCTL" up --provider local --name bench-online >/dev/null 2>"$work/online.log" || ok=FAIL
  t1=$(now)
  kill "$pid" 2>/dev/null || true
  "$LABCTL" down --name bench-online >/dev/null 2>&1 || true
  bins=$(grep -E 'Preparing control-plane binaries' "$work/online.log" | tail -1)
  if grep -q -- '— downloaded' <<<"$bins"; then
    row "first run online: labctl up, empty binaries cache, release binaries from a local mirror ($ok)" "$(secs "$t0" "$t1") s" "<= 120 s"
    row "  of which: download and verify the control-plane binaries" "$(grep -oE '\([0-9.]+m?s\)' <<<"$bins" | tail -1 | tr -d '()')" "no build"
  else
    row "first run online: labctl up did not download (see below)" "FAIL" "no build"
    sed 's/^/    /' "$work/online.log" >&2
  fi
  rm -rf "$site" "$work/cache"
}
if command -v python3 >/dev/null && command -v sha256sum >/dev/null; then online_first_run; fi

t0=$(now)
"$LABCTL" up --provider local --name bench --bin-dir "$BIN_DIR" >/dev/null 2>"$work/up.log"
t1=$(now)
row "labctl up (warm binaries) to operator running, CRDs established" "$(secs "$t0" "$t1") s" "<= 8 s"
cluster_line=$(grep -E 'Starting local cluster' "$work/up.log" | grep -oE '\([0-9.]+m?s\)' | tail -1)
row "  of which: control plane start to node Ready" "${cluster_line//[()]/}" ""

t0=$(now)
"$LABCTL" up --provider local --name bench --bin-dir "$BIN_DIR" >/dev/null 2>&1
t1=$(now)
row "labctl up on a running cluster (idempotent)" "$(secs "$t0" "$t1") s" ""

status=$("$LABCTL" status --name bench)
pss=0; rss=0
while IFS=$'\t' read -r comp pid addr health mem r; do
  case "$comp" in etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kwok)
    m=${mem% MiB}; x=${r% MiB}
    row "memory $comp (PSS / RSS)" "$m / $x MiB" ""
    pss=$((pss + m)); rss=$((rss + x));;
  esac
done <<<"$status"
row "memory control plane total, PSS (shared binary pages counted once)" "$pss MiB" "<= 500 MiB"
row "memory control plane total, RSS (shared pages counted per process)" "$rss MiB" ""

known_labs=$("$LABCTL" labs 2>/dev/null || true)
for lab in lab-3.2 lab-3.3 lab-3.4 lab-4.1 lab-4.2 lab-4.3 lab-4.4 lab-6.2 lab-6.4 lab-8.2; do
  # warm once (the project's packages compile on the first run), then time
  "$LABCTL" verify "$lab" --name bench >/dev/null 2>&1 || true
  if grep -q "$lab" <<<"$known_labs"; then
    t0=$(now)
    "$LABCTL" verify "$lab" --name bench >/dev/null 2>&1 && ok=pass || ok=FAIL
    t1=$(now)
    target="<= 5 s"; [ "$lab" = lab-3.4 ] && target="<= 10 s"
    row "labctl verify $lab against the reference ($ok)" "$(secs "$t0" "$t1") s" "$target"
  fi
done

# The first labs: 2.4 and 3.1 against the Hello World operator (up --lab
# deploys it in place of the Database operator), 1.4 (no operator) against
# the reference website-crd.yaml.
"$LABCTL" up --provider local --name bench --bin-dir "$BIN_DIR" --lab 2.4 >/dev/null 2>&1 || true
for lab in lab-2.4 lab-3.1 lab-1.4; do
  grep -q "$lab" <<<"$known_labs" || continue
  project=()
  [ "$lab" = lab-1.4 ] && project=(--project internal/reference/website)
  "$LABCTL" verify "$lab" --name bench "${project[@]}" >/dev/null 2>&1 || true
  t0=$(now)
  "$LABCTL" verify "$lab" --name bench "${project[@]}" >/dev/null 2>&1 && ok=pass || ok=FAIL
  t1=$(now)
  row "labctl verify $lab against the reference ($ok)" "$(secs "$t0" "$t1") s" "<= 5 s"
done

t0=$(now)
"$LABCTL" down --name bench >/dev/null 2>&1
t1=$(now)
row "labctl down" "$(secs "$t0" "$t1") s" ""

printf '\n| measure | value | target |\n|---|---|---|\n'
for r in "${rows[@]}"; do IFS='|' read -r a b c <<<"$r"; printf '| %s | %s | %s |\n' "$a" "$b" "$c"; done

# Grading: ten fixture submissions end to end (warm caches), and verify as a
# Go benchmark (average and worst of 3 runs against the reference).
# gobench prints a benchmark's result lines; when one fails it keeps why
# (the failure's own lines), not just that it did.
gobench() {
  local pattern=$1 pkg=$2 extra=$3 out=$work/bench-$RANDOM.log
  go test -run '^$' -bench "$pattern" $extra "$pkg" >"$out" 2>&1 || true
  grep -E 'Benchmark|s/submission' "$out" || true
  if grep -qE '^(--- FAIL|FAIL|panic:)' "$out"; then
    echo "  failed; its output:"
    grep -vE '^(goos|goarch|pkg|cpu):' "$out" | sed 's/^/    /' | tail -60
  fi
}
if [ -z "${BENCH_QUICK:-}" ]; then
  echo
  echo "go test -bench GradeClass (10 submissions):"
  gobench GradeClass ./internal/grade/ '-benchtime 1x'
  echo
  echo "go test -bench Verify (reference, local provider):"
  gobench Verify ./internal/checks/honesty/ '-benchtime 3x'
  echo
  echo "go test -bench SandboxSetup (one submission's box: private copy, overlay, namespaces):"
  gobench SandboxSetup ./internal/sandbox/ ''
  echo
  echo "go test -bench HTMLReport (report.html for 200 students):"
  gobench HTMLReport ./internal/report/ ''
  echo
  echo "go test -bench PatternDifference (crd-schema's pattern.like, two DNS-name patterns):"
  gobench PatternDifference ./internal/checks/ ''
fi

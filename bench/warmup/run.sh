#!/usr/bin/env bash
# Warm-up on a distant server, side by side in one run: the time to the
# first byte of a new flow over a 100 ms RTT link (netem, or netlab's
# user-space delay line where the kernel has no sch_netem) to a real Xray
# server (VLESS over TLS), for switchyard with warm-up on and off and for
# Xray and sing-box as clients; then switchyard's VmRSS and descriptors
# with 50 nodes, warm-up at its defaults and off. Needs root (it makes a
# network namespace) and iproute2. Builds switchyard and the harness
# (bench/warmup), installs the pinned Xray and sing-box (scripts/peers.sh)
# and runs the harness. Arguments go to the harness (-quick, -runs N,
# -gap 2s, -nodes 50, ...); every harness flag also has a BENCH_*
# environment default.
#
# Environment:
#   BENCH_KEEP   if set, keep the work folder (configs and logs)
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
cd "$root"

bench_work warmup

{ command -v ip && command -v tc; } >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2; }
echo "building switchyard and the harness" >&2
go build -o "$work/switchyard" ./cmd/switchyard
go build -o "$work/warmup" ./bench/warmup
echo "installing peers" >&2
scripts/peers.sh install
xray=$(scripts/peers.sh path xray)
singbox=$(scripts/peers.sh path sing-box)

first_line() { # cmd... : the first line of its output, never failing
	local out
	out=$("$@" 2>&1) || true
	echo "${out%%$'\n'*}"
}

echo "host: $(nproc) CPUs, $(uname -sr), $(go version | cut -d' ' -f3)"
echo "switchyard: $(first_line "$work/switchyard" version)"
echo "xray: $(first_line "$xray" version)"
echo "sing-box: $(sed -n 's/^SINGBOX_VERSION=//p' scripts/peers.sh) (scripts/peers.sh)"
"$work/warmup" -xray "$xray" -switchyard "$work/switchyard" -singbox "$singbox" -work "$work" "$@"

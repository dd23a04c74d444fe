#!/usr/bin/env bash
# Failover of a urltest group, switchyard vs sing-box side by side in one
# run: builds switchyard and the harness (bench/failover), installs the
# pinned Xray and sing-box (scripts/peers.sh), and runs the harness, which
# for each router and trial starts two upstream Xray SOCKS5 servers, the
# router with a urltest group over them and a local probe/destination HTTP
# server, sends one short flow every 50 ms through the router, SIGKILLs the
# upstream that serves, and counts the failed flows and the time until
# flows succeed through the other one; then restarts the killed upstream
# and counts the flows that switch back to it once it is probed again.
# Arguments go to the harness (-quick, -trials N, -interval 30s, ...);
# every harness flag also has a BENCH_* environment default.
#
# Environment:
#   BENCH_KEEP   if set, keep the work folder (configs and logs per trial)
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
cd "$root"

bench_work failover

echo "building switchyard and the harness" >&2
go build -o "$work/switchyard" ./cmd/switchyard
go build -o "$work/failover" ./bench/failover
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
echo "sing-box: $(sed -n 's/^SINGBOX_VERSION=//p' scripts/peers.sh) (scripts/peers.sh)"
echo "xray (upstreams): $(first_line "$xray" version)"
mkdir -p "$work/trials"
"$work/failover" -xray "$xray" -switchyard "$work/switchyard" -singbox "$singbox" -work "$work/trials" "$@"

#!/usr/bin/env bash
# The Clash API's GET /connections and the connection streams with 10,000
# open flows, switchyard vs sing-box side by side in one run: builds
# switchyard and the harness (bench/api), builds sing-box with its Clash
# API (scripts/peers.sh install sing-box-clashapi: the pinned sing-box
# with with_clash_api added to its tags, a cache folder of its own), and
# runs the harness, which for each router opens the flows through its
# SOCKS5 inbound (out over VLESS on gRPC to a local echo), times GET
# /connections, reads the router's allocations per call, and measures the
# CPU the WebSocket /connections stream and switchyard's delta stream
# /switchyard/v1/connections cost while 100 flows move every second.
# Arguments go to the harness (-quick, -flows N, -gets N, -rounds N, ...);
# every harness flag also has a BENCH_* environment default.
#
# Environment:
#   BENCH_KEEP   if set, keep the work folder (configs and logs)
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
cd "$root"

bench_work api

echo "building switchyard and the harness" >&2
go build -o "$work/switchyard" ./cmd/switchyard
go build -o "$work/api" ./bench/api
echo "installing sing-box with its Clash API" >&2
scripts/peers.sh install sing-box-clashapi
singbox=$(scripts/peers.sh path sing-box-clashapi)

first_line() { # cmd... : the first line of its output, never failing
	local out
	out=$("$@" 2>&1) || true
	echo "${out%%$'\n'*}"
}

echo "host: $(nproc) CPUs, $(uname -sr), $(go version | cut -d' ' -f3), descriptor limit $(ulimit -n)"
echo "switchyard: $(first_line "$work/switchyard" version)"
echo "sing-box: $(sed -n 's/^SINGBOX_VERSION=//p' scripts/peers.sh) with_clash_api (scripts/peers.sh)"
mkdir -p "$work/routers"
"$work/api" -switchyard "$work/switchyard" -singbox "$singbox" -work "$work/routers" "$@"

#!/usr/bin/env bash
# Score against URLTest end to end, in one run: two real Xray servers
# (VLESS over TLS) as the nodes of one group, node A on loopback whose
# routing blackholes some sites, node B over a delayed link (netem, or
# netlab's user-space delay line where the kernel has no sch_netem) that
# serves every site; the same flows through the group as urltest and as
# score, and per site the success rate, the median time to the first byte
# and the node that carried the flows. Needs root (it makes a network
# namespace) and iproute2. Builds switchyard and the harness
# (bench/score), installs the pinned Xray (scripts/peers.sh) and runs the
# harness; the report also goes to bench/out/score.txt. Arguments go to
# the harness (-quick, -rounds N, -delay 40ms, -policies score, ...);
# every harness flag also has a BENCH_* environment default.
#
# Environment:
#   BENCH_KEEP   if set, keep the work folder (configs and logs)
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
cd "$root"

bench_work score

{ command -v ip && command -v tc; } >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2; }
echo "building switchyard and the harness" >&2
go build -o "$work/switchyard" ./cmd/switchyard
go build -o "$work/score" ./bench/score
echo "installing peers" >&2
scripts/peers.sh install
xray=$(scripts/peers.sh path xray)

first_line() { # cmd... : the first line of its output, never failing
	local out
	out=$("$@" 2>&1) || true
	echo "${out%%$'\n'*}"
}

mkdir -p "$root/bench/out"
{
	echo "host: $(nproc) CPUs, $(uname -sr), $(go version | cut -d' ' -f3)"
	echo "switchyard: $(first_line "$work/switchyard" version)"
	echo "xray (both nodes): $(first_line "$xray" version)"
	"$work/score" -xray "$xray" -switchyard "$work/switchyard" -work "$work" "$@"
} | tee "$root/bench/out/score.txt"

#!/usr/bin/env bash
# Connection rate through a urltest group against the member named directly,
# switchyard alone, two configurations side by side in one run: "member"
# routes final = "d1", a direct outbound; "group" routes final = "auto", a
# urltest group over d1 and d2 (another direct outbound), probed through a
# local 204 server (bench/groups/probe204). Both have the same SOCKS5
# inbound, outbounds and [health] table. Runs bench/socksbench rate mode
# against both (the group first: ratio = group/member) and prints the table.
# Arguments go to socksbench (e.g. -quick, -rate 6s, -rounds 5); every
# socksbench flag also has a BENCH_* environment default.
#
# Environment:
#   BENCH_CPUS   if set, both switchyards run under `taskset -c $BENCH_CPUS`
#   BENCH_KEEP   if set, keep the work folder (configs, logs, binaries)
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
cd "$root"

bench_work groups
export BENCH_ONLY=${BENCH_ONLY:-rate}

echo "building switchyard, socksbench and probe204" >&2
go build -o "$work/switchyard" ./cmd/switchyard
go build -o "$work/socksbench" ./bench/socksbench
go build -o "$work/probe204" ./bench/groups/probe204

probe_port=$(free_port)
launch "$work/probe204.log" "$work/probe204" "127.0.0.1:$probe_port"
wait_listening probe204 "$last_pid" "$probe_port" "$work/probe204.log"

# write_config NAME FINAL GROUPS: the same inbound, outbounds and health
# table for both, FINAL the route's final, GROUPS the [[groups]] tables.
write_config() {
	local name=$1 final=$2 groups=$3 port
	port=$(free_port)
	cat >"$work/$name.toml" <<EOT
[log]
level = "warn"

[state]
path = ""

[health]
tcp_check_url = ["http://127.0.0.1:$probe_port/generate_204"]
udp_check_dns = []

[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:$port"

[[outbounds]]
tag = "d1"
type = "direct"

[[outbounds]]
tag = "d2"
type = "direct"
$groups
[route]
final = "$final"
EOT
	launch "$work/$name.log" "$work/switchyard" run -c "$work/$name.toml"
	wait_listening "$name" "$last_pid" "$port" "$work/$name.log"
	bench_args+=(-target "$name=127.0.0.1:$port,$last_pid")
}

bench_args=()
write_config group auto '
[[groups]]
tag = "auto"
policy = "urltest"
members = ["d1", "d2"]
tolerance = "50ms"
'
write_config member d1 ''

# The group's first probe cycle runs at start: wait until both members were
# probed (a probe is two requests on one connection, a warm-up and the
# measured one: four at the probe server), so the group ranks measured
# members from the first flow.
for _ in $(seq 100); do
	n=$(curl -s "http://127.0.0.1:$probe_port/count" 2>/dev/null || echo 0)
	[ "${n:-0}" -ge 4 ] && break
	sleep 0.1
done
echo "probes answered before the run: ${n:-0}"

echo "host: $(nproc) CPUs, $(uname -sr), $(go version | cut -d' ' -f3), ulimit -n $(ulimit -n)"
status=0
"$work/socksbench" "${bench_args[@]}" "$@" || status=$?
echo "probes answered by the end: $(curl -s "http://127.0.0.1:$probe_port/count" 2>/dev/null || echo '?')"

for t in group member; do
	log="$work/$t.log"
	if grep -qiE 'error|panic|fatal|fail' "$log" 2>/dev/null; then
		echo
		echo "$t logged errors (last 10 such lines):"
		grep -iE 'error|panic|fatal|fail' "$log" | tail -n 10
	fi
done
exit "$status"

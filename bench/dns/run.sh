#!/usr/bin/env bash
# Queries per second of the DNS service, switchyard vs sing-box side by
# side in one run: builds switchyard and the harness (bench/dns), installs
# the pinned sing-box (scripts/peers.sh), starts a local stub upstream on
# loopback UDP and both routers configured the same way (one UDP upstream,
# the stub; a cache of 4096 answers; a 5 s query timeout; a SOCKS5 inbound
# with UDP whose port-53 datagrams are answered in-process), runs
# `dnsbench load` against both, warm cache then cold, and prints the table.
# Arguments go to `dnsbench load` (e.g. -quick, -duration 20s, -rounds 5,
# -modes cold); every flag also has a BENCH_* environment default.
#
# Environment:
#   BENCH_CPUS    if set, the routers and the stub run under
#                 `taskset -c $BENCH_CPUS`
#   BENCH_KEEP    if set, keep the work folder (configs, logs, binaries)
#   BENCH_PPROF   if set (a loopback IP:port), switchyard serves
#                 net/http/pprof there (SWITCHYARD_PPROF)
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
cd "$root"

bench_work dns

echo "building switchyard and the harness" >&2
go build -o "$work/switchyard" ./cmd/switchyard
go build -o "$work/dnsbench" ./bench/dns
scripts/peers.sh install >&2
singbox=$(scripts/peers.sh path sing-box)

launch "$work/stub.log" "$work/dnsbench" stub -listen 127.0.0.1:0 -addr-file "$work/stub.addr"
stub_pid=$last_pid
for _ in $(seq 100); do
	[ -s "$work/stub.addr" ] && break
	if ! kill -0 "$stub_pid" 2>/dev/null; then
		echo "run.sh: the stub exited; its log:" >&2
		cat "$work/stub.log" >&2
		exit 1
	fi
	sleep 0.1
done
stub_addr=$(cat "$work/stub.addr")
stub_port=${stub_addr##*:}

sy_port=$(free_port)
cat >"$work/switchyard.toml" <<TOML
[log]
level = "warn"

[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:$sy_port"
udp = true

[route]
final = "direct"

[dns]
servers = ["udp://127.0.0.1:$stub_port"]
serve = true
cache_size = 4096
timeout = "5s"
TOML
sy_env=()
if [ -n "${BENCH_PPROF:-}" ]; then
	sy_env=(env SWITCHYARD_PPROF="$BENCH_PPROF")
fi
launch "$work/switchyard.log" "${sy_env[@]}" "$work/switchyard" run -c "$work/switchyard.toml"
sy_pid=$last_pid
wait_listening switchyard "$sy_pid" "$sy_port" "$work/switchyard.log"

sb_port=$(free_port)
cat >"$work/sing-box.json" <<JSON
{
  "log": {"level": "warn"},
  "dns": {
    "servers": [{"type": "udp", "tag": "stub", "server": "127.0.0.1", "server_port": $stub_port}],
    "final": "stub",
    "cache_capacity": 4096,
    "timeout": "5s"
  },
  "inbounds": [{"type": "socks", "tag": "socks-in", "listen": "127.0.0.1", "listen_port": $sb_port}],
  "outbounds": [{"type": "direct", "tag": "direct"}],
  "route": {
    "rules": [{"port": 53, "action": "hijack-dns"}],
    "final": "direct"
  }
}
JSON
launch "$work/sing-box.log" "$singbox" run -c "$work/sing-box.json"
sb_pid=$last_pid
wait_listening sing-box "$sb_pid" "$sb_port" "$work/sing-box.log"

echo "host: $(nproc) CPUs, $(uname -sr), $(go version | cut -d' ' -f3)"
echo "switchyard: $("$work/switchyard" version 2>&1 | head -n 1)"
# A `go install` build reports its version as unknown: the folder names it.
echo "sing-box: $(basename "$(dirname "$singbox")")"
status=0
"$work/dnsbench" load -stub "$stub_addr,$stub_pid" \
	-target "switchyard=127.0.0.1:$sy_port,$sy_pid" \
	-target "sing-box=127.0.0.1:$sb_port,$sb_pid" "$@" || status=$?

# A router that logged errors during the run says so here.
for t in switchyard sing-box; do
	log="$work/$t.log"
	if grep -qiE 'error|panic|fatal|fail' "$log" 2>/dev/null; then
		echo
		echo "$t logged errors ($(grep -ciE 'error|panic|fatal|fail' "$log") lines, the last 10):"
		grep -iE 'error|panic|fatal|fail' "$log" | tail -n 10
	fi
done
exit "$status"

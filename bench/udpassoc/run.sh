#!/usr/bin/env bash
# Memory per idle SOCKS5 UDP association, switchyard vs sing-box side by
# side in one run: builds switchyard and the harness, installs the pinned
# sing-box (scripts/peers.sh), starts both with a SOCKS5 inbound (UDP on,
# no authentication) on loopback routed to direct, runs bench/udpassoc
# against both and prints the table. Arguments go to the harness (-n, -size,
# -settle).
#
# Environment:
#   BENCH_CPUS   if set, both proxies run under `taskset -c $BENCH_CPUS`
#   BENCH_KEEP   if set, keep the work folder (configs, logs, binaries)
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
cd "$root"

# Each association holds a control connection and a relay socket in each
# proxy and two sockets in the harness, and a direct socket or two more:
# bench_work raises the descriptor limit.
bench_work udpassoc

echo "building switchyard and the harness" >&2
go build -o "$work/switchyard" ./cmd/switchyard
go build -o "$work/udpassoc" ./bench/udpassoc
scripts/peers.sh install sing-box >&2
singbox=$(scripts/peers.sh path sing-box)

sy_port=$(free_port)
cat >"$work/switchyard.toml" <<TOML
[log]
level = "warn"

[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:$sy_port"
udp = true
max_udp_associations = 100000

[route]
final = "direct"
TOML
launch "$work/switchyard.log" "$work/switchyard" run -c "$work/switchyard.toml"
sy_pid=$last_pid
wait_listening switchyard "$sy_pid" "$sy_port" "$work/switchyard.log"

sb_port=$(free_port)
cat >"$work/sing-box.json" <<JSON
{
  "log": {"level": "warn"},
  "inbounds": [{"type": "socks", "tag": "socks-in", "listen": "127.0.0.1", "listen_port": $sb_port}],
  "outbounds": [{"type": "direct", "tag": "direct"}]
}
JSON
launch "$work/sing-box.log" "$singbox" run -c "$work/sing-box.json"
sb_pid=$last_pid
wait_listening sing-box "$sb_pid" "$sb_port" "$work/sing-box.log"

"$work/udpassoc" -target "switchyard=127.0.0.1:$sy_port,$sy_pid" -target "sing-box=127.0.0.1:$sb_port,$sb_pid" "$@"

#!/usr/bin/env bash
# Memory per held pre-authentication connection: switchyard and sing-box,
# each with one mixed inbound on loopback routed direct, side by side in one
# run. Each gets BENCH_CONNS connections (default 1000) that send a request
# head of BENCH_HEAD_KIB KiB (default 32) and never its end; the harness
# reads each proxy's RSS before, while they are held, and after they close.
# switchyard runs with max_handshakes above BENCH_CONNS and a long
# handshake_timeout, so that every connection is held and the figure is
# the cost of one, not the effect of the bound. BENCH_KEEP=1 keeps the work
# folder.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
cd "$root"

conns=${BENCH_CONNS:-1000}

bench_work preauth

go build -o "$work/switchyard" ./cmd/switchyard
go build -o "$work/preauth" ./bench/preauth
scripts/peers.sh install >/dev/null
singbox=$(scripts/peers.sh path sing-box)

sy_port=$(free_port)
sb_port=$(free_port)
cat >"$work/switchyard.toml" <<TOML
[log]
level = "warn"
[[inbounds]]
tag = "mixed-in"
type = "mixed"
listen = "127.0.0.1:$sy_port"
handshake_timeout = "10m"
max_handshakes = $((conns * 2))
[route]
final = "direct"
TOML
cat >"$work/sing-box.json" <<JSON
{
  "log": {"level": "warn"},
  "inbounds": [{"type": "mixed", "listen": "127.0.0.1", "listen_port": $sb_port}],
  "outbounds": [{"type": "direct"}]
}
JSON

launch "$work/switchyard.log" "$work/switchyard" run -c "$work/switchyard.toml"
sy_pid=$last_pid
launch "$work/sing-box.log" "$singbox" run -c "$work/sing-box.json"
sb_pid=$last_pid
wait_listening switchyard "$sy_pid" "$sy_port" "$work/switchyard.log"
wait_listening sing-box "$sb_pid" "$sb_port" "$work/sing-box.log"
sleep 1

"$work/preauth" -conns "$conns" \
	-target "switchyard=127.0.0.1:$sy_port,$sy_pid" \
	-target "sing-box=127.0.0.1:$sb_port,$sb_pid" "$@"

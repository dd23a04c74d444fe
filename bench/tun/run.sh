#!/usr/bin/env bash
# TUN inbound throughput, connection rate, UDP packets per second (one
# datagram in flight per socket, and 32 in flight), CPU per UDP packet and
# CPU per GB, switchyard vs sing-box (gVisor stack) side by side in one run, in
# the same namespace setup: a client namespace whose default route goes
# into the proxy's TUN device, and a servers' namespace behind a veth pair
# that only the proxy's own (marked) sockets have a route to. Each proxy
# runs in turn in the client namespace; bench/tun's harness measures
# through it and prints one line; the table shows switchyard/sing-box.
# Needs root and iproute2.
#
# Environment:
#   BENCH_D      measured time of each figure (default 5s)
#   BENCH_ROUNDS rounds (default 3): each round measures switchyard, then
#                sing-box; the table compares the best round of each side
#                on each figure (as bench/proxies does), and lists every
#                round's ratio
#   BENCH_CPUS   if set, the proxies run under `taskset -c $BENCH_CPUS`
#   BENCH_SPLIT  P:H (e.g. 1:0): each proxy runs on CPUs P, the servers and
#                the harness on CPUs H, so that the load the harness makes
#                does not take CPU from the proxy it measures
#   BENCH_ONLY   if set (tcp, rate, udp or window), measure only that figure
#   BENCH_KEEP   if set, keep the work folder (configs, logs, binaries)
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
cd "$root"
bench_work tun

tag=$$
C=sy-bench-c-$tag
S=sy-bench-s-$tag
dev=sybench0
mark=8227 # 0x2023
server=10.216.0.2
cleanup_ns() {
	ip netns del "$C" 2>/dev/null || true
	ip netns del "$S" 2>/dev/null || true
	bench_cleanup
}
trap cleanup_ns EXIT

echo "building switchyard and the harness" >&2
go build -o "$work/switchyard" ./cmd/switchyard
go build -o "$work/tun" ./bench/tun
scripts/peers.sh install >&2
singbox=$(scripts/peers.sh path sing-box)

ip netns add "$C"
ip netns add "$S"
ip -n "$C" link set lo up
ip -n "$S" link set lo up
ip -n "$C" link add vc type veth peer name vs netns "$S"
ip -n "$C" addr add 10.214.250.1/30 dev vc
ip -n "$S" addr add 10.214.250.2/30 dev vs
ip -n "$C" link set vc up
ip -n "$S" link set vs up
ip -n "$S" addr add "$server/32" dev lo
ip -n "$C" rule add fwmark "$mark" lookup 100 pref 100
ip -n "$C" route add 10.216.0.0/24 via 10.214.250.2 table 100

proxy_cpus=() load_cpus=()
if [ -n "${BENCH_SPLIT:-}" ]; then
	proxy_cpus=(taskset -c "${BENCH_SPLIT%%:*}")
	load_cpus=(taskset -c "${BENCH_SPLIT##*:}")
fi
launch "$work/servers.log" ip netns exec "$S" "${load_cpus[@]}" "$work/tun" serve -addr "$server"
sleep 0.5

cat >"$work/switchyard.toml" <<TOML
[log]
level = "warn"

[socket]
mark = $mark

[[inbounds]]
tag = "tun-in"
type = "tun"
name = "$dev"
addresses = ["172.19.0.1/30"]
mtu = 9000

[route]
final = "direct"
TOML
cat >"$work/sing-box.json" <<JSON
{
  "log": {"level": "warn"},
  "inbounds": [{"type": "tun", "tag": "tun-in", "interface_name": "$dev",
    "address": ["172.19.0.1/30"], "mtu": 9000, "stack": "gvisor"}],
  "outbounds": [{"type": "direct", "tag": "direct"}],
  "route": {"default_mark": $mark, "final": "direct"}
}
JSON

# measure_one runs one proxy in the client namespace, routes the namespace
# into its device, measures and stops it; the figures go to $work/$name.out.
measure_one() { # name cmd...
	local name=$1
	shift
	launch "$work/$name.log" ip netns exec "$C" "${proxy_cpus[@]}" "$@"
	local pid=$last_pid
	for _ in $(seq 100); do
		if ip -n "$C" link show "$dev" 2>/dev/null | grep -q 'state\|UP'; then
			break
		fi
		sleep 0.1
	done
	ip -n "$C" link set "$dev" up 2>/dev/null || true
	ip -n "$C" route replace default dev "$dev"
	sleep 0.5
	ip netns exec "$C" "${load_cpus[@]}" "$work/tun" measure -addr "$server" -pid "$pid" -d "${BENCH_D:-5s}" -only "${BENCH_ONLY:-}" | tee -a "$work/$name.out" >&2
	kill -TERM "$pid"
	wait "$pid" 2>/dev/null || true
	ip -n "$C" route del default 2>/dev/null || true
}

rounds=${BENCH_ROUNDS:-3}
for round in $(seq "$rounds"); do
	echo "round $round of $rounds" >&2
	measure_one switchyard "$work/switchyard" run -c "$work/switchyard.toml"
	measure_one sing-box "$singbox" run -c "$work/sing-box.json"
done

# field prints a figure's value in each round, one a line.
field() { # file key
	tr ' ' '\n' <"$1" | sed -n "s/^$2=//p"
}
# best is a side's best round: the highest rate, or the lowest CPU.
best() { # key values...
	local k=$1
	shift
	case $k in
	cpu_*) printf '%s\n' "$@" | sort -g | head -1 ;;
	*) printf '%s\n' "$@" | sort -g | tail -1 ;;
	esac
}
printf '%-18s %10s %10s %6s   %s\n' figure switchyard sing-box ratio "each round"
for k in tcp_mbps conns_per_s udp_pps udp_window_pps cpu_us_per_packet cpu_s_per_gb; do
	mapfile -t as < <(field "$work/switchyard.out" "$k")
	mapfile -t bs < <(field "$work/sing-box.out" "$k")
	a=$(best "$k" "${as[@]}")
	b=$(best "$k" "${bs[@]}")
	r=$(awk -v a="$a" -v b="$b" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')
	each=""
	for i in "${!as[@]}"; do
		each+=$(awk -v a="${as[$i]}" -v b="${bs[$i]:-0}" 'BEGIN { if (b > 0) printf " %.2f", a / b; else printf " -" }')
	done
	printf '%-18s %10s %10s %6s  %s\n' "$k" "$a" "$b" "$r" "$each"
done
echo "(best round of each side; udp_pps: 8 sockets, one datagram in flight each; udp_window_pps: 8 sockets,"
echo " 32 in flight each; cpu_us_per_packet, of the pipelined run, and cpu_s_per_gb: lower is better;"
echo " the others: higher is better)"
grep -i -h 'error\|panic' "$work"/*.log >&2 || true

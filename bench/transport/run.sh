#!/usr/bin/env bash
# Compares switchyard with Xray as the client of the same Xray server, over
# VLESS on ws+tls and on grpc+tls: for each transport it starts one Xray
# server (VLESS inbound -> freedom), then switchyard and an Xray client,
# each with a SOCKS5 inbound routed to a VLESS outbound to that server, and
# runs bench/socksbench against the two SOCKS5 ports. Ratios are
# switchyard/Xray-client. Arguments go to socksbench (e.g. -quick); every
# socksbench flag also has a BENCH_* environment default.
#
# Environment:
#   BENCH_TRANSPORTS  which transports, in order (default "ws grpc")
#   BENCH_ONLY        socksbench phases (default here "up,down,rate")
#   BENCH_RETRIES     socksbench retries of a disturbed run (default here 0:
#                     the Xray server is busy in every run and counts among
#                     the "other processes", so every run reads DISTURBED)
#   BENCH_CPUS        if set, every proxy runs under `taskset -c $BENCH_CPUS`
#   BENCH_KEEP        if set, keep the work folder (configs, logs, binaries)
#   BENCH_BASE_BIN    if set, another switchyard binary (e.g. the build
#                     before a change) runs as a third client with the same
#                     config, to compare a change in one run
#   BENCH_PPROF       if set (a loopback IP:port), switchyard serves
#                     net/http/pprof there (SWITCHYARD_PPROF)
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
cd "$root"

ulimit -Hn 1048576 2>/dev/null || true
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
export BENCH_ONLY=${BENCH_ONLY:-up,down,rate}
export BENCH_RETRIES=${BENCH_RETRIES:-0}

work=$(mktemp -d "${TMPDIR:-/tmp}/switchyard-bench-transport.XXXXXX")
pids=()
stop_all() {
	local p
	for p in "${pids[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	pids=()
}
cleanup() {
	stop_all
	if [ -n "${BENCH_KEEP:-}" ]; then
		echo "work folder kept: $work" >&2
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT

uuid=b831381d-6324-4d53-ad4f-8cda48b30811
host=bench.switchyard.test




echo "building switchyard and socksbench" >&2
go build -o "$work/switchyard" ./cmd/switchyard
go build -o "$work/socksbench" ./bench/socksbench
echo "installing peers" >&2
scripts/peers.sh install
xray=$(scripts/peers.sh path xray)

# A self-signed certificate both clients verify (switchyard with ca_file,
# Xray with a "verify" certificate), so both pay the same handshake.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
	-keyout "$work/key.pem" -out "$work/cert.pem" -subj "/CN=$host" \
	-addext "subjectAltName=DNS:$host" -addext "basicConstraints=critical,CA:TRUE" \
	-addext "keyUsage=digitalSignature,keyCertSign" 2>/dev/null

# xray_stream NETWORK SIDE: the streamSettings of a server or a client.
xray_stream() {
	local network=$1 side=$2 settings tls
	case "$network" in
	ws) settings='"wsSettings":{"path":"/bench"}' ;;
	grpc) settings='"grpcSettings":{"serviceName":"bench"}' ;;
	esac
	if [ "$side" = server ]; then
		tls="{\"certificates\":[{\"certificateFile\":\"$work/cert.pem\",\"keyFile\":\"$work/key.pem\"}]}"
	else
		tls="{\"serverName\":\"$host\",\"certificates\":[{\"usage\":\"verify\",\"certificateFile\":\"$work/cert.pem\"}]}"
	fi
	echo "\"streamSettings\":{\"network\":\"$network\",\"security\":\"tls\",\"tlsSettings\":$tls,$settings}"
}

# switchyard_transport NETWORK: the outbound's transport key.
switchyard_transport() {
	case "$1" in
	ws) echo 'transport = { type = "ws", path = "/bench" }' ;;
	grpc) echo 'transport = { type = "grpc", service_name = "bench" }' ;;
	esac
}

echo "host: $(nproc) CPUs, $(uname -sr), $(go version | cut -d' ' -f3), ulimit -n $(ulimit -n)"
echo "switchyard: $("$work/switchyard" version 2>&1 | head -n1)"
echo "xray: $("$xray" version 2>&1 | head -n1)"
status=0
read -r -a transports <<<"${BENCH_TRANSPORTS:-ws grpc}"
for tr in "${transports[@]}"; do
	case "$tr" in
	ws | grpc) ;;
	*)
		echo "run.sh: unknown transport $tr (want ws or grpc)" >&2
		exit 2
		;;
	esac
	dir="$work/$tr"
	mkdir -p "$dir"

	server_port=$(free_port)
	cat >"$dir/server.json" <<EOF
{"log":{"loglevel":"warning","access":"none"},
 "inbounds":[{"listen":"127.0.0.1","port":$server_port,"protocol":"vless",
   "settings":{"clients":[{"id":"$uuid"}],"decryption":"none"},$(xray_stream "$tr" server)}],
 "outbounds":[{"protocol":"freedom"}]}
EOF
	launch "$dir/server.log" "$xray" run -c "$dir/server.json"
	wait_listening "xray server" "$last_pid" "$server_port" "$dir/server.log"

	sy_port=$(free_port)
	cat >"$dir/switchyard.toml" <<EOF
[log]
level = "warn"

[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:$sy_port"

[[outbounds]]
tag = "proxy"
type = "vless"
server = "127.0.0.1:$server_port"
uuid = "$uuid"
$(switchyard_transport "$tr")
tls = { server_name = "$host", ca_file = "$work/cert.pem" }

[route]
final = "proxy"
EOF
	sy_env=()
	if [ -n "${BENCH_PPROF:-}" ]; then
		sy_env=(env SWITCHYARD_PPROF="$BENCH_PPROF")
	fi
	launch "$dir/switchyard.log" "${sy_env[@]}" "$work/switchyard" run -c "$dir/switchyard.toml"
	sy_pid=$last_pid
	wait_listening switchyard "$sy_pid" "$sy_port" "$dir/switchyard.log"
	base_target=()
	if [ -n "${BENCH_BASE_BIN:-}" ]; then
		base_port=$(free_port)
		sed "s/127.0.0.1:$sy_port/127.0.0.1:$base_port/" "$dir/switchyard.toml" >"$dir/base.toml"
		launch "$dir/base.log" "$BENCH_BASE_BIN" run -c "$dir/base.toml"
		base_pid=$last_pid
		wait_listening base "$base_pid" "$base_port" "$dir/base.log"
		base_target=(-target "base=127.0.0.1:$base_port,$base_pid")
	fi

	xc_port=$(free_port)
	cat >"$dir/client.json" <<EOF
{"log":{"loglevel":"warning","access":"none"},
 "inbounds":[{"listen":"127.0.0.1","port":$xc_port,"protocol":"socks","settings":{"auth":"noauth","udp":false}}],
 "outbounds":[{"protocol":"vless",
   "settings":{"vnext":[{"address":"127.0.0.1","port":$server_port,"users":[{"id":"$uuid","encryption":"none"}]}]},
   $(xray_stream "$tr" client)}]}
EOF
	launch "$dir/xray-client.log" "$xray" run -c "$dir/client.json"
	xc_pid=$last_pid
	wait_listening "xray client" "$xc_pid" "$xc_port" "$dir/xray-client.log"

	echo
	echo "== vless over $tr+tls: switchyard vs xray, both clients of one xray server"
	"$work/socksbench" -target "switchyard=127.0.0.1:$sy_port,$sy_pid" -target "xray=127.0.0.1:$xc_port,$xc_pid" "${base_target[@]}" "$@" || status=$?

	for log in "$dir"/*.log; do
		if grep -qiE 'error|panic|fatal|fail' "$log" 2>/dev/null; then
			echo
			echo "$(basename "$log" .log) logged errors (last 10 such lines):"
			grep -iE 'error|panic|fatal|fail' "$log" | tail -n 10
		fi
	done
	stop_all
done
exit "$status"

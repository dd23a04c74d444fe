#!/usr/bin/env bash
# Compares switchyard with Xray and sing-box as clients of the same Xray
# server, over the plain proxy protocols: for each case it starts one Xray
# server (an inbound of that protocol -> freedom), then switchyard, an Xray
# client and a sing-box client, each with a SOCKS5 (sing-box: mixed) inbound
# routed to an outbound of that protocol toward that server, and runs
# bench/socksbench against the three SOCKS5 ports. Ratios are switchyard/Xray
# and switchyard/sing-box; the last row is each client's peak resident
# memory over the run (VmHWM). Arguments go to socksbench (e.g. -quick);
# every socksbench flag also has a BENCH_* environment default.
#
# Cases:
#   vless      VLESS over plain TCP
#   vless-reality  VLESS with the xtls-rprx-vision flow over REALITY (chrome
#              ClientHello); the REALITY target site is a second inbound of
#              the same Xray server (Trojan over TLS, the bench certificate).
#              socksbench's bytes are not TLS, so Vision's padding ends after
#              a few buffers and the flow stays inside REALITY's TLS
#   vless-reality-tls  the same, with socksbench's bulk streams running TLS
#              1.3 end to end (-tls): Vision steps down once the inner TLS
#              carries application data, and the clients copy (or splice)
#              the inner records on the TCP connection
#   vmess      VMess, security aes-128-gcm, over TCP
#   trojan     Trojan over TLS
#   vless-xhttp  VLESS over XHTTP (mode auto: packet-up) over TLS, HTTP/2; no
#              sing-box client: sing-box has no XHTTP
#   vless-xhttp-h3  the same over HTTP/3 (alpn h3: QUIC); no sing-box client
#   ss         Shadowsocks 2022-blake3-aes-128-gcm over TCP
#   hysteria2  Hysteria 2 over QUIC (TCP flows only)
#   wireguard  WireGuard over UDP, userspace stacks on every side (TCP flows
#              only); socksbench's servers listen on the machine's first
#              non-loopback IPv4 address, as Xray's wireguard inbound drops
#              packets to a loopback destination; no sing-box client: the
#              pinned sing-box is built without with_wireguard
#
# Environment:
#   BENCH_CASES    which cases, in order (default "vless vless-reality vmess trojan ss hysteria2 wireguard vless-xhttp")
#   BENCH_CLIENTS  which clients run beside switchyard, in order, at most two
#                  (default "xray sing-box"; one alone gives the two-column
#                  table); "base" is another switchyard binary,
#                  BENCH_BASE_BIN, with the same config (e.g. a build of the
#                  previous commit, to compare a change in one run)
#   BENCH_ONLY     socksbench phases (default here "up,down,rate")
#   BENCH_RETRIES  socksbench retries of a disturbed run (default here 0: the
#                  Xray server is busy in every run and counts among the
#                  "other processes", so every run reads DISTURBED)
#   BENCH_CPUS     if set, every proxy runs under `taskset -c $BENCH_CPUS`
#   BENCH_KEEP     if set, keep the work folder (configs, logs, binaries)
#   BENCH_PPROF    if set (a loopback IP:port), switchyard serves
#                  net/http/pprof there (SWITCHYARD_PPROF), e.g. to take heap
#                  profiles at the peak; one case at a time, as the port is
#                  reused
#   BENCH_DEST     no effect: the script passes socksbench's -dest itself
#                  (127.0.0.1, or for wireguard the machine's address)
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
cd "$root"

ulimit -Hn 1048576 2>/dev/null || true
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
export BENCH_ONLY=${BENCH_ONLY:-up,down,rate}
export BENCH_RETRIES=${BENCH_RETRIES:-0}

work=$(mktemp -d "${TMPDIR:-/tmp}/switchyard-bench-proxies.XXXXXX")
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
password=bench-switchyard-password
host=bench.switchyard.test

# host_ipv4 prints the machine's first non-loopback IPv4 address that is up
# (scope global, so no link-local one either).
host_ipv4() {
	local a=""
	if command -v ip >/dev/null; then
		a=$(ip -4 -o addr show scope global up 2>/dev/null | awk '{ sub(/\/.*/, "", $4); print $4; exit }')
	fi
	if [ -z "$a" ] && command -v hostname >/dev/null; then
		a=$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -E '^[0-9]+(\.[0-9]+){3}$' | grep -vE '^(127|169\.254)\.' | head -n1 || true)
	fi
	if [ -z "$a" ]; then
		echo "run.sh: wireguard: no non-loopback IPv4 address on this machine; Xray's wireguard inbound drops packets to a loopback destination, so socksbench's servers need one" >&2
		return 1
	fi
	echo "$a"
}

# wg_keys PRIVATE_VAR PUBLIC_VAR: a fresh X25519 key pair, each key the base64
# of its raw 32 bytes (the last 32 bytes of openssl's DER forms).
wg_keys() {
	local pem
	pem=$(openssl genpkey -algorithm X25519)
	printf -v "$1" '%s' "$(openssl pkey -outform DER <<<"$pem" | tail -c 32 | base64)"
	printf -v "$2" '%s' "$(openssl pkey -pubout -outform DER <<<"$pem" | tail -c 32 | base64)"
}

# wait_udp NAME PID PORT LOG: a UDP server cannot be probed by a connect, so
# wait until the process holds the port (ss) or, without ss, a second.
wait_udp() {
	local name=$1 pid=$2 port=$3 log=$4
	for _ in $(seq 50); do
		if ! kill -0 "$pid" 2>/dev/null; then
			echo "run.sh: $name exited; its log:" >&2
			cat "$log" >&2
			return 1
		fi
		if ! command -v ss >/dev/null; then
			sleep 1
			return 0
		fi
		if ss -Hulpn "sport = :$port" 2>/dev/null | grep -q .; then
			return 0
		fi
		sleep 0.1
	done
	echo "run.sh: $name does not listen on UDP 127.0.0.1:$port; its log:" >&2
	cat "$log" >&2
	return 1
}

echo "building switchyard and socksbench" >&2
go build -o "$work/switchyard" ./cmd/switchyard
go build -o "$work/socksbench" ./bench/socksbench
echo "installing peers" >&2
scripts/peers.sh install
xray=$(scripts/peers.sh path xray)
singbox=$(scripts/peers.sh path sing-box)
read -r -a clients <<<"${BENCH_CLIENTS:-xray sing-box}"
for a in "${clients[@]}"; do
	case "$a" in
	xray | sing-box) ;;
	base)
		if [ ! -x "${BENCH_BASE_BIN:-}" ]; then
			echo "run.sh: client base needs BENCH_BASE_BIN, a switchyard binary" >&2
			exit 2
		fi
		;;
	*)
		echo "run.sh: unknown client $a (want xray, sing-box or base)" >&2
		exit 2
		;;
	esac
done

# A self-signed certificate both clients verify (switchyard with ca_file,
# Xray with a "verify" certificate), so both pay the same handshake.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
	-keyout "$work/key.pem" -out "$work/cert.pem" -subj "/CN=$host" \
	-addext "subjectAltName=DNS:$host" -addext "basicConstraints=critical,CA:TRUE" \
	-addext "keyUsage=digitalSignature,keyCertSign" 2>/dev/null
# The Shadowsocks 2022 key: 16 random bytes for the AES-128 method.
ss_key=$(openssl rand -base64 16)
ss_method=2022-blake3-aes-128-gcm

server_tls="\"tlsSettings\":{\"certificates\":[{\"certificateFile\":\"$work/cert.pem\",\"keyFile\":\"$work/key.pem\"}]}"
client_tls="\"tlsSettings\":{\"serverName\":\"$host\",\"certificates\":[{\"usage\":\"verify\",\"certificateFile\":\"$work/cert.pem\"}]}"
hy2_server_tls="\"tlsSettings\":{\"alpn\":[\"h3\"],\"certificates\":[{\"certificateFile\":\"$work/cert.pem\",\"keyFile\":\"$work/key.pem\"}]}"
hy2_client_tls="\"tlsSettings\":{\"serverName\":\"$host\",\"alpn\":[\"h3\"],\"certificates\":[{\"usage\":\"verify\",\"certificateFile\":\"$work/cert.pem\"}]}"
sb_tls="\"tls\":{\"enabled\":true,\"server_name\":\"$host\",\"certificate_path\":\"$work/cert.pem\"}"
sb_hy2_tls="\"tls\":{\"enabled\":true,\"server_name\":\"$host\",\"alpn\":[\"h3\"],\"certificate_path\":\"$work/cert.pem\"}"
sy_tls="tls = { server_name = \"$host\", ca_file = \"$work/cert.pem\" }"

# case_configs CASE PORT: sets label, udp (1 if the server listens on UDP),
# dest (the address socksbench's servers listen on), server_inbound (the Xray
# server's inbound object, minus listen and port), client_outbound (the Xray
# client's outbound object), sb_outbound (the sing-box client's outbound
# object, empty where sing-box has none) and sy_outbound (the keys of
# switchyard's outbound after type).
case_configs() {
	local c=$1 port=$2
	udp=0
	dest=127.0.0.1
	sb_outbound=""
	case "$c" in
	vless)
		label="vless over tcp"
		server_inbound="\"protocol\":\"vless\",\"settings\":{\"clients\":[{\"id\":\"$uuid\"}],\"decryption\":\"none\"},\"streamSettings\":{\"network\":\"tcp\",\"security\":\"none\"}"
		client_outbound="{\"protocol\":\"vless\",\"settings\":{\"vnext\":[{\"address\":\"127.0.0.1\",\"port\":$port,\"users\":[{\"id\":\"$uuid\",\"encryption\":\"none\"}]}]}}"
		sb_outbound="{\"type\":\"vless\",\"server\":\"127.0.0.1\",\"server_port\":$port,\"uuid\":\"$uuid\"}"
		sy_outbound="type = \"vless\"
server = \"127.0.0.1:$port\"
uuid = \"$uuid\""
		;;
	vmess)
		label="vmess aes-128-gcm over tcp"
		server_inbound="\"protocol\":\"vmess\",\"settings\":{\"clients\":[{\"id\":\"$uuid\",\"alterId\":0}]}"
		client_outbound="{\"protocol\":\"vmess\",\"settings\":{\"vnext\":[{\"address\":\"127.0.0.1\",\"port\":$port,\"users\":[{\"id\":\"$uuid\",\"alterId\":0,\"security\":\"aes-128-gcm\"}]}]}}"
		sb_outbound="{\"type\":\"vmess\",\"server\":\"127.0.0.1\",\"server_port\":$port,\"uuid\":\"$uuid\",\"alter_id\":0,\"security\":\"aes-128-gcm\",\"global_padding\":true}"
		sy_outbound="type = \"vmess\"
server = \"127.0.0.1:$port\"
uuid = \"$uuid\"
security = \"aes-128-gcm\""
		;;
	trojan)
		label="trojan over tls"
		server_inbound="\"protocol\":\"trojan\",\"settings\":{\"clients\":[{\"password\":\"$password\"}]},\"streamSettings\":{\"network\":\"tcp\",\"security\":\"tls\",$server_tls}"
		client_outbound="{\"protocol\":\"trojan\",\"settings\":{\"servers\":[{\"address\":\"127.0.0.1\",\"port\":$port,\"password\":\"$password\"}]},\"streamSettings\":{\"network\":\"tcp\",\"security\":\"tls\",$client_tls}}"
		sb_outbound="{\"type\":\"trojan\",\"server\":\"127.0.0.1\",\"server_port\":$port,\"password\":\"$password\",$sb_tls}"
		sy_outbound="type = \"trojan\"
server = \"127.0.0.1:$port\"
password = \"$password\"
$sy_tls"
		;;
	ss)
		label="shadowsocks $ss_method over tcp"
		server_inbound="\"protocol\":\"shadowsocks\",\"settings\":{\"method\":\"$ss_method\",\"password\":\"$ss_key\",\"network\":\"tcp\"}"
		client_outbound="{\"protocol\":\"shadowsocks\",\"settings\":{\"servers\":[{\"address\":\"127.0.0.1\",\"port\":$port,\"method\":\"$ss_method\",\"password\":\"$ss_key\"}]}}"
		sb_outbound="{\"type\":\"shadowsocks\",\"server\":\"127.0.0.1\",\"server_port\":$port,\"method\":\"$ss_method\",\"password\":\"$ss_key\"}"
		sy_outbound="type = \"shadowsocks\"
server = \"127.0.0.1:$port\"
method = \"$ss_method\"
password = \"$ss_key\""
		;;
	hysteria2)
		label="hysteria2 (quic), tcp flows"
		udp=1
		server_inbound="\"protocol\":\"hysteria\",\"settings\":{\"version\":2,\"clients\":[{\"auth\":\"$password\"}]},\"streamSettings\":{\"network\":\"hysteria\",\"hysteriaSettings\":{\"version\":2},\"security\":\"tls\",$hy2_server_tls}"
		client_outbound="{\"protocol\":\"hysteria\",\"settings\":{\"version\":2,\"address\":\"127.0.0.1\",\"port\":$port},\"streamSettings\":{\"network\":\"hysteria\",\"hysteriaSettings\":{\"version\":2,\"auth\":\"$password\"},\"security\":\"tls\",$hy2_client_tls}}"
		sb_outbound="{\"type\":\"hysteria2\",\"server\":\"127.0.0.1\",\"server_port\":$port,\"password\":\"$password\",$sb_hy2_tls}"
		sy_outbound="type = \"hysteria2\"
server = \"127.0.0.1:$port\"
password = \"$password\"
$sy_tls"
		;;
	vless-reality | vless-reality-tls)
		label="vless + vision over reality"
		if [ "$c" = vless-reality-tls ]; then
			label="vless + vision over reality, TLS 1.3 inside (vision steps down)"
		fi
		local target_port reality_key reality_pub
		target_port=$(free_port)
		wg_keys reality_key reality_pub
		reality_key=$(printf '%s' "$reality_key" | tr '+/' '-_' | tr -d '=')
		reality_pub=$(printf '%s' "$reality_pub" | tr '+/' '-_' | tr -d '=')
		# The second inbound, the target site, closes the first one's
		# object: the template adds the final brace.
		server_inbound="\"protocol\":\"vless\",\"settings\":{\"clients\":[{\"id\":\"$uuid\",\"flow\":\"xtls-rprx-vision\"}],\"decryption\":\"none\"},\"streamSettings\":{\"network\":\"tcp\",\"security\":\"reality\",\"realitySettings\":{\"target\":\"127.0.0.1:$target_port\",\"serverNames\":[\"$host\"],\"privateKey\":\"$reality_key\",\"shortIds\":[\"6ba85179e30d4fc2\"]}}},{\"listen\":\"127.0.0.1\",\"port\":$target_port,\"protocol\":\"trojan\",\"settings\":{\"clients\":[{\"password\":\"$password\"}]},\"streamSettings\":{\"network\":\"tcp\",\"security\":\"tls\",$server_tls}"
		client_outbound="{\"protocol\":\"vless\",\"settings\":{\"vnext\":[{\"address\":\"127.0.0.1\",\"port\":$port,\"users\":[{\"id\":\"$uuid\",\"encryption\":\"none\",\"flow\":\"xtls-rprx-vision\"}]}]},\"streamSettings\":{\"network\":\"tcp\",\"security\":\"reality\",\"realitySettings\":{\"serverName\":\"$host\",\"fingerprint\":\"chrome\",\"password\":\"$reality_pub\",\"shortId\":\"6ba85179e30d4fc2\",\"spiderX\":\"/\"}}}"
		sb_outbound="{\"type\":\"vless\",\"server\":\"127.0.0.1\",\"server_port\":$port,\"uuid\":\"$uuid\",\"flow\":\"xtls-rprx-vision\",\"tls\":{\"enabled\":true,\"server_name\":\"$host\",\"utls\":{\"enabled\":true,\"fingerprint\":\"chrome\"},\"reality\":{\"enabled\":true,\"public_key\":\"$reality_pub\",\"short_id\":\"6ba85179e30d4fc2\"}}}"
		sy_outbound="type = \"vless\"
server = \"127.0.0.1:$port\"
uuid = \"$uuid\"
flow = \"xtls-rprx-vision\"
tls = { reality = { public_key = \"$reality_pub\", short_id = \"6ba85179e30d4fc2\", server_name = \"$host\", fingerprint = \"chrome\" } }"
		;;
	vless-xhttp)
		label="vless over xhttp (auto: packet-up) over tls"
		server_inbound="\"protocol\":\"vless\",\"settings\":{\"clients\":[{\"id\":\"$uuid\"}],\"decryption\":\"none\"},\"streamSettings\":{\"network\":\"xhttp\",\"xhttpSettings\":{\"path\":\"/xh\",\"mode\":\"auto\"},\"security\":\"tls\",$server_tls}"
		client_outbound="{\"protocol\":\"vless\",\"settings\":{\"vnext\":[{\"address\":\"127.0.0.1\",\"port\":$port,\"users\":[{\"id\":\"$uuid\",\"encryption\":\"none\"}]}]},\"streamSettings\":{\"network\":\"xhttp\",\"xhttpSettings\":{\"path\":\"/xh\",\"mode\":\"auto\"},\"security\":\"tls\",$client_tls}}"
		sy_outbound="type = \"vless\"
server = \"127.0.0.1:$port\"
uuid = \"$uuid\"
transport = { type = \"xhttp\", path = \"/xh\", mode = \"auto\" }
$sy_tls"
		;;
	vless-xhttp-h3)
		label="vless over xhttp (auto: packet-up) over http/3"
		udp=1
		server_inbound="\"protocol\":\"vless\",\"settings\":{\"clients\":[{\"id\":\"$uuid\"}],\"decryption\":\"none\"},\"streamSettings\":{\"network\":\"xhttp\",\"xhttpSettings\":{\"path\":\"/xh\",\"mode\":\"auto\"},\"security\":\"tls\",$hy2_server_tls}"
		client_outbound="{\"protocol\":\"vless\",\"settings\":{\"vnext\":[{\"address\":\"127.0.0.1\",\"port\":$port,\"users\":[{\"id\":\"$uuid\",\"encryption\":\"none\"}]}]},\"streamSettings\":{\"network\":\"xhttp\",\"xhttpSettings\":{\"path\":\"/xh\",\"mode\":\"auto\"},\"security\":\"tls\",$hy2_client_tls}}"
		sy_outbound="type = \"vless\"
server = \"127.0.0.1:$port\"
uuid = \"$uuid\"
transport = { type = \"xhttp\", path = \"/xh\", mode = \"auto\" }
tls = { server_name = \"$host\", ca_file = \"$work/cert.pem\", alpn = [\"h3\"] }"
		;;
	wireguard)
		# One server peer per client, each with its own key and tunnel
		# address: two clients sharing a key would roam the one peer's
		# endpoint between them and break each other's sessions. Both
		# clients: MTU 1408 (switchyard's default), every address routed
		# into the tunnel, no keepalive, no preshared key. Xray's client
		# gets noKernelTun, so it runs wireguard-go on a gVisor stack as
		# switchyard does, not a kernel TUN (which, as root, it would pick
		# and would also change the host's routing).
		label="wireguard (userspace), tcp flows"
		udp=1
		dest=$(host_ipv4)
		local server_key server_pub sy_key sy_pub xc_key xc_pub
		wg_keys server_key server_pub
		wg_keys sy_key sy_pub
		wg_keys xc_key xc_pub
		server_inbound="\"protocol\":\"wireguard\",\"settings\":{\"secretKey\":\"$server_key\",\"address\":[\"10.7.0.1/32\"],\"mtu\":1408,\"peers\":[{\"publicKey\":\"$sy_pub\",\"allowedIPs\":[\"10.7.0.2/32\"]},{\"publicKey\":\"$xc_pub\",\"allowedIPs\":[\"10.7.0.3/32\"]}]}"
		client_outbound="{\"protocol\":\"wireguard\",\"settings\":{\"secretKey\":\"$xc_key\",\"address\":[\"10.7.0.3/32\"],\"mtu\":1408,\"noKernelTun\":true,\"peers\":[{\"publicKey\":\"$server_pub\",\"endpoint\":\"127.0.0.1:$port\",\"allowedIPs\":[\"0.0.0.0/0\",\"::/0\"]}]}}"
		sy_outbound="type = \"wireguard\"
endpoint = \"127.0.0.1:$port\"
private_key = \"$sy_key\"
peer_public_key = \"$server_pub\"
addresses = [\"10.7.0.2/32\"]
mtu = 1408
allowed_ips = [\"0.0.0.0/0\", \"::/0\"]"
		;;
	esac
}

echo "host: $(nproc) CPUs, $(uname -sr), $(go version | cut -d' ' -f3), ulimit -n $(ulimit -n)"
echo "switchyard: $("$work/switchyard" version 2>&1 | head -n1)"
echo "xray: $("$xray" version 2>&1 | head -n1)"
echo "sing-box: $("$singbox" version 2>&1 | head -n1)"
status=0
read -r -a cases <<<"${BENCH_CASES:-vless vless-reality vmess trojan ss hysteria2 wireguard vless-xhttp}"
for c in "${cases[@]}"; do
	case "$c" in
	vless | vless-reality | vless-reality-tls | vmess | trojan | ss | hysteria2 | wireguard | vless-xhttp | vless-xhttp-h3) ;;
	*)
		echo "run.sh: unknown case $c (want vless, vless-reality, vless-reality-tls, vmess, trojan, ss, hysteria2, wireguard, vless-xhttp or vless-xhttp-h3)" >&2
		exit 2
		;;
	esac
	dir="$work/$c"
	mkdir -p "$dir"

	server_port=$(free_port)
	case_configs "$c" "$server_port"
	cat >"$dir/server.json" <<EOF
{"log":{"loglevel":"warning","access":"none"},
 "inbounds":[{"listen":"127.0.0.1","port":$server_port,$server_inbound}],
 "outbounds":[{"protocol":"freedom"}]}
EOF
	launch "$dir/server.log" "$xray" run -c "$dir/server.json"
	if [ "$udp" = 1 ]; then
		wait_udp "xray server" "$last_pid" "$server_port" "$dir/server.log"
	else
		wait_listening "xray server" "$last_pid" "$server_port" "$dir/server.log"
	fi

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
$sy_outbound

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

	targets=(-target "switchyard=127.0.0.1:$sy_port,$sy_pid")
	names=switchyard
	for a in "${clients[@]}"; do
		case "$a" in
		xray)
			xc_port=$(free_port)
			cat >"$dir/client.json" <<EOF
{"log":{"loglevel":"warning","access":"none"},
 "inbounds":[{"listen":"127.0.0.1","port":$xc_port,"protocol":"socks","settings":{"auth":"noauth","udp":false}}],
 "outbounds":[$client_outbound]}
EOF
			launch "$dir/xray-client.log" "$xray" run -c "$dir/client.json"
			wait_listening "xray client" "$last_pid" "$xc_port" "$dir/xray-client.log"
			targets+=(-target "xray=127.0.0.1:$xc_port,$last_pid")
			names+=" vs xray"
			;;
		base)
			base_port=$(free_port)
			sed "s/127.0.0.1:$sy_port/127.0.0.1:$base_port/" "$dir/switchyard.toml" >"$dir/base.toml"
			launch "$dir/base.log" "$BENCH_BASE_BIN" run -c "$dir/base.toml"
			wait_listening "base switchyard" "$last_pid" "$base_port" "$dir/base.log"
			targets+=(-target "base=127.0.0.1:$base_port,$last_pid")
			names+=" vs base"
			;;
		sing-box)
			if [ -z "$sb_outbound" ]; then
				echo "run.sh: $c: no sing-box client (the pinned sing-box is built without with_wireguard; sing-box has no XHTTP)" >&2
				continue
			fi
			sb_port=$(free_port)
			cat >"$dir/sing-box-client.json" <<EOF
{"log":{"level":"warn"},
 "inbounds":[{"type":"mixed","listen":"127.0.0.1","listen_port":$sb_port}],
 "outbounds":[$sb_outbound]}
EOF
			launch "$dir/sing-box-client.log" "$singbox" run -c "$dir/sing-box-client.json"
			wait_listening "sing-box client" "$last_pid" "$sb_port" "$dir/sing-box-client.log"
			targets+=(-target "sing-box=127.0.0.1:$sb_port,$last_pid")
			names+=" vs sing-box"
			;;
		esac
	done

	echo
	echo "== $label: $names, clients of one xray server"
	inner=()
	if [ "$c" = vless-reality-tls ]; then
		inner=(-tls)
	fi
	"$work/socksbench" "${targets[@]}" -dest "$dest" "${inner[@]}" "$@" || status=$?

	for log in "$dir"/*.log; do
		# Xray warns at start that Trojan and Shadowsocks are deprecated
		# (through common/errors): not an error of the run.
		if grep -iE 'error|panic|fatal|fail' "$log" 2>/dev/null | grep -qv 'is deprecated'; then
			echo
			echo "$(basename "$log" .log) logged errors (last 10 such lines):"
			grep -iE 'error|panic|fatal|fail' "$log" | grep -v 'is deprecated' | tail -n 10
		fi
	done
	stop_all
done
exit "$status"

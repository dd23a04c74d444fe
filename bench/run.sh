#!/usr/bin/env bash
# Compares switchyard with Xray side by side in one run: builds switchyard
# and the harness, installs the pinned Xray (scripts/peers.sh), starts both
# with equivalent configs (a SOCKS5 inbound on loopback routed to direct /
# freedom), runs bench/socksbench against both, stops them and prints the
# table. Arguments go to socksbench (e.g. -quick, -bulk 20s, -only rate);
# every socksbench flag also has a BENCH_* environment default.
#
# Environment:
#   BENCH_TARGETS   which proxies to start, in order (default "switchyard xray";
#                   the first is the subject, ratios are first/second)
#                   "base" is BENCH_BASE_BIN, another switchyard binary with
#                   the same config (a build of an earlier commit, to see
#                   what a change costs in one run)
#   BENCH_CPUS      if set, both proxies run under `taskset -c $BENCH_CPUS`
#   BENCH_KEEP      if set, keep the work folder (configs, logs, binaries)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
cd "$root"

# The memory phase holds 2 x 2,000 connections with both ends in the harness
# and both ends in the proxy, and at thousands of connections a second a
# proxy also holds closing connections and Go's cached splice pipes:
# bench_work raises the descriptor limit (Xray's own service unit sets a
# million).
bench_work direct

read -r -a targets <<<"${BENCH_TARGETS:-switchyard xray}"

echo "building socksbench" >&2
go build -o "$work/socksbench" ./bench/socksbench

# A free loopback port: random in 20000-29999, not currently accepting.



first_line() { # cmd... : the first line of its output, never failing
	local out
	out=$("$@" 2>&1) || true
	echo "${out%%$'\n'*}"
}

start_switchyard() {
	echo "building switchyard" >&2
	go build -o "$work/switchyard" ./cmd/switchyard
	local port
	port=$(free_port)
	cat >"$work/switchyard.toml" <<EOF
[log]
level = "warn"

[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:$port"

[route]
final = "direct"
EOF
	launch "$work/switchyard.log" "$work/switchyard" run -c "$work/switchyard.toml"
	wait_listening switchyard "$last_pid" "$port" "$work/switchyard.log"
	versions+=("switchyard: $(first_line "$work/switchyard" version)")
	bench_args+=(-target "switchyard=127.0.0.1:$port,$last_pid")
}

start_xray() {
	echo "installing peers" >&2
	scripts/peers.sh install
	local bin port
	bin=$(scripts/peers.sh path xray)
	port=$(free_port)
	# access "none": Xray would otherwise log every connection to stdout,
	# which switchyard at level warn does not do.
	cat >"$work/xray.json" <<EOF
{
  "log": { "loglevel": "warning", "access": "none" },
  "inbounds": [
    {
      "tag": "socks-in",
      "listen": "127.0.0.1",
      "port": $port,
      "protocol": "socks",
      "settings": { "auth": "noauth", "udp": false }
    }
  ],
  "outbounds": [
    { "tag": "direct", "protocol": "freedom" }
  ]
}
EOF
	launch "$work/xray.log" "$bin" run -c "$work/xray.json"
	wait_listening xray "$last_pid" "$port" "$work/xray.log"
	versions+=("xray: $(first_line "$bin" version)")
	bench_args+=(-target "xray=127.0.0.1:$port,$last_pid")
}

# start_base runs BENCH_BASE_BIN, another switchyard binary (say, a build of
# an earlier commit), with the same configuration as switchyard's.
start_base() {
	if [ ! -x "${BENCH_BASE_BIN:-}" ]; then
		echo "run.sh: target base needs BENCH_BASE_BIN, a switchyard binary" >&2
		exit 2
	fi
	local port
	port=$(free_port)
	cat >"$work/base.toml" <<EOF
[log]
level = "warn"

[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:$port"

[route]
final = "direct"
EOF
	launch "$work/base.log" "$BENCH_BASE_BIN" run -c "$work/base.toml"
	wait_listening base "$last_pid" "$port" "$work/base.log"
	versions+=("base: $(first_line "$BENCH_BASE_BIN" version)")
	bench_args+=(-target "base=127.0.0.1:$port,$last_pid")
}

versions=()
bench_args=()
for t in "${targets[@]}"; do
	case "$t" in
	switchyard) start_switchyard ;;
	xray) start_xray ;;
	base) start_base ;;
	*)
		echo "run.sh: unknown target $t (want switchyard, xray or base)" >&2
		exit 2
		;;
	esac
done

echo "host: $(nproc) CPUs, $(uname -sr), $(go version | cut -d' ' -f3), ulimit -n $(ulimit -n)"
printf '%s\n' "${versions[@]}"
status=0
"$work/socksbench" "${bench_args[@]}" "$@" || status=$?

# A proxy that logged errors during the run says so here.
for t in "${targets[@]}"; do
	log="$work/$t.log"
	if grep -qiE 'error|panic|fatal|fail' "$log" 2>/dev/null; then
		echo
		echo "$t logged errors (last 10 such lines):"
		grep -iE 'error|panic|fatal|fail' "$log" | tail -n 10
	fi
done
exit "$status"

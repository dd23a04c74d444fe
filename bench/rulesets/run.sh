#!/usr/bin/env bash
# Loads one rule set of BENCH_SUFFIXES domain suffixes and BENCH_CIDRS CIDRs,
# as a .srs compiled by the pinned sing-box, in switchyard and in sing-box,
# in one run and by one method: each runs ("run -c") with the set as a
# local rule set named by a route rule, and after BENCH_SETTLE seconds its
# peak (VmHWM) and held (VmRSS) resident memory are read from /proc; each
# also runs once with the same configuration minus the rule set, so that
# the set's own share shows. BENCH_ROUNDS (default 1) repeats each run and
# keeps the lowest figures. Prints both and their ratio (target:
# switchyard <= 0.7x sing-box), then the per-flow match and the load
# benchmarks (ns/op, allocs/op, bytes held). See bench/README.md ("Rule-set
# files").
set -euo pipefail

cd "$(dirname "$0")/../.."
SUFFIXES=${BENCH_SUFFIXES:-200000}
CIDRS=${BENCH_CIDRS:-50000}
SETTLE=${BENCH_SETTLE:-4}
ROUNDS=${BENCH_ROUNDS:-1}
work=$(mktemp -d)
[ -n "${BENCH_KEEP:-}" ] || trap 'rm -rf "$work"' EXIT

go build -o "$work/switchyard" ./cmd/switchyard
scripts/peers.sh install >/dev/null
singbox=$(scripts/peers.sh path sing-box)

awk -v n="$SUFFIXES" -v m="$CIDRS" 'BEGIN {
	printf "{\"version\": 3, \"rules\": [{\"domain_suffix\": ["
	for (i = 0; i < n; i++) printf "%s\"d%d.example%d.com\"", (i ? "," : ""), i, i % 97
	printf "]}, {\"ip_cidr\": ["
	for (i = 0; i < m; i++) printf "%s\"%d.%d.%d.0/24\"", (i ? "," : ""), 1 + int(i / 4096), int(i / 16) % 256, (i * 16) % 256
	printf "]}]}\n"
}' >"$work/set.json"
"$singbox" rule-set compile --output "$work/set.srs" "$work/set.json"

cat >"$work/switchyard.toml" <<TOML
[log]
level = "error"

[[rule_sets]]
tag = "big"
path = "set.srs"
format = "srs"

[[rules]]
rule_set = ["big"]
outbound = "direct"
TOML
cat >"$work/switchyard-base.toml" <<TOML
[log]
level = "error"

[[rules]]
domain = ["a.example"]
outbound = "direct"
TOML

cat >"$work/sing-box.json" <<JSON
{"log": {"level": "error"},
 "outbounds": [{"type": "direct", "tag": "direct"}],
 "route": {"rule_set": [{"type": "local", "tag": "big", "format": "binary", "path": "$work/set.srs"}],
           "rules": [{"rule_set": "big", "outbound": "direct"}]}}
JSON
cat >"$work/sing-box-base.json" <<JSON
{"log": {"level": "error"},
 "outbounds": [{"type": "direct", "tag": "direct"}],
 "route": {"rules": [{"domain": "a.example", "outbound": "direct"}]}}
JSON

# measure NAME CMD...: runs CMD with only PATH and HOME in its environment,
# waits SETTLE seconds and prints "VmHWM VmRSS" in KiB.
measure() {
	local name=$1
	shift
	env -i PATH="$PATH" HOME="$HOME" "$@" >"$work/$name.log" 2>&1 &
	local pid=$!
	sleep "$SETTLE"
	if ! kill -0 "$pid" 2>/dev/null; then
		echo "rulesets/run.sh: $name exited:" >&2
		cat "$work/$name.log" >&2
		exit 1
	fi
	awk '/^VmHWM:/ { h = $2 } /^VmRSS:/ { r = $2 } END { print h, r }' "/proc/$pid/status"
	kill "$pid"
	wait "$pid" 2>/dev/null || true
}

# lowest NAME CMD...: measure, ROUNDS times, keeping each figure's lowest.
lowest() {
	local best_h= best_r= h r
	for _ in $(seq "$ROUNDS"); do
		read -r h r < <(measure "$@")
		if [ -z "$best_h" ] || [ "$h" -lt "$best_h" ]; then best_h=$h; fi
		if [ -z "$best_r" ] || [ "$r" -lt "$best_r" ]; then best_r=$r; fi
	done
	echo "$best_h $best_r"
}

read -r sy_h sy_r < <(lowest sy "$work/switchyard" run -c "$work/switchyard.toml")
read -r sy0_h sy0_r < <(lowest sy0 "$work/switchyard" run -c "$work/switchyard-base.toml")
read -r sb_h sb_r < <(lowest sb "$singbox" run -c "$work/sing-box.json")
read -r sb0_h sb0_r < <(lowest sb0 "$singbox" run -c "$work/sing-box-base.json")

awk -v s="$SUFFIXES" -v c="$CIDRS" -v t="$SETTLE" \
	-v syh="$sy_h" -v syr="$sy_r" -v sy0h="$sy0_h" -v sy0r="$sy0_r" \
	-v sbh="$sb_h" -v sbr="$sb_r" -v sb0h="$sb0_h" -v sb0r="$sb0_r" 'BEGIN {
	printf "rule set: %d domain suffixes + %d CIDRs (.srs), each process read %d s after start\n", s, c, t
	printf "%-28s %12s %12s %7s\n", "KiB", "switchyard", "sing-box", "ratio"
	printf "%-28s %12d %12d %7.2f\n", "peak RSS (VmHWM)", syh, sbh, syh / sbh
	printf "%-28s %12d %12d %7.2f\n", "held RSS (VmRSS)", syr, sbr, syr / sbr
	printf "%-28s %12d %12d\n", "peak RSS without the set", sy0h, sb0h
	printf "%-28s %12d %12d\n", "held RSS without the set", sy0r, sb0r
	printf "%-28s %12d %12d %7.2f\n", "the set: peak - without", syh - sy0h, sbh - sb0h, (syh - sy0h) / (sbh - sb0h)
	printf "%-28s %12d %12d %7.2f\n", "the set: held - without", syr - sy0r, sbr - sb0r, (syr - sy0r) / (sbr - sb0r)
	printf "target: peak and held RSS <= 0.70x sing-box: %s\n", (syh <= 0.7 * sbh && syr <= 0.7 * sbr) ? "met" : "not met"
}'

BENCH_SRS="$work/set.srs" go test -run '^$' -bench 'MatchAtScale|MatchMixedCIDRs|LoadSRS' -benchtime "${BENCH_TIME:-1s}" ./ruleset

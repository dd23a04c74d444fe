#!/usr/bin/env bash
# Loads one rule set of BENCH_SUFFIXES domain suffixes and BENCH_CIDRS CIDRs,
# as a .srs compiled by the pinned sing-box, in switchyard (check, which reads
# and compiles every [[rule_sets]] file) and in sing-box (run, which loads
# local rule sets at start), in one run, and prints the resident memory of
# each and their ratio (target: switchyard <= 0.7x). Then the per-flow match
# benchmark (ns/op, allocs/op, bytes held). See bench/README.md ("Rule sets").
set -euo pipefail

cd "$(dirname "$0")/../.."
SUFFIXES=${BENCH_SUFFIXES:-200000}
CIDRS=${BENCH_CIDRS:-50000}
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
[[rule_sets]]
tag = "big"
path = "set.srs"
format = "srs"

[[rules]]
rule_set = ["big"]
outbound = "direct"
TOML

cat >"$work/sing-box.json" <<JSON
{"log": {"level": "error"},
 "outbounds": [{"type": "direct", "tag": "direct"}],
 "route": {"rule_set": [{"type": "local", "tag": "big", "format": "binary", "path": "$work/set.srs"}],
           "rules": [{"rule_set": "big", "outbound": "direct"}]}}
JSON

env -i PATH="$PATH" HOME="$HOME" /usr/bin/time -f "%M" -o "$work/sy.time" \
	"$work/switchyard" check -c "$work/switchyard.toml" >"$work/sy.log" 2>&1 || {
	echo "rulesets/run.sh: switchyard check failed:" >&2
	cat "$work/sy.log" >&2
	exit 1
}
sy_kib=$(cat "$work/sy.time")

env -i PATH="$PATH" HOME="$HOME" "$singbox" run -c "$work/sing-box.json" >"$work/sb.log" 2>&1 &
sb_pid=$!
sleep "${BENCH_SETTLE:-4}"
if ! kill -0 "$sb_pid" 2>/dev/null; then
	echo "rulesets/run.sh: sing-box exited:" >&2
	cat "$work/sb.log" >&2
	exit 1
fi
sb_kib=$(awk '/^VmHWM:/ { print $2 }' "/proc/$sb_pid/status")
kill "$sb_pid"
wait "$sb_pid" 2>/dev/null || true

awk -v s="$SUFFIXES" -v c="$CIDRS" -v sy="$sy_kib" -v sb="$sb_kib" 'BEGIN {
	printf "rule set: %d domain suffixes + %d CIDRs (.srs)\n", s, c
	printf "%-10s %12s\n", "", "peak RSS KiB"
	printf "%-10s %12d\n", "switchyard", sy
	printf "%-10s %12d\n", "sing-box", sb
	printf "ratio switchyard/sing-box: %.2f (target <= 0.70)\n", sy / sb
}'

go test -run '^$' -bench MatchAtScale -benchtime "${BENCH_TIME:-1s}" ./ruleset

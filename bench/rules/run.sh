#!/usr/bin/env bash
# Loads one large rule set with switchyard's check and with sing-box's check,
# in one run, and prints peak RSS and time for each and their ratio. See
# bench/README.md ("Rule sets").
set -euo pipefail

cd "$(dirname "$0")/../.."
RULES=${BENCH_RULES:-200000}
ROUNDS=${BENCH_RULE_ROUNDS:-1}
work=$(mktemp -d)
[ -n "${BENCH_KEEP:-}" ] || trap 'rm -rf "$work"' EXIT

go build -o "$work/switchyard" ./cmd/switchyard
go run ./bench/rules/gen -n "$RULES" -toml "$work/rules.toml" -singbox "$work/rules.json"
scripts/peers.sh install
singbox=$(scripts/peers.sh path sing-box)

# measure NAME CMD... prints "peak_kib seconds" of the best of ROUNDS runs
# (lowest time; its peak RSS with it), under the same bare environment.
measure() {
	local name=$1 best_t="" best_m=""
	shift
	for _ in $(seq "$ROUNDS"); do
		env -i PATH="$PATH" HOME="$HOME" /usr/bin/time -f "%M %e" -o "$work/$name.time" "$@" >"$work/$name.log" 2>&1 || {
			echo "rules/run.sh: $name check failed:" >&2
			cat "$work/$name.log" >&2
			exit 1
		}
		read -r m t <"$work/$name.time"
		if [ -z "$best_t" ] || awk -v a="$t" -v b="$best_t" 'BEGIN { exit !(a < b) }'; then
			best_t=$t best_m=$m
		fi
	done
	echo "$best_m $best_t"
}

read -r sy_m sy_t < <(measure switchyard "$work/switchyard" check -c "$work/rules.toml")
read -r sb_m sb_t < <(measure sing-box "$singbox" check -c "$work/rules.json")

awk -v n="$RULES" -v sym="$sy_m" -v syt="$sy_t" -v sbm="$sb_m" -v sbt="$sb_t" \
	-v tb="$(stat -c %s "$work/rules.toml")" -v jb="$(stat -c %s "$work/rules.json")" 'BEGIN {
	printf "check of %d rules (switchyard TOML %.1f MB, sing-box JSON %.1f MB); ratio = switchyard/sing-box\n", n, tb/1e6, jb/1e6
	printf "%28s %12s %12s %7s %7s\n", "metric", "switchyard", "sing-box", "ratio", "better"
	printf "%28s %12.1f %12.1f %6.2fx %7s\n", "peak RSS MiB", sym/1024, sbm/1024, sym/sbm, "lower"
	printf "%28s %12.0f %12.0f %6.2fx %7s\n", "peak RSS bytes per rule", sym*1024/n, sbm*1024/n, sym/sbm, "lower"
	printf "%28s %12.2f %12.2f %6.2fx %7s\n", "time s", syt, sbt, (sbt > 0 ? syt/sbt : 0), "lower"
	printf "%28s %12.1f %12.1f %6.2fx %7s\n", "time us per rule", syt*1e6/n, sbt*1e6/n, (sbt > 0 ? syt/sbt : 0), "lower"
	printf "target: peak RSS per rule <= 1.0x sing-box: %.2fx %s\n", sym/sbm, (sym <= sbm ? "met" : "NOT met")
}'

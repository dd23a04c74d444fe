#!/usr/bin/env bash
# The whole test suite: builds the pinned interop peers into a cache folder
# (once), then runs every test, the race detector on, and then, without it,
# the allocation tests it makes skip.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/peers.sh install
# The SOCKS4 end-to-end tests drive curl, a real SOCKS4/4a client.
command -v curl >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq curl; }
go vet ./...
go test -race -timeout 25m -count=1 ./... "$@"

# Allocation counts mean nothing under the race detector (it allocates on
# its own), so these tests skip there. Run them again without it, and fail
# if one of them did not run.
alloc_tests=(TestSteadyStateAllocations TestWritePacketAddsNoAllocation TestWritesDoNotAllocate TestCopyBufFitAllocs)
alloc_run="^($(IFS='|'; echo "${alloc_tests[*]}"))\$"
if ! out=$(go test -count=1 -v -run "$alloc_run" ./transport/ ./outbound/wireguard/ ./outbound/shadowsocks/ ./relay/ 2>&1); then
	echo "$out"
	exit 1
fi
for t in "${alloc_tests[@]}"; do
	if ! grep -q -- "--- PASS: $t " <<<"$out"; then
		echo "$out"
		echo "scripts/test.sh: allocation test $t did not run" >&2
		exit 1
	fi
done
echo "allocation tests without the race detector: ok"

#!/usr/bin/env bash
# The whole test suite: builds the pinned interop peers into a cache folder
# (once), then runs every test, the race detector on, and then, without it,
# the allocation tests it makes skip.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/peers.sh install
# The SOCKS4 end-to-end tests drive curl, a real SOCKS4/4a client.
command -v curl >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq curl; }
# The latency tests (test/netem) build a namespace and a delayed link with ip and tc.
{ command -v ip && command -v tc; } >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2; }
# The TUN tests (test/tun) run switchyard's TUN inbound in namespaces made with
# ip (iproute2, above); they need the kernel's TUN device, and setpriv
# (util-linux) to run it without CAP_NET_ADMIN.
[ -c /dev/net/tun ] || modprobe tun
command -v setpriv >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq util-linux; }
# The dashboard test drives metacubexd in Debian's headless Chromium.
command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }
go vet ./...
go test -race -timeout 25m -count=1 ./... "$@"

# Allocation counts and heap measures mean nothing under the race detector
# (it allocates on its own, its pools drop buffers at random, its shadow
# memory distorts the heap), so these tests skip there or are built without
# it only. Run them again without it, package by package, and fail if one of
# them did not run.
alloc_tests=(
	"./transport/ TestSteadyStateAllocations"
	"./relay/ TestCopyBufFitAllocs"
	"./netx/ TestDatagramWaiterFromAllocatesNothing TestPollReadAllocatesNothing"
	"./outbound/shadowsocks/ TestWritesDoNotAllocate TestPacketLinkWriteAllocations"
	"./outbound/wireguard/ TestWritePacketAddsNoAllocation TestWaitPacketAllocatesNothing TestIdleLinkMemory"
	"./outbound/internal/proxyconn/ TestIdleLinkMemory"
	"./outbound/internal/xudp/ TestPacketsDoNotAllocate"
	"./outbound/trojan/ TestPacketsDoNotAllocate"
	"./outbound/vless/ TestPacketsDoNotAllocate"
	"./outbound/socks/ TestAssociateAllocations TestIdleLinkMemory"
	"./outbound/vmess/ TestPacketsAllocateNothing TestIdleLinkMemory"
	"./metrics/ TestDialHooksAllocateNothing"
)
for entry in "${alloc_tests[@]}"; do
	read -r pkg tests <<<"$entry"
	read -r -a names <<<"$tests"
	alloc_run="^($(IFS='|'; echo "${names[*]}"))\$"
	if ! out=$(go test -count=1 -v -run "$alloc_run" "$pkg" 2>&1); then
		echo "$out"
		exit 1
	fi
	for t in "${names[@]}"; do
		if ! grep -q -- "--- PASS: $t " <<<"$out"; then
			echo "$out"
			echo "scripts/test.sh: allocation test $t in $pkg did not run" >&2
			exit 1
		fi
	done
done
echo "allocation tests without the race detector: ok"

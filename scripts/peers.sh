#!/usr/bin/env bash
# Builds the third-party peers the tests and benchmarks run against, at pinned
# versions, into a cache folder, once. Prints nothing but errors; exports
# nothing: callers read the paths with `scripts/peers.sh path NAME`.
set -euo pipefail

XRAY_VERSION=v1.260327.0
SINGBOX_VERSION=v1.14.1
SINGBOX_TAGS=with_quic,with_utls,with_gvisor
CACHE=${SWITCHYARD_PEERS:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/switchyard-peers}

xray_bin() { echo "$CACHE/xray-$XRAY_VERSION/xray"; }
singbox_bin() { echo "$CACHE/sing-box-$SINGBOX_VERSION/sing-box"; }
# sing-box with its Clash API (with_clash_api): only bench/api needs it, so
# `install` leaves it out; `install sing-box-clashapi` builds it.
singbox_clashapi_bin() { echo "$CACHE/sing-box-clashapi-$SINGBOX_VERSION/sing-box"; }

install_xray() {
	local bin
	bin=$(xray_bin)
	[ -x "$bin" ] && return 0
	local dir
	dir=$(dirname "$bin")
	mkdir -p "$dir"
	# Build outside this module so its go.mod is not consulted.
	(cd "$dir" && GOFLAGS=-buildvcs=false GOBIN="$dir" go install "github.com/xtls/xray-core/main@$XRAY_VERSION")
	mv "$dir/main" "$bin"
}

install_singbox() {
	local bin dir
	bin=$(singbox_bin)
	[ -x "$bin" ] && return 0
	dir=$(dirname "$bin")
	mkdir -p "$dir"
	(cd "$dir" && GOFLAGS=-buildvcs=false GOBIN="$dir" go install -tags "$SINGBOX_TAGS" "github.com/sagernet/sing-box/cmd/sing-box@$SINGBOX_VERSION")
}

install_singbox_clashapi() {
	local bin dir
	bin=$(singbox_clashapi_bin)
	[ -x "$bin" ] && return 0
	dir=$(dirname "$bin")
	mkdir -p "$dir"
	(cd "$dir" && GOFLAGS=-buildvcs=false GOBIN="$dir" go install -tags "$SINGBOX_TAGS,with_clash_api" "github.com/sagernet/sing-box/cmd/sing-box@$SINGBOX_VERSION")
}

case "${1:-install}" in
install)
	case "${2:-}" in
	"")
		install_xray
		install_singbox
		;;
	xray) install_xray ;;
	sing-box) install_singbox ;;
	sing-box-clashapi) install_singbox_clashapi ;;
	*) echo "peers.sh: unknown peer ${2:-}" >&2; exit 2 ;;
	esac
	;;
path)
	case "${2:-}" in
	xray) xray_bin ;;
	sing-box) singbox_bin ;;
	sing-box-clashapi) singbox_clashapi_bin ;;
	*) echo "peers.sh: unknown peer ${2:-}" >&2; exit 2 ;;
	esac
	;;
*)
	echo "usage: scripts/peers.sh [install [xray | sing-box | sing-box-clashapi] | path NAME]" >&2
	exit 2
	;;
esac

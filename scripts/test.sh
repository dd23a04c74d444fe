#!/usr/bin/env bash
# The whole test suite: builds the pinned interop peers into a cache folder
# (once), then runs every test, the race detector on.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/peers.sh install
go vet ./...
go test -race -timeout 25m -count=1 ./... "$@"

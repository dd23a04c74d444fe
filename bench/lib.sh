# Shell functions the bench scripts share. Source it after setting `pids`
# (an array the caller kills on exit).

# free_port prints a loopback TCP port nothing listens on.
free_port() {
	local p
	for _ in $(seq 100); do
		p=$((20000 + RANDOM % 10000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	echo "run.sh: no free port found" >&2
	return 1
}

# launch starts a process in the background with the same environment for
# every one: nothing inherited but PATH and HOME, so no GOMAXPROCS, GOGC,
# GOMEMLIMIT or GODEBUG tunes one of them. It sets last_pid and appends it to
# pids.
launch() { # log cmd...
	local log=$1
	shift
	local pre=()
	if [ -n "${BENCH_CPUS:-}" ]; then
		pre=(taskset -c "$BENCH_CPUS")
	fi
	env -i PATH="$PATH" HOME="$HOME" "${pre[@]}" "$@" >"$log" 2>&1 &
	last_pid=$!
	pids+=("$last_pid")
}

# wait_listening waits until pid accepts TCP on 127.0.0.1:port, printing its
# log if it exits or never listens.
wait_listening() { # name pid port log
	local name=$1 pid=$2 port=$3 log=$4
	for _ in $(seq 200); do
		if ! kill -0 "$pid" 2>/dev/null; then
			echo "run.sh: $name exited; its log:" >&2
			cat "$log" >&2
			return 1
		fi
		if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			return 0
		fi
		sleep 0.1
	done
	echo "run.sh: $name does not listen on 127.0.0.1:$port; its log:" >&2
	cat "$log" >&2
	return 1
}

# bench_work makes the work folder ($work, named after $1), raises the
# descriptor limit for everything started from here (the memory phases hold
# thousands of connections with both ends on this machine; ask for a
# million, else as much as allowed), and sets the exit trap that stops every
# process in pids and removes the folder (kept with BENCH_KEEP set).
bench_work() { # name
	ulimit -Hn 1048576 2>/dev/null || true
	ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
	work=$(mktemp -d "${TMPDIR:-/tmp}/switchyard-bench-$1.XXXXXX")
	pids=()
	trap bench_cleanup EXIT
}

bench_cleanup() {
	local p
	for p in "${pids[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	if [ -n "${BENCH_KEEP:-}" ]; then
		echo "work folder kept: $work" >&2
	else
		rm -rf "$work"
	fi
}

#!/usr/bin/env bash
# Every module's tests, as CI runs them: go vet and go test -race in the
# library and in each example module, plus the runs that must not use -race.
#
#   ./test.sh              # everything (BROKERCORE_LONG=1 for the long soaks)
#
# Each step prints its time; the last line says how long the whole run took.
set -euo pipefail
cd "$(dirname "$0")"

start=$SECONDS
step() { # step DIR COMMAND...: run COMMAND in DIR and print its time
  local dir=$1 t=$SECONDS
  shift
  echo "== ($dir) $*"
  (cd "$dir" && "$@")
  echo "   ok in $((SECONDS - t)) s"
}

# bg step DIR COMMAND...: run a step beside the next ones (for a step that
# mostly waits on clients' own timers); wait_bg prints its output and fails
# if it failed.
bg_pids=() bg_logs=()
bg() {
  local log
  log=$(mktemp)
  ( set -e; "$@" ) >"$log" 2>&1 &
  bg_pids+=($!) bg_logs+=("$log")
}
wait_bg() {
  local i rc=0
  for i in "${!bg_pids[@]}"; do
    wait "${bg_pids[$i]}" || rc=1
    cat "${bg_logs[$i]}"
    rm -f "${bg_logs[$i]}"
  done
  bg_pids=() bg_logs=()
  return $rc
}
trap 'if [ ${#bg_pids[@]} -gt 0 ]; then kill "${bg_pids[@]}" 2>/dev/null || true; fi' EXIT

# The library (the root module), with examples/broker and examples/embedtest.
step . go vet ./...
step . go test -race ./...

# The Watermill adapter (its own module): includes Watermill's universal Pub/Sub suite.
step examples/watermill go vet ./...
step examples/watermill go test -race ./...

# The benchmark comparison (its own module, embeds NATS JetStream): every row
# at a tiny size, and the BENCHMARKS.md generator in its quick mode.
step examples/bench go vet ./...
step examples/bench go test ./...

# The RocketMQ-compatible broker (its own module). The tests that run the
# official RocketMQ client in-process are built !race (the client races on
# its own), so they also run without -race: beside the race runs, as they
# spend most of their time waiting on the clients' timers (about a tenth
# of their wall time is CPU).
step examples/rocketmq go vet ./...
bg step examples/rocketmq go test ./e2e/ ./rmqtest/ ./replicated/
step examples/rocketmq go test -race ./...

# The raft cluster (its own module); BROKERCORE_LONG=1 runs the long soaks.
step examples/cluster go vet ./...
step examples/cluster go test -race ./...
wait_bg

echo "all modules passed in $((SECONDS - start)) s"

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
# its own), so they also run without -race.
step examples/rocketmq go vet ./...
step examples/rocketmq go test -race ./...
step examples/rocketmq go test ./e2e/ ./rmqtest/ ./replicated/

# The raft cluster (its own module); BROKERCORE_LONG=1 runs the long soaks.
step examples/cluster go vet ./...
step examples/cluster go test -race ./...

echo "all modules passed in $((SECONDS - start)) s"

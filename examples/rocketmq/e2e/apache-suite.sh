#!/bin/bash
# Runs Apache RocketMQ's own Go end-to-end suite (github.com/apache/rocketmq-e2e,
# its golang/ directory: normal, delay, FIFO and transaction tests) against
# this broker, its scenarios unchanged. Only the setup is adapted, in a copy:
# the client import path becomes this module's golang/v5 (v5.1.4) and two
# simple-consumer options take their v5 names; the suite's
# rocketmq-admintools/bin/mqadmin runs this module's cmd/mqadmin; the broker
# (this module's program) listens on free loopback ports named by the
# suite's environment variables.
#
#	examples/rocketmq/e2e/apache-suite.sh /path/to/rocketmq-e2e
set -euo pipefail
src=${1:?usage: apache-suite.sh /path/to/rocketmq-e2e checkout}
mod=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
pid=
cp -r "$src/golang" "$work/golang"
cd "$work/golang"
grep -rl 'rocketmq-clients/golang' --include=*.go . | xargs sed -i \
	-e 's#"github.com/apache/rocketmq-clients/golang"#"github.com/apache/rocketmq-clients/golang/v5"#' \
	-e 's#"github.com/apache/rocketmq-clients/golang/credentials"#"github.com/apache/rocketmq-clients/golang/v5/credentials"#' \
	-e 's/rmq_client.WithAwaitDuration(/rmq_client.WithSimpleAwaitDuration(/' \
	-e 's/rmq_client.WithSubscriptionExpressions(/rmq_client.WithSimpleSubscriptionExpressions(/'
sed -e 's#^module .*#module rocketmq-go-e2e#' -e '/brokercore\/brokercore/d' -e '/^replace/d' "$mod/go.mod" > go.mod
cp "$mod/go.sum" go.sum
(cd "$mod" && go build -o "$work/mqadmin" ./cmd/mqadmin && go build -o "$work/broker" .)
mkdir -p "$work/rocketmq-admintools/bin"
printf '#!/bin/sh\nexec %s "$@"\n' "$work/mqadmin" > "$work/rocketmq-admintools/bin/mqadmin"
# Free loopback ports, the broker on them; again if another process took one
# between the pick and the bind.
for try in 1 2 3; do
	read -r ns br gr mt < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(4)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')
	"$work/broker" -data "$work/data" -namesrv-addr "127.0.0.1:$ns" -broker-addr "127.0.0.1:$br" \
		-grpc-addr "127.0.0.1:$gr" -metrics-addr "127.0.0.1:$mt" -log-level warn &
	pid=$!
	until (echo > "/dev/tcp/127.0.0.1/$gr") 2>/dev/null || ! kill -0 $pid 2>/dev/null; do sleep 0.1; done
	kill -0 $pid 2>/dev/null && break
	wait $pid || true
	pid=
done
[ -n "$pid" ] || { echo "apache-suite.sh: the broker did not start" >&2; exit 1; }
GRPC_ENDPOINT="127.0.0.1:$gr" NAMESERVER="127.0.0.1:$ns" CLUSTER_NAME=DefaultCluster GOFLAGS=-mod=mod \
	go test ./mqgotest/... -count=1 -timeout 3m -v

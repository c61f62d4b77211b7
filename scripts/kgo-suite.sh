#!/usr/bin/env bash
# Runs franz-go's own kgo test suite (pkg/kgo/*_test.go, the version in go.mod) against a weir
# broker started here on 127.0.0.1, one test at a time with a time limit each, and prints a
# table of results. Nothing is vendored: the module is copied from the Go module cache into a
# scratch directory only to compile its tests.
#
#   scripts/kgo-suite.sh                 # every test
#   scripts/kgo-suite.sh 'TestIssue|TestClient_'   # tests matching a regexp
#
# Environment: KGO_SUITE_BROKERS=3 runs the suite against a cluster of 3 brokers (a metadata quorum
# of the three; Kafka ports KGO_SUITE_PORT+1..3, default 29610, controller ports +11..+13;
# KGO_TEST_RF=3, logs weir-1.log..weir-3.log) instead of one broker on an ephemeral port.
# KGO_SUITE_DIR (scratch dir, default a new temp dir; kept, it holds the logs),
# KGO_SUITE_TIMEOUT (per test, default 60s), KGO_TEST_RECORDS (records per ETL-style test,
# default 20000; the suite's own default is 500000). The suite's other knobs (KGO_TEST_RF=1 for a
# single broker, KGO_SEEDS) are set here.
#
# Output: $KGO_SUITE_DIR/results.tsv (test, result, seconds, first failure line) and one log per
# test in $KGO_SUITE_DIR/logs/, the broker's log in $KGO_SUITE_DIR/weir.log.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
filter="${1:-.}"
per_test="${KGO_SUITE_TIMEOUT:-60s}"
work="${KGO_SUITE_DIR:-$(mktemp -d /tmp/weir-kgo-suite.XXXXXX)}"
mkdir -p "$work/logs"

cd "$root"
version="$(go list -m -f '{{.Version}}' github.com/twmb/franz-go)"
modcache="$(go env GOMODCACHE)"
src="$modcache/github.com/twmb/franz-go@$version"
[[ -d "$src" ]] || go mod download "github.com/twmb/franz-go@$version"

echo "building weir and franz-go $version kgo tests in $work" >&2
go build -o "$work/weir" ./cmd/weir
rm -rf "$work/franz-go"
cp -r "$src" "$work/franz-go"
chmod -R u+w "$work/franz-go"
(cd "$work/franz-go/pkg/kgo" && go test -c -o "$work/kgo.test" .)

brokers="${KGO_SUITE_BROKERS:-1}"
weir_pids=()
trap 'kill "${weir_pids[@]}" 2>/dev/null; wait "${weir_pids[@]}" 2>/dev/null || true' EXIT
if [[ "$brokers" == 1 ]]; then
  # The broker: a fresh log dir, an ephemeral loopback port read back from its start-up line.
  rm -rf "$work/data"
  "$work/weir" serve --set listeners=PLAINTEXT://127.0.0.1:0 --set "log.dirs=$work/data" >"$work/weir.log" 2>&1 &
  weir_pids=($!)
  addr=""
  for _ in $(seq 1 100); do
    addr="$(sed -n 's/.* listeners=PLAINTEXT:\/\/\([0-9.]*:[0-9]*\).*/\1/p' "$work/weir.log" | head -1)"
    [[ -n "$addr" ]] && break
    kill -0 "${weir_pids[0]}" 2>/dev/null || { cat "$work/weir.log" >&2; exit 1; }
    sleep 0.1
  done
  [[ -n "$addr" ]] || { echo "weir did not start" >&2; cat "$work/weir.log" >&2; exit 1; }
  seeds="$addr" rf=1
else
  # A cluster: fixed loopback ports, every broker a voter of the metadata quorum.
  base="${KGO_SUITE_PORT:-29610}"
  voters="" seeds=""
  for i in $(seq 1 "$brokers"); do
    voters="${voters:+$voters,}$i@127.0.0.1:$((base + 10 + i))"
    seeds="${seeds:+$seeds,}127.0.0.1:$((base + i))"
  done
  for i in $(seq 1 "$brokers"); do
    rm -rf "$work/data-$i"
    "$work/weir" serve --set node.id="$i" --set listeners=PLAINTEXT://127.0.0.1:$((base + i)) --set "log.dirs=$work/data-$i" \
      --set "controller.quorum.voters=$voters" --set metrics.listener= >"$work/weir-$i.log" 2>&1 &
    weir_pids+=($!)
  done
  for _ in $(seq 1 200); do
    grep -q 'weir broker started' "$work/weir-$brokers.log" 2>/dev/null && grep -q 'weir broker started' "$work/weir-1.log" && break
    sleep 0.1
  done
  grep -q 'weir broker started' "$work/weir-1.log" || { echo "the cluster did not start" >&2; cat "$work/weir-1.log" >&2; exit 1; }
  rf="$brokers"
  cat "$work"/weir-*.log >"$work/weir.log"
fi
echo "weir serving on $seeds" >&2

export KGO_SEEDS="$seeds" KGO_TEST_RF="$rf" KGO_LOG_LEVEL="${KGO_LOG_LEVEL:-info}"
export KGO_TEST_RECORDS="${KGO_TEST_RECORDS:-20000}"

printf 'test\tresult\tseconds\tfirst failure\n' >"$work/results.tsv"
pass=0 fail=0 skip=0
for t in $("$work/kgo.test" -test.list "$filter" | grep '^Test'); do
  log="$work/logs/$t.log"
  start=$(date +%s%N)
  set +e
  (cd "$work/franz-go/pkg/kgo" && "$work/kgo.test" -test.run "^${t}\$" -test.v -test.count=1 -test.timeout "$per_test") >"$log" 2>&1
  rc=$?
  set -e
  ms=$((($(date +%s%N) - start) / 1000000))
  secs="$((ms / 1000)).$(((ms % 1000) / 100))"
  if grep -q "^--- SKIP: $t " "$log"; then
    result=SKIP; skip=$((skip + 1))
  elif [[ $rc -eq 0 ]]; then
    result=PASS; pass=$((pass + 1))
  else
    result=FAIL; fail=$((fail + 1))
    grep -q 'panic: test timed out' "$log" && result=TIMEOUT
  fi
  why=""
  if [[ $result != PASS ]]; then
    # The first line saying why: a failure message, not a subtest's skip or the cleanup notes.
    why="$(grep -E '^\s+[a-z_0-9]+_test\.go:[0-9]+: |^\s+testConsumer |panic: ' "$log" |
      grep -v -E 'does not support|completed in|FAILED TESTING|deleting (topic|group)' | head -1 |
      sed 's/^[[:space:]]*//' | cut -c1-200 | tr '\t' ' ' || true)"
    [[ -n "$why" ]] || why="$(grep -m1 -E '^\s+[a-z_0-9]+_test\.go:[0-9]+: ' "$log" | sed 's/^[[:space:]]*//' | cut -c1-200 | tr '\t' ' ' || true)"
  fi
  printf '%s\t%s\t%s\t%s\n' "$t" "$result" "$secs" "$why" >>"$work/results.tsv"
  printf '%-55s %-8s %6ss %s\n' "$t" "$result" "$secs" "$why" >&2
  # The broker must survive every test.
  for pid in "${weir_pids[@]}"; do
    kill -0 "$pid" 2>/dev/null || { echo "weir exited during $t" >&2; tail -50 "$work"/weir*.log >&2; exit 1; }
  done
done
echo "pass $pass, fail $fail, skip $skip; results in $work/results.tsv" >&2

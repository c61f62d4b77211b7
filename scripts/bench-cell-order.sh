#!/usr/bin/env bash
# bench-cell-order.sh BROKER_BIN [OUTDIR]
#
# One broker (weir, or scripts/floorbroker) takes the page-cache produce cells of
# scripts/bench-kafka-tools.sh in the suite's order (a 6-partition 1 KiB warm-up, then 1
# partition 100 B and 1 KiB, then 6 partitions, acks=1 and all) from Kafka's ProducerPerformance,
# and prints the broker's CPU (utime+stime ticks of /proc/PID/stat) over each run. A cell that
# costs more late in the sequence than the same work cost in the warm-up shows state the broker
# carries from earlier traffic (it found netio's frame pool forgetting large frames, see
# docs/benchmarks.md). PERF=1 records the broker with `perf record -g` during the 6-partition
# 1 KiB acks=1 cell (OUTDIR/perf.data).
#
#   PORT        default 29592 (127.0.0.1 only)
#   KAFKA_LIBS  the Kafka 4.4 jars (default: the anchor's cache, ~/.cache/kafka-anchor/4.4.0/libs)
#
# Every run is bounded by its record count and a 120 s timeout.
set -euo pipefail
BIN="$1"
OUT="${2:-$(mktemp -d -t bench-cell-order.XXXXXX)}"
PORT="${PORT:-29592}"
LIBS="${KAFKA_LIBS:-$HOME/.cache/kafka-anchor/4.4.0/libs}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WEIR="${WEIR_BIN:-$REPO/bin/weir}" # for `topic create`
mkdir -p "$OUT"
DATA="$(mktemp -d -t bench-cell-order-data.XXXXXX)"
"$BIN" serve --log-level warn --set "listeners=PLAINTEXT://127.0.0.1:$PORT" --set "log.dirs=$DATA/data" \
  --set log.flush.interval.messages=9223372036854775807 --set group.initial.rebalance.delay.ms=0 >"$OUT/broker.log" 2>&1 &
PID=$!
trap 'kill -TERM $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$DATA"' EXIT
for _ in $(seq 100); do (echo >"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.1; done
for t in perf-p1-s100:1 perf-p1-s1024:1 perf-p6-s100:6 perf-p6-s1024:6 perf-warmup:6; do
  "$WEIR" topic create "${t%%:*}" --partitions "${t##*:}" --bootstrap "127.0.0.1:$PORT" >/dev/null
done
ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$PID/stat"; }
run() { # TOPIC RECORDS SIZE ACKS
  local t0 line; t0="$(ticks)"
  line="$(timeout 120 java -Xmx512M -cp "$LIBS/*" org.apache.kafka.tools.ProducerPerformance --topic "$1" \
    --num-records "$2" --record-size "$3" --throughput -1 --producer-props "bootstrap.servers=127.0.0.1:$PORT" "acks=$4" 2>&1 | tail -n1)"
  printf '%-14s acks=%-3s %8s records  broker CPU %5.2f s  %s\n' "$1" "$4" "$2" \
    "$(awk -v a="$t0" -v b="$(ticks)" -v h="$(getconf CLK_TCK)" 'BEGIN { print (b - a) / h }')" "$(cut -d, -f2 <<<"$line")"
}
run perf-warmup 500000 1024 1
run perf-p1-s100 2000000 100 1; run perf-p1-s100 2000000 100 all
run perf-p1-s1024 500000 1024 1; run perf-p1-s1024 500000 1024 all
run perf-p6-s100 2000000 100 1; run perf-p6-s100 2000000 100 all
PERF_PID=""
if [[ "${PERF:-0}" == 1 ]]; then perf record -F 1999 -g -p "$PID" -o "$OUT/perf.data" 2>/dev/null & PERF_PID=$!; fi
run perf-p6-s1024 500000 1024 1
if [[ -n "$PERF_PID" ]]; then kill -INT "$PERF_PID"; wait "$PERF_PID" || true; fi
run perf-p6-s1024 500000 1024 all

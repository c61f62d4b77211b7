#!/usr/bin/env bash
# bench-vs-kafka.sh [OUTDIR]
#
# weir against Apache Kafka on this machine, same disk, same client, same workload, one broker
# at a time. The client is Kafka's own Java ProducerPerformance (from the anchor's cached jars),
# so neither broker gets a home advantage. For each repetition and each flush policy:
#
#   durable    weir's default (every acknowledgement waits for a group-commit fdatasync) against
#              Kafka with log.flush.interval.messages=1
#   pagecache  weir with log.flush.interval.messages=Long.MAX_VALUE against Kafka's defaults
#
# each broker in turn (the first one alternates between repetitions, so drift in the machine's
# load does not favour one side) is started on an empty data dir under BENCH_DIR, gets a topic of
# PARTITIONS partitions (created with Kafka's TopicCommand), takes one ProducerPerformance run
# per acks value, and is stopped; its data dir is then deleted. Prints a markdown table of
# records/s and weir/Kafka ratios per run, then the median and range of each ratio, and keeps
# every tool's output in OUTDIR (default: a new mktemp dir).
#
#   REPS         repetitions (default 3)
#   RECORDS      records per producer run (default 500000)
#   WARMUP_RECORDS  the first records of a run, left out of its statistics while the JVM
#                warms up (default 50000; 0 = none)
#   RECORD_SIZE  bytes (default 1024)
#   PARTITIONS   default 16
#   ACKS         default "1 all"
#   MODES        default "durable pagecache"
#   BROKERS      default "weir kafka" (one alone for experiments; the ratios then read n/a)
#   WEIR_ENV     environment for the weir process, e.g. "GOMAXPROCS=8"
#   BENCH_DIR    where both brokers keep their data (default: a mktemp dir under /tmp); put it
#                on the disk being judged
#   WEIR_PORT    default 29092;  KAFKA_PORT  default 39092 (and +1 for its controller)
#   PRODUCER_PROPS  extra producer properties for both, e.g. "linger.ms=10 batch.size=65536"
#   RUN_TIMEOUT  seconds before one producer run is stopped (default 300)
#   KAFKA_ANCHOR folder with start.sh/stop.sh/lib.sh (default ../shared/anchors/kafka)
#   WEIR_BIN     a weir binary to use instead of building one from this tree
#
# Everything listens on 127.0.0.1 only. Every run is bounded by RECORDS and RUN_TIMEOUT.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KAFKA_ANCHOR="${KAFKA_ANCHOR:-$REPO/../shared/anchors/kafka}"
KAFKA_ANCHOR="$(cd "$KAFKA_ANCHOR" && pwd)"
# shellcheck source=/dev/null
source "$KAFKA_ANCHOR/lib.sh"

REPS="${REPS:-3}"
RECORDS="${RECORDS:-500000}"
WARMUP_RECORDS="${WARMUP_RECORDS:-50000}"
RECORD_SIZE="${RECORD_SIZE:-1024}"
PARTITIONS="${PARTITIONS:-16}"
ACKS="${ACKS:-1 all}"
MODES="${MODES:-durable pagecache}"
BROKERS="${BROKERS:-weir kafka}"
WEIR_PORT="${WEIR_PORT:-29092}"
KAFKA_PORT="${KAFKA_PORT:-39092}"
RUN_TIMEOUT="${RUN_TIMEOUT:-300}"
OUT="${1:-$(mktemp -d -t bench-vs-kafka.XXXXXX)}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
BENCH_DIR="${BENCH_DIR:-$(mktemp -d -t bench-vs-kafka-data.XXXXXX)}"
mkdir -p "$BENCH_DIR"
BENCH_DIR="$(cd "$BENCH_DIR" && pwd)"
PAGECACHE_FLUSH=9223372036854775807

kafka_libs
KAFKA_TOOL_LOG_OPTS="$(kafka_tool_log_opts "$OUT")"
export KAFKA_TOOL_LOG_OPTS

log() { echo "bench-vs-kafka: $*" >&2; }

# --- weir ------------------------------------------------------------------------------------
if [[ -z "${WEIR_BIN:-}" ]]; then
  WEIR_BIN="$OUT/weir"
  log "building weir from $REPO"
  (cd "$REPO" && go build -o "$WEIR_BIN" ./cmd/weir)
fi
WEIR_PID=""

start_weir() { # MODE DATADIR
  local mode="$1" dir="$2" args=()
  args=(serve --log-level warn --set "listeners=PLAINTEXT://127.0.0.1:$WEIR_PORT" --set "log.dirs=$dir/data")
  if [[ "$mode" == pagecache ]]; then args+=(--set "log.flush.interval.messages=$PAGECACHE_FLUSH"); fi
  if port_open "$WEIR_PORT"; then log "127.0.0.1:$WEIR_PORT is already in use"; return 1; fi
  mkdir -p "$dir"
  # shellcheck disable=SC2086
  env ${WEIR_ENV:-} "$WEIR_BIN" "${args[@]}" >"$dir/weir.log" 2>&1 </dev/null &
  WEIR_PID=$!
  local deadline=$(( $(date +%s) + 60 ))
  until port_open "$WEIR_PORT"; do
    kill -0 "$WEIR_PID" 2>/dev/null || { log "weir exited: $(tail -n 5 "$dir/weir.log")"; WEIR_PID=""; return 1; }
    (( $(date +%s) < deadline )) || { log "weir did not listen within 60 s"; stop_weir; return 1; }
    sleep 0.1
  done
}

stop_weir() {
  [[ -n "$WEIR_PID" ]] || return 0
  kill -TERM "$WEIR_PID" 2>/dev/null || true
  local i
  for i in $(seq 300); do kill -0 "$WEIR_PID" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$WEIR_PID" 2>/dev/null; then log "weir $WEIR_PID still up after 30 s; SIGKILL"; kill -KILL "$WEIR_PID" 2>/dev/null || true; fi
  wait "$WEIR_PID" 2>/dev/null || true
  WEIR_PID=""
}

# --- Kafka -----------------------------------------------------------------------------------
KAFKA_DIR=""
start_kafka() { # MODE DATADIR
  local mode="$1" dir="$2" props=()
  if [[ "$mode" == durable ]]; then props+=(log.flush.interval.messages=1); fi
  local startlog
  startlog="$OUT/kafka-start-$(basename "$dir").log"
  "$KAFKA_ANCHOR/start.sh" "$KAFKA_PORT" "$dir" "${props[@]}" >/dev/null 2>"$startlog" || {
    log "Kafka did not start: $(tail -n 5 "$startlog")"; return 1; }
  KAFKA_DIR="$dir"
}

stop_kafka() {
  [[ -n "$KAFKA_DIR" ]] || return 0
  "$KAFKA_ANCHOR/stop.sh" "$KAFKA_DIR" 2>>"$OUT/kafka-stop.log" || true
  KAFKA_DIR=""
}

cleanup() { stop_weir; stop_kafka; }
trap cleanup EXIT INT TERM

# --- the load --------------------------------------------------------------------------------
# Option names changed in Kafka 4.2 (KIP-1147): ask the tool (the help text is captured first;
# grep -q on the pipe would cut it short and fail the pipeline).
PERF_HELP="$(kafka_tool org.apache.kafka.tools.ProducerPerformance --help 2>&1 || true)"
if grep -q -- '--command-property' <<<"$PERF_HELP"; then PROPS_FLAG=--command-property; else PROPS_FLAG=--producer-props; fi
WARMUP_ARGS=()
if (( WARMUP_RECORDS > 0 )); then
  if grep -q -- '--warmup-records' <<<"$PERF_HELP"; then WARMUP_ARGS=(--warmup-records "$WARMUP_RECORDS")
  else log "this ProducerPerformance has no --warmup-records: whole-run statistics"; fi
fi

create_topic() { # BOOTSTRAP NAME
  KAFKA_TOOL_TIMEOUT=60 kafka_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$1" --create \
    --topic "$2" --partitions "$PARTITIONS" --replication-factor 1 >>"$OUT/topics.log" 2>&1
}

# produce BOOTSTRAP TOPIC ACKS LOG: prints "records/s MB/s avg p50 p99 p99.9" or nothing.
produce() {
  local bootstrap="$1" topic="$2" acks="$3" logf="$4"
  # shellcheck disable=SC2086
  KAFKA_TOOL_TIMEOUT="$RUN_TIMEOUT" kafka_tool org.apache.kafka.tools.ProducerPerformance \
    --topic "$topic" --num-records "$RECORDS" --record-size "$RECORD_SIZE" --throughput -1 \
    "${WARMUP_ARGS[@]}" "$PROPS_FLAG" bootstrap.servers="$bootstrap" acks="$acks" ${PRODUCER_PROPS:-} >"$logf" 2>&1 || true
  # With warmup records the last summary line is the steady state's.
  grep -E 'records sent, .* 99\.9th\.' "$logf" | tail -n1 | sed -E \
    's/^([0-9]+) (steady state )?records sent, ([0-9.]+) records\/sec \(([0-9.]+) MB\/sec\), ([0-9.]+) ms avg latency, [0-9.]+ ms max latency, ([0-9]+) ms 50th, [0-9]+ ms 95th, ([0-9]+) ms 99th, ([0-9]+) ms 99\.9th\./\3 \4 \5 \6 \7 \8/'
}

RESULTS="$OUT/results.txt" # rep mode acks broker records/s MB/s avg p50 p99 p99.9
: >"$RESULTS"

run_broker() { # REP MODE BROKER
  local rep="$1" mode="$2" which="$3" dir bootstrap topic acks res
  dir="$BENCH_DIR/$which-$mode-$rep"
  rm -rf "$dir"
  if [[ "$which" == weir ]]; then
    start_weir "$mode" "$dir" || return 0
    bootstrap="127.0.0.1:$WEIR_PORT"
  else
    start_kafka "$mode" "$dir" || return 0
    bootstrap="127.0.0.1:$KAFKA_PORT"
  fi
  for acks in $ACKS; do
    topic="perf-$mode-acks$acks-$rep"
    if ! create_topic "$bootstrap" "$topic"; then
      log "$which: could not create $topic (see $OUT/topics.log)"; continue
    fi
    res="$(produce "$bootstrap" "$topic" "$acks" "$OUT/$which-$mode-acks$acks-rep$rep.log")"
    if [[ -z "$res" ]]; then
      log "$which $mode acks=$acks rep $rep: no result (see $OUT/$which-$mode-acks$acks-rep$rep.log)"; continue
    fi
    echo "$rep $mode $acks $which $res" >>"$RESULTS"
    log "rep $rep $mode acks=$acks $which: $res"
  done
  if [[ "$which" == weir ]]; then stop_weir; else stop_kafka; fi
  du -sh "$dir" 2>/dev/null | sed 's/^/bench-vs-kafka: data written: /' >&2 || true
  rm -rf "$dir"
}

{
  echo "machine: $(nproc) cores, kernel $(uname -r), $(df -T "$BENCH_DIR" | awk 'NR==2 { print $2 " on " $1 }') ($BENCH_DIR)"
  echo "$(cd "$REPO" && go version), $("$JAVA" -version 2>&1 | head -n1), Kafka $KAFKA_VERSION"
  echo "weir: ${WEIR_ENV:+$WEIR_ENV }$WEIR_BIN"
  echo "workload: Kafka's ProducerPerformance, $RECORDS records of $RECORD_SIZE B (statistics after $WARMUP_RECORDS warmup records), --throughput -1, topic of $PARTITIONS partitions, producer defaults${PRODUCER_PROPS:+ plus $PRODUCER_PROPS}; $REPS repetitions"
} | tee "$OUT/machine.txt" >&2

for rep in $(seq "$REPS"); do
  for mode in $MODES; do
    order="$BROKERS"
    if (( rep % 2 == 0 )); then order="$(tr ' ' '\n' <<<"$BROKERS" | tac | tr '\n' ' ')"; fi
    for which in $order; do
      run_broker "$rep" "$mode" "$which"
    done
  done
done

# --- the table -------------------------------------------------------------------------------
SUMMARY="$OUT/summary.md"
awk -v reps="$REPS" '
  { key = $2 " " $3; r = $4; rate[key, $1, r] = $5; mb[key, $1, r] = $6; p99[key, $1, r] = $9
    if (!(key in seen)) { seen[key] = 1; order[++n] = key } }
  function median(a, m,   i, j, t) {
    for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2 }
  END {
    print "| flush | acks | rep | weir records/s (MB/s, p99 ms) | Kafka records/s (MB/s, p99 ms) | weir / Kafka |"
    print "|---|---|---:|---:|---:|---:|"
    for (k = 1; k <= n; k++) {
      key = order[k]; split(key, f, " "); m = 0; split("", ratios)
      for (rep = 1; rep <= reps; rep++) {
        w = rate[key, rep, "weir"]; kf = rate[key, rep, "kafka"]
        ratio = (w != "" && kf != "" && kf > 0) ? sprintf("%.2f", w / kf) : "n/a"
        if (ratio != "n/a") ratios[++m] = w / kf
        printf "| %s | %s | %d | %s | %s | %s |\n", f[1], f[2], rep,
          (w == "" ? "failed" : sprintf("%.0f (%.1f, %s)", w, mb[key, rep, "weir"], p99[key, rep, "weir"])),
          (kf == "" ? "failed" : sprintf("%.0f (%.1f, %s)", kf, mb[key, rep, "kafka"], p99[key, rep, "kafka"])), ratio
      }
      if (m > 0) {
        lo = ratios[1]; hi = ratios[1]
        for (i = 1; i <= m; i++) { if (ratios[i] < lo) lo = ratios[i]; if (ratios[i] > hi) hi = ratios[i] }
        summary[k] = sprintf("| %s | %s | %.2f | %.2f to %.2f | %d |", f[1], f[2], median(ratios, m), lo, hi, m)
      } else summary[k] = sprintf("| %s | %s | n/a | n/a | 0 |", f[1], f[2])
    }
    print ""
    print "| flush | acks | weir / Kafka records/s, median | range | runs |"
    print "|---|---|---:|---:|---:|"
    for (k = 1; k <= n; k++) print summary[k]
  }' "$RESULTS" >"$SUMMARY"

{ echo; cat "$OUT/machine.txt"; echo; cat "$SUMMARY"; } 
log "raw output, results.txt and summary.md in $OUT"

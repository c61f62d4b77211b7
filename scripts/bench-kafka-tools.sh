#!/usr/bin/env bash
# bench-kafka-tools.sh [OUTDIR]   (also: make bench-kafka-tools [OUT=dir]; make bench-vs-kafka runs it too)
#
# weir against Apache Kafka driven by Kafka's own Java tools from the Kafka jars
# (org.apache.kafka.tools.ProducerPerformance, ConsumerPerformance, EndToEndLatency), one broker at
# a time on the same disk. For each repetition and flush policy each broker in turn (the first one
# alternates between repetitions and flush policies) is started on an empty data dir, takes a
# warm-up that is not reported, then every cell below, and is stopped; its data dir is deleted.
#
#   produce  ProducerPerformance, --throughput -1, for every TOOLS_PARTITIONS x TOOLS_SIZES x TOOLS_ACKS
#            (default 1 6 64 partitions x 100 B, 1 KiB x acks=1, all)
#   txn      ProducerPerformance --transactional-id --transaction-duration-ms TOOLS_TXN_MS (default
#            100) on TOOLS_TXN_PARTITIONS (6) partitions, TOOLS_TXN_SIZE (1024) B (acks=all, idempotent)
#   consume  ConsumerPerformance reading each produce topic back in full (in a new group); the
#            rate is the fetch-only rate (records/s after the group join), the join time is kept
#   e2e      EndToEndLatency, TOOLS_E2E_RECORDS round trips of TOOLS_E2E_SIZE (100) B, acks=1 and all
#
# Per cell and run: records/s, latency p50/p99/p99.9 (ms, as the tool prints them), the broker's
# CPU time over the tool run (utime+stime from /proc/PID/stat; the JVM's for Kafka, weir's own
# process for weir), and the broker's peak RssAnon and RssFile (sampled from /proc/PID/status
# every 200 ms during the run), and the tool's own CPU (its JVM's user+system seconds, bash's time) in
# OUTDIR/tools_cpu.tsv beside the broker's. Rows go to OUTDIR/results.tsv; `weir bench tools-report` turns
# them into OUTDIR/report.md: weir/Kafka ratios per cell as median (min-max) over the
# repetitions, each ratio taken between the weir and Kafka runs of the same repetition.
#
# Flush policies as scripts/bench-vs-kafka.sh: durable = weir's default against Kafka with
# log.flush.interval.messages=1; pagecache = weir with log.flush.interval.messages=MAX against
# Kafka's defaults. weir runs with group.initial.rebalance.delay.ms=0, as Kafka's shipped
# server.properties (and the anchor's start.sh) does.
#
#   REPS                  repetitions (default 3; QUICK=1: 1)
#   QUICK=1               a smoke run: REPS=1 and few records per cell
#   MODES                 default "durable pagecache"
#   BROKERS               default "weir kafka"; "weir kafka floor" adds scripts/floorbroker (produce
#                         cells only): a broker that only checks each batch's CRC and pwrites it,
#                         the least CPU per record any broker writing through the page cache spends
#   FLOOR_BIN             the floorbroker binary (default: bin/floorbroker, else built here)
#   TOOLS_PARTITIONS      default "1 6 64"
#   TOOLS_SIZES           default "100 1024"
#   TOOLS_ACKS            default "1 all"
#   TOOLS_RECORDS_100     records per produce run of 100 B (default 2000000; QUICK: 100000)
#   TOOLS_RECORDS_1024    records per produce run of 1 KiB (default 500000; QUICK: 30000)
#   TOOLS_DURABLE_RECORDS_100, TOOLS_DURABLE_RECORDS_1024   the same under the durable policy
#                         (default: a quarter of the above)
#   TOOLS_TXN_RECORDS     records of the transactional run (default 500000; QUICK: 30000)
#   TOOLS_TXN_MS          --transaction-duration-ms (default 100)
#   TOOLS_E2E_RECORDS     EndToEndLatency round trips (default 10000; QUICK: 1000)
#   TOOLS_WARMUP_RECORDS  1 KiB records sent first, not reported (default 500000; QUICK: 20000)
#   TOOLS_CELLS           default "produce txn consume e2e"
#   TOOLS_PRODUCER_PROPS  extra producer properties for every producer run, e.g. "linger.ms=5"
#   RUN_TIMEOUT           seconds before one tool run is stopped (default 300; QUICK: 120)
#   WEIR_BIN              the weir binary (default: bin/weir, built by `make build`, else built here)
#   WEIR_ENV              environment for the weir broker, e.g. "GOMAXPROCS=2"
#   BENCH_DIR             where the brokers keep their data (default: a mktemp dir under /tmp)
#   WEIR_PORT             default 29192; KAFKA_PORT default 39192 (and +1 for its controller)
#   KAFKA_ANCHOR          folder with start.sh/stop.sh/lib.sh (default ../shared/anchors/kafka)
#   REPORT_ONLY=1         no runs: only the report of OUTDIR/results.tsv
#
# Everything listens on 127.0.0.1 only; every tool run is bounded by its record count and
# RUN_TIMEOUT.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KAFKA_ANCHOR="${KAFKA_ANCHOR:-$REPO/../shared/anchors/kafka}"
KAFKA_ANCHOR="$(cd "$KAFKA_ANCHOR" && pwd)"
# shellcheck source=/dev/null
source "$KAFKA_ANCHOR/lib.sh"

if [[ "${QUICK:-0}" == 1 ]]; then
  REPS="${REPS:-1}"
  TOOLS_RECORDS_100="${TOOLS_RECORDS_100:-100000}"
  TOOLS_RECORDS_1024="${TOOLS_RECORDS_1024:-30000}"
  TOOLS_TXN_RECORDS="${TOOLS_TXN_RECORDS:-30000}"
  TOOLS_E2E_RECORDS="${TOOLS_E2E_RECORDS:-1000}"
  TOOLS_WARMUP_RECORDS="${TOOLS_WARMUP_RECORDS:-20000}"
  RUN_TIMEOUT="${RUN_TIMEOUT:-120}"
fi
REPS="${REPS:-3}"
MODES="${MODES:-durable pagecache}"
BROKERS="${BROKERS:-weir kafka}"
PARTITIONS="${TOOLS_PARTITIONS:-1 6 64}"
SIZES="${TOOLS_SIZES:-100 1024}"
ACKS="${TOOLS_ACKS:-1 all}"
TXN_RECORDS="${TOOLS_TXN_RECORDS:-500000}"
TXN_MS="${TOOLS_TXN_MS:-100}"
TXN_PARTITIONS="${TOOLS_TXN_PARTITIONS:-6}"
TXN_SIZE="${TOOLS_TXN_SIZE:-1024}"
E2E_N="${TOOLS_E2E_RECORDS:-10000}"
E2E_SIZE="${TOOLS_E2E_SIZE:-100}"
WARMUP_N="${TOOLS_WARMUP_RECORDS:-500000}"
CELLS="${TOOLS_CELLS:-produce txn consume e2e}"
RUN_TIMEOUT="${RUN_TIMEOUT:-300}"
WEIR_PORT="${WEIR_PORT:-29192}"
KAFKA_PORT="${KAFKA_PORT:-39192}"
PAGECACHE_FLUSH=9223372036854775807
OUT="${1:-$(mktemp -d -t bench-kafka-tools.XXXXXX)}"
mkdir -p "$OUT/logs"
OUT="$(cd "$OUT" && pwd)"
RESULTS="$OUT/results.tsv"

log() { echo "bench-kafka-tools: $*" >&2; }

records_for() { # SIZE [MODE] -> records per produce run
  local var="TOOLS_RECORDS_$1" dvar="TOOLS_DURABLE_RECORDS_$1" n
  case "$1" in
    100) n="${!var:-2000000}" ;;
    *) n="${!var:-500000}" ;;
  esac
  # Kafka with log.flush.interval.messages=1 syncs every batch it appends: 2-10k records/s
  # on this machine kind at 1 partition, so the durable cells send fewer records to stay
  # within RUN_TIMEOUT (a quarter of the page-cache count by default).
  if [[ "${2:-}" == durable ]]; then n="${!dvar:-$(( n / 4 ))}"; fi
  echo "$n"
}

if [[ -z "${WEIR_BIN:-}" ]]; then
  if [[ -x "$REPO/bin/weir" ]]; then WEIR_BIN="$REPO/bin/weir"; else
    WEIR_BIN="$OUT/weir"; log "building weir from $REPO"; (cd "$REPO" && go build -o "$WEIR_BIN" ./cmd/weir)
  fi
fi

if [[ " $BROKERS " == *" floor "* && -z "${FLOOR_BIN:-}" ]]; then
  if [[ -x "$REPO/bin/floorbroker" ]]; then FLOOR_BIN="$REPO/bin/floorbroker"; else
    FLOOR_BIN="$OUT/floorbroker"; log "building floorbroker from $REPO"; (cd "$REPO" && go build -o "$FLOOR_BIN" ./scripts/floorbroker)
  fi
fi

report() {
  "$WEIR_BIN" bench tools-report "$RESULTS" >"$OUT/report.md" || { log "weir bench tools-report failed"; return 0; }
  cat "$OUT/report.md"
  log "results.tsv, report.md and every tool's output (logs/) in $OUT"
}
if [[ "${REPORT_ONLY:-0}" == 1 ]]; then report; exit 0; fi

BENCH_DIR="${BENCH_DIR:-$(mktemp -d -t bench-kafka-tools-data.XXXXXX)}"
mkdir -p "$BENCH_DIR"
BENCH_DIR="$(cd "$BENCH_DIR" && pwd)"

kafka_libs
KAFKA_TOOL_LOG_OPTS="$(kafka_tool_log_opts "$OUT/logs")"
# Option names changed in Kafka 4.2 (KIP-1147, KIP-1172): ask each tool once.
help_of() { kafka_tool "$1" --help 2>&1 || true; }
if help_of org.apache.kafka.tools.ProducerPerformance | grep -q -- '--command-property'; then
  PROPS_FLAG=--command-property; else PROPS_FLAG=--producer-props; fi
if help_of org.apache.kafka.tools.ConsumerPerformance | grep -q -- '--num-records'; then
  NUM_FLAG=--num-records; else NUM_FLAG=--messages; fi
if help_of org.apache.kafka.tools.EndToEndLatency | grep -q -- '--bootstrap-server'; then
  E2E_NAMED=1; else E2E_NAMED=0; fi
CLK_TCK="$(getconf CLK_TCK)"

# --- brokers ---------------------------------------------------------------------------------
BROKER_PID=""
BROKER_KIND=""
BROKER_DIR=""

start_broker() { # WHICH MODE DIR: sets BROKER_PID, BOOTSTRAP
  local which="$1" mode="$2" dir="$3"
  mkdir -p "$dir"
  BROKER_KIND="$which"; BROKER_DIR="$dir"
  if [[ "$which" == weir || "$which" == floor ]]; then
    local bin="$WEIR_BIN"
    [[ "$which" == floor ]] && bin="$FLOOR_BIN"
    local args=(serve --log-level warn --set "listeners=PLAINTEXT://127.0.0.1:$WEIR_PORT" --set "log.dirs=$dir/data"
      --set group.initial.rebalance.delay.ms=0)
    if [[ "$mode" == pagecache ]]; then args+=(--set "log.flush.interval.messages=$PAGECACHE_FLUSH"); fi
    if port_open "$WEIR_PORT"; then log "127.0.0.1:$WEIR_PORT is already in use"; return 1; fi
    # shellcheck disable=SC2086
    env ${WEIR_ENV:-} "$bin" "${args[@]}" >"$dir/weir.log" 2>&1 </dev/null &
    BROKER_PID=$!
    BOOTSTRAP="127.0.0.1:$WEIR_PORT"
    local deadline=$(( $(date +%s) + 60 ))
    until port_open "$WEIR_PORT"; do
      kill -0 "$BROKER_PID" 2>/dev/null || { log "weir exited: $(tail -n 5 "$dir/weir.log")"; BROKER_PID=""; return 1; }
      (( $(date +%s) < deadline )) || { log "weir did not listen within 60 s"; stop_broker; return 1; }
      sleep 0.1
    done
  else
    local props=()
    if [[ "$mode" == durable ]]; then props+=(log.flush.interval.messages=1); fi
    BROKER_PID="$("$KAFKA_ANCHOR/start.sh" "$KAFKA_PORT" "$dir" "${props[@]}" 2>"$OUT/logs/kafka-start-$(basename "$dir").log" | tail -n1)" || {
      log "Kafka did not start: $(tail -n 5 "$OUT/logs/kafka-start-$(basename "$dir").log")"; BROKER_PID=""; return 1; }
    BOOTSTRAP="127.0.0.1:$KAFKA_PORT"
  fi
}

stop_broker() {
  [[ -n "$BROKER_PID" ]] || return 0
  if [[ "$BROKER_KIND" == weir || "$BROKER_KIND" == floor ]]; then
    kill -TERM "$BROKER_PID" 2>/dev/null || true
    local i
    for i in $(seq 300); do kill -0 "$BROKER_PID" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$BROKER_PID" 2>/dev/null; then log "weir $BROKER_PID still up after 30 s; SIGKILL"; kill -KILL "$BROKER_PID" 2>/dev/null || true; fi
    wait "$BROKER_PID" 2>/dev/null || true
  else
    "$KAFKA_ANCHOR/stop.sh" "$BROKER_DIR" 2>>"$OUT/logs/kafka-stop.log" || true
  fi
  BROKER_PID=""
}

SAMPLER_PID=""
stop_sampler() {
  [[ -n "$SAMPLER_PID" ]] || return 0
  kill "$SAMPLER_PID" 2>/dev/null || true
  wait "$SAMPLER_PID" 2>/dev/null || true
  SAMPLER_PID=""
}
cleanup() { stop_sampler; stop_broker; }
trap cleanup EXIT
trap 'exit 130' INT TERM

cpu_ticks() { # utime+stime of the broker in clock ticks
  awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$BROKER_PID/stat" 2>/dev/null || echo 0
}

# run_tool LOG CLASS ARGS...: runs one Kafka tool with a time limit while sampling the broker's
# RSS; sets CPU_S (broker CPU seconds over the run), ANON_KIB and FILE_KIB (peaks).
run_tool() {
  local logf="$1"; shift
  local samples="$logf.rss"
  echo "+ $*" >"$logf"
  ( while [[ -r "/proc/$BROKER_PID/status" ]]; do
      awk '/^RssAnon:/ { a = $2 } /^RssFile:/ { f = $2 } END { print a + 0, f + 0 }' "/proc/$BROKER_PID/status" 2>/dev/null || break
      sleep 0.2
    done ) >"$samples" &
  SAMPLER_PID=$!
  local t0; t0="$(cpu_ticks)"
  # The tool's own CPU (the load generator's: user and system seconds of the JVM, from bash's
  # time, which counts the waited-for children) goes to the log and to tools_cpu.tsv.
  local TIMEFORMAT='tool cpu seconds: %U %S'
  # shellcheck disable=SC2086
  { time timeout -k 10 "$RUN_TIMEOUT" "$JAVA" ${KAFKA_TOOL_HEAP_OPTS:--Xmx512M} $KAFKA_TOOL_LOG_OPTS \
    -cp "$KAFKA_CP" "$@" >>"$logf" 2>&1 || echo "exit status $?" >>"$logf"; } 2>>"$logf"
  local t1; t1="$(cpu_ticks)"
  TOOL_CPU_S="$(awk '/^tool cpu seconds:/ { printf "%.3f", $4 + $5 }' "$logf")"
  stop_sampler
  CPU_S="$(awk -v a="$t0" -v b="$t1" -v h="$CLK_TCK" 'BEGIN { printf "%.3f", (b - a) / h }')"
  read -r ANON_KIB FILE_KIB < <(awk 'BEGIN { a = 0; f = 0 } { if ($1 > a) a = $1; if ($2 > f) f = $2 } END { print a, f }' "$samples")
  echo "broker cpu seconds: $CPU_S, peak RssAnon $ANON_KIB kB, RssFile $FILE_KIB kB" >>"$logf"
}

# row REP MODE BROKER CELL KIND RECORDS RECS_PER_S P50 P99 P999 NOTE: one line of results.tsv
# (and of tools_cpu.tsv: the tool's own CPU beside the broker's)
row() {
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$6" "$7" "$8" "$9" "${10}" \
    "$CPU_S" "$ANON_KIB" "$FILE_KIB" "${11}" >>"$RESULTS"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$6" "$7" "$CPU_S" "${TOOL_CPU_S:-}" >>"$OUT/tools_cpu.tsv"
}

create_topic() { # NAME PARTITIONS
  "$WEIR_BIN" topic create "$1" --partitions "$2" --bootstrap "$BOOTSTRAP" >>"$OUT/logs/topics.log" 2>&1
}

# produce_row REP MODE WHICH CELL LOG: parses ProducerPerformance's final line
# "N records sent, R records/sec (M MB/sec), A ms avg latency, X ms max latency, P50 ms 50th, P95 ms 95th, P99 ms 99th, P999 ms 99.9th."
produce_row() {
  local line
  line="$(grep -E 'records sent, .* 99\.9th\.' "$5" | tail -n1 || true)"
  if [[ -z "$line" ]]; then row "$1" "$2" "$3" "$4" produce 0 - - - - "failed: $(basename "$5")"; return; fi
  # shellcheck disable=SC2046
  set -- "$1" "$2" "$3" "$4" $(sed -E 's/^([0-9]+) records sent, ([0-9.]+) records\/sec \(([0-9.]+) MB\/sec\), ([0-9.]+) ms avg latency, ([0-9.]+) ms max latency, ([0-9.]+) ms 50th, ([0-9.]+) ms 95th, ([0-9.]+) ms 99th, ([0-9.]+) ms 99\.9th\./\1 \2 \6 \8 \9/' <<<"$line")
  row "$1" "$2" "$3" "$4" produce "$5" "$6" "$7" "$8" "$9" ""
}

cells_of() { [[ " $CELLS " == *" $1 "* ]]; }

run_broker() { # REP MODE WHICH
  local rep="$1" mode="$2" which="$3" dir tag
  dir="$BENCH_DIR/$which-$mode-r$rep"
  tag="r$rep-$mode-$which"
  rm -rf "$dir"
  start_broker "$which" "$mode" "$dir" || { rm -rf "$dir"; return 0; }
  log "rep $rep $mode $which: pid $BROKER_PID on $BOOTSTRAP"
  local p s a n
  for p in $PARTITIONS; do for s in $SIZES; do create_topic "perf-p$p-s$s" "$p"; done; done
  create_topic perf-txn "$TXN_PARTITIONS"
  create_topic perf-e2e 1
  create_topic perf-warmup 6
  if (( WARMUP_N > 0 )); then
    run_tool "$OUT/logs/$tag-warmup.log" org.apache.kafka.tools.ProducerPerformance --topic perf-warmup \
      --num-records "$WARMUP_N" --record-size 1024 --throughput -1 "$PROPS_FLAG" bootstrap.servers="$BOOTSTRAP" acks=1
  fi
  if cells_of produce; then
    for p in $PARTITIONS; do for s in $SIZES; do for a in $ACKS; do
      n="$(records_for "$s" "$mode")"
      local lf="$OUT/logs/$tag-produce-p$p-s$s-acks$a.log"
      # shellcheck disable=SC2086
      run_tool "$lf" org.apache.kafka.tools.ProducerPerformance --topic "perf-p$p-s$s" --num-records "$n" \
        --record-size "$s" --throughput -1 "$PROPS_FLAG" bootstrap.servers="$BOOTSTRAP" acks="$a" ${TOOLS_PRODUCER_PROPS:-}
      produce_row "$rep" "$mode" "$which" "produce p=$p size=$s acks=$a" "$lf"
    done; done; done
  fi
  if [[ "$which" == floor ]]; then stop_broker; rm -rf "$dir"; return 0; fi # the floor serves produce only
  if cells_of txn; then
    local lf="$OUT/logs/$tag-txn.log"
    # shellcheck disable=SC2086
    run_tool "$lf" org.apache.kafka.tools.ProducerPerformance --topic perf-txn --num-records "$TXN_RECORDS" \
      --record-size "$TXN_SIZE" --throughput -1 --transactional-id "perf-txn-$rep-$mode" --transaction-duration-ms "$TXN_MS" \
      "$PROPS_FLAG" bootstrap.servers="$BOOTSTRAP" acks=all ${TOOLS_PRODUCER_PROPS:-}
    produce_row "$rep" "$mode" "$which" "txn p=$TXN_PARTITIONS size=$TXN_SIZE every=${TXN_MS}ms" "$lf"
  fi
  if cells_of consume && cells_of produce; then
    # CSV "start, end, MB, MB.sec, nMsg, nMsg.sec, rebalance.ms, fetch.ms, fetch.MB.sec, fetch.nMsg.sec".
    local n_acks; n_acks="$(wc -w <<<"$ACKS")"
    for p in $PARTITIONS; do for s in $SIZES; do
      n=$(( $(records_for "$s" "$mode") * n_acks ))
      local lf="$OUT/logs/$tag-consume-p$p-s$s.log"
      run_tool "$lf" org.apache.kafka.tools.ConsumerPerformance --bootstrap-server "$BOOTSTRAP" \
        --topic "perf-p$p-s$s" "$NUM_FLAG" "$n" --timeout 30000 --group "perf-cg-$rep-p$p-s$s"
      local line; line="$(grep -E '^[0-9]{4}-[0-9]{2}-[0-9]{2} ' "$lf" | tail -n1 || true)"
      if [[ -n "$line" ]]; then
        # shellcheck disable=SC2046
        set -- $(awk -F', ' '{ printf "%d %.0f %s", $5, $10, $7 }' <<<"$line")
        row "$rep" "$mode" "$which" "consume p=$p size=$s" consume "$1" "$2" - - - "join ${3} ms"
      else
        row "$rep" "$mode" "$which" "consume p=$p size=$s" consume 0 - - - - "failed: $(basename "$lf")"
      fi
    done; done
  fi
  if cells_of e2e; then
    # "Avg latency: X ms" and "Percentiles: 50th = a, 99th = b, 99.9th = c" (whole ms).
    for a in $ACKS; do
      local lf="$OUT/logs/$tag-e2e-acks$a.log"
      if [[ "$E2E_NAMED" == 1 ]]; then
        run_tool "$lf" org.apache.kafka.tools.EndToEndLatency --bootstrap-server "$BOOTSTRAP" \
          --topic perf-e2e --num-records "$E2E_N" --producer-acks "$a" --record-size "$E2E_SIZE"
      else
        run_tool "$lf" org.apache.kafka.tools.EndToEndLatency "$BOOTSTRAP" perf-e2e "$E2E_N" "$a" "$E2E_SIZE"
      fi
      local pct; pct="$(sed -nE 's/^Percentiles: 50th = ([0-9.]+), 99th = ([0-9.]+), 99\.9th = ([0-9.]+).*/\1 \2 \3/p' "$lf" | tail -n1)"
      if [[ -n "$pct" ]]; then
        # shellcheck disable=SC2086
        set -- $pct
        row "$rep" "$mode" "$which" "e2e size=$E2E_SIZE acks=$a" e2e "$E2E_N" - "$1" "$2" "$3" ""
      else
        row "$rep" "$mode" "$which" "e2e size=$E2E_SIZE acks=$a" e2e 0 - - - - "failed: $(basename "$lf")"
      fi
    done
  fi
  stop_broker
  du -sh "$dir" 2>/dev/null | sed 's/^/bench-kafka-tools: data written: /' >&2 || true
  rm -rf "$dir"
}

{
  echo "machine: $(nproc) cores, kernel $(uname -r), $(df -T "$BENCH_DIR" | awk 'NR==2 { print $2 " on " $1 }') ($BENCH_DIR)"
  echo "$("$JAVA" -version 2>&1 | head -n1), Kafka tools and broker $KAFKA_VERSION; weir: ${WEIR_ENV:+$WEIR_ENV }$WEIR_BIN"
  echo "runs: $REPS repetitions, flush $MODES, cells $CELLS; partitions $PARTITIONS, sizes $SIZES, acks $ACKS;" \
    "records 100 B: $(records_for 100) (durable $(records_for 100 durable)), 1 KiB: $(records_for 1024) (durable $(records_for 1024 durable)), txn: $TXN_RECORDS every $TXN_MS ms, e2e: $E2E_N; warm-up $WARMUP_N"
} | tee -a "$OUT/machine.txt" >&2
[[ -f "$OUT/tools_cpu.tsv" ]] || printf 'rep\tmode\tbroker\tcell\trecords\trecords_per_s\tbroker_cpu_s\ttool_cpu_s\n' >"$OUT/tools_cpu.tsv"
[[ -f "$RESULTS" ]] || printf 'rep\tmode\tbroker\tcell\tkind\trecords\trecords_per_s\tp50_ms\tp99_ms\tp999_ms\tbroker_cpu_s\trss_anon_peak_kib\trss_file_peak_kib\tnote\n' >"$RESULTS"

t0="$(date +%s)"
n=0
for rep in $(seq "$REPS"); do
  for mode in $MODES; do
    order="$BROKERS"
    if (( (rep + n) % 2 == 0 )); then order="$(tr ' ' '\n' <<<"$BROKERS" | tac | tr '\n' ' ')"; fi
    n=$((n + 1))
    for which in $order; do
      run_broker "$rep" "$mode" "$which"
    done
  done
done
log "runs took $(( $(date +%s) - t0 )) s"
report

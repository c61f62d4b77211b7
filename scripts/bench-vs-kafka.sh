#!/usr/bin/env bash
# bench-vs-kafka.sh [OUTDIR]     (also: make bench-vs-kafka [OUT=dir])
#
# weir against Apache Kafka on this machine: same disk, same load generator (`weir bench`, a
# franz-go client with HdrHistogram latencies from each message's intended send time), same
# workloads, one broker at a time. Workloads (OpenMessaging Benchmark presets of `weir bench`):
#
#   a  1 KiB x 16 partitions, max rate, acks=1         weir bench produce --workload 1topic-16part-1kb-maxrate
#   b  1 KiB x 16 partitions, 50k msg/s, acks=all, e2e weir bench e2e     --workload 1topic-16part-1kb-50k
#   c  100 B x 1 partition, max rate, acks=1           weir bench produce --workload 1topic-1part-100b-maxrate
#   t  transactions: 1 KiB x 6 partitions, 20k msg/s, committed every 100 ms (as the tools' txn cell)
#                                                      weir bench txn --partitions 6 --rate 20000 --commit-every 0 --commit-interval 100ms
#   u  transactions: 1 KiB x 16 partitions, max rate, committed every 1000 records
#                                                      weir bench txn --partitions 16 --commit-every 1000
#
# Then Kafka's own tools against both brokers (scripts/bench-kafka-tools.sh into OUTDIR/tools:
# ProducerPerformance, transactional ProducerPerformance, ConsumerPerformance, EndToEndLatency,
# with broker CPU per record and peak RssAnon/RssFile), unless TOOLS=0. weir runs with
# group.initial.rebalance.delay.ms=0, as Kafka's shipped server.properties (and start.sh) does.
#
# Flush policies:
#   durable    weir's default (every acknowledgement waits for a group-commit fdatasync) against
#              Kafka with log.flush.interval.messages=1
#   pagecache  weir with log.flush.interval.messages=9223372036854775807 against Kafka's defaults
#
# For each repetition, flush policy and workload, each broker in turn (the first one alternates
# between repetitions and workloads, so drift in the machine's load does not favour one side) is
# started on an empty data dir under BENCH_DIR, takes one bounded `weir bench` run, and is
# stopped; its data dir is then deleted. Each run writes summary.json and .hgrm files to
# OUTDIR/runs/<workload>/<flush>/<broker>-r<rep>. Then `weir bench report OUTDIR/runs` prints the
# results and the weir/Kafka ratios (OUTDIR/report.md), and `weir hist compare --plot` draws
# weir's and Kafka's latency curves per workload and flush policy (OUTDIR/plots/*.png).
#
#   DURATION     measured time per run (default 20s; QUICK=1: 5s)
#   WARMUP       warm-up per run, not measured (default 5s; QUICK=1: 2s)
#   TXN_WARMUP   warm-up of the transactional workloads t and u (default 10s, QUICK too): a fresh
#                Kafka creates and loads __transaction_state (50 partitions) on the first
#                InitProducerId, which took about 6 s here
#   REPS         repetitions (default 3; QUICK=1: 1), for the tools too
#   QUICK=1      short runs to try the script out (the tools suite too: few records per cell)
#   TOOLS=0      leave out Kafka's tools (TOOLS_* and the rest: see scripts/bench-kafka-tools.sh)
#   WORKLOADS    default "a b c t u"
#   MODES        default "durable pagecache"
#   BROKERS      default "weir kafka" (one alone for experiments; the ratios are then left out)
#   MAX_MESSAGES cap per run, warm-up included (default 50000000)
#   BENCH_ARGS   extra `weir bench` flags for every run, e.g. "--producers 2"
#   WEIR_ENV     environment for the weir broker process, e.g. "GOMAXPROCS=8"
#   BENCH_DIR    where both brokers keep their data (default: a mktemp dir under /tmp); put it
#                on the disk being judged
#   WEIR_PORT    default 29092;  KAFKA_PORT  default 39092 (and +1 for its controller)
#   RUN_TIMEOUT  seconds before one `weir bench` run is stopped (default DURATION+WARMUP+90)
#   KAFKA_ANCHOR folder with start.sh/stop.sh/lib.sh (default ../shared/anchors/kafka)
#   WEIR_BIN     a weir binary to use instead of building one from this tree
#   REPORT_ONLY=1  no runs: only the report and plots of the runs already in OUTDIR (e.g. after
#                re-running one workload with WORKLOADS=b MODES=pagecache into the same OUTDIR)
#
# Everything listens on 127.0.0.1 only. Every run is bounded by DURATION, MAX_MESSAGES and
# RUN_TIMEOUT.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KAFKA_ANCHOR="${KAFKA_ANCHOR:-$REPO/../shared/anchors/kafka}"
KAFKA_ANCHOR="$(cd "$KAFKA_ANCHOR" && pwd)"
# shellcheck source=/dev/null
source "$KAFKA_ANCHOR/lib.sh"

if [[ "${QUICK:-0}" == 1 ]]; then
  DURATION="${DURATION:-5s}"; WARMUP="${WARMUP:-2s}"; REPS="${REPS:-1}"
fi
DURATION="${DURATION:-20s}"
WARMUP="${WARMUP:-5s}"
TXN_WARMUP="${TXN_WARMUP:-10s}"
REPS="${REPS:-3}"
WORKLOADS="${WORKLOADS:-a b c t u}"
MODES="${MODES:-durable pagecache}"
BROKERS="${BROKERS:-weir kafka}"
MAX_MESSAGES="${MAX_MESSAGES:-50000000}"
WEIR_PORT="${WEIR_PORT:-29092}"
KAFKA_PORT="${KAFKA_PORT:-39092}"
secs() { # 20s, 1m, 500ms, 20 -> whole seconds (rounded up)
  local v="$1"
  case "$v" in
    *ms) echo $(( (${v%ms} + 999) / 1000 )) ;;
    *m) echo $(( ${v%m} * 60 )) ;;
    *s) echo "${v%s}" | awk '{ printf "%d", ($1 == int($1)) ? $1 : int($1) + 1 }' ;;
    *) echo "$v" ;;
  esac
}
RUN_TIMEOUT="${RUN_TIMEOUT:-$(( $(secs "$DURATION") + $(secs "$WARMUP") + $(secs "$TXN_WARMUP") + 90 ))}"
OUT="${1:-$(mktemp -d -t bench-vs-kafka.XXXXXX)}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
BENCH_DIR="${BENCH_DIR:-$(mktemp -d -t bench-vs-kafka-data.XXXXXX)}"
mkdir -p "$BENCH_DIR"
BENCH_DIR="$(cd "$BENCH_DIR" && pwd)"
PAGECACHE_FLUSH=9223372036854775807

log() { echo "bench-vs-kafka: $*" >&2; }

workload_args() { # a|b|c -> weir bench arguments
  case "$1" in
    a) echo "produce --workload 1topic-16part-1kb-maxrate --acks 1" ;;
    b) echo "e2e --workload 1topic-16part-1kb-50k --acks all" ;;
    c) echo "produce --workload 1topic-1part-100b-maxrate --acks 1" ;;
    t) echo "txn --partitions 6 --message-size 1024 --rate 20000 --commit-every 0 --commit-interval 100ms --acks all" ;;
    u) echo "txn --partitions 16 --message-size 1024 --commit-every 1000 --acks all" ;;
    *) log "unknown workload $1 (want a, b, c, t or u)"; return 1 ;;
  esac
}
workload_name() {
  case "$1" in
    a) echo "a-1kb-16p-maxrate-acks1" ;;
    b) echo "b-1kb-16p-50k-acksall-e2e" ;;
    c) echo "c-100b-1p-maxrate-acks1" ;;
    t) echo "t-1kb-6p-20k-txn100ms" ;;
    u) echo "u-1kb-16p-maxrate-txn1000" ;;
  esac
}
for wl in $WORKLOADS; do workload_args "$wl" >/dev/null; done

# --- weir ------------------------------------------------------------------------------------
if [[ -z "${WEIR_BIN:-}" ]]; then
  WEIR_BIN="$OUT/weir"
  log "building weir from $REPO"
  (cd "$REPO" && go build -o "$WEIR_BIN" ./cmd/weir)
fi
WEIR_PID=""

start_weir() { # MODE DATADIR
  local mode="$1" dir="$2" args=()
  args=(serve --log-level warn --set "listeners=PLAINTEXT://127.0.0.1:$WEIR_PORT" --set "log.dirs=$dir/data"
    --set group.initial.rebalance.delay.ms=0)
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
KAFKA_FAILED=""
start_kafka() { # MODE DATADIR
  local mode="$1" dir="$2" props=()
  if [[ "$mode" == durable ]]; then props+=(log.flush.interval.messages=1); fi
  local startlog
  startlog="$OUT/logs/kafka-start-$(basename "$dir").log"
  "$KAFKA_ANCHOR/start.sh" "$KAFKA_PORT" "$dir" "${props[@]}" >/dev/null 2>"$startlog" || {
    KAFKA_FAILED="$(tail -n 5 "$startlog")"
    log "Kafka did not start: $KAFKA_FAILED"; return 1; }
  KAFKA_DIR="$dir"
}

stop_kafka() {
  [[ -n "$KAFKA_DIR" ]] || return 0
  "$KAFKA_ANCHOR/stop.sh" "$KAFKA_DIR" 2>>"$OUT/logs/kafka-stop.log" || true
  KAFKA_DIR=""
}

cleanup() { stop_weir; stop_kafka; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the runs --------------------------------------------------------------------------------
mkdir -p "$OUT/logs" "$OUT/runs" "$OUT/plots"

run_one() { # REP MODE WORKLOAD BROKER
  local rep="$1" mode="$2" wl="$3" which="$4" dir bootstrap name out rc=0 warm="$WARMUP"
  case "$wl" in t|u) warm="$TXN_WARMUP" ;; esac
  name="$(workload_name "$wl")"
  dir="$BENCH_DIR/$which-$mode-$wl-$rep"
  out="$OUT/runs/$name/$mode/$which-r$rep"
  rm -rf "$dir" "$out"
  if [[ "$which" == weir ]]; then
    start_weir "$mode" "$dir" || { rm -rf "$dir"; return 0; }
    bootstrap="127.0.0.1:$WEIR_PORT"
  else
    start_kafka "$mode" "$dir" || { rm -rf "$dir"; return 0; }
    bootstrap="127.0.0.1:$KAFKA_PORT"
  fi
  # shellcheck disable=SC2046,SC2086
  timeout -k 5 "$RUN_TIMEOUT" "$WEIR_BIN" bench $(workload_args "$wl") --bootstrap "$bootstrap" \
    --topic "bench-$wl" --duration "$DURATION" --warmup "$warm" --max-messages "$MAX_MESSAGES" \
    --broker-name "$which" --flush-mode "$mode" --data-dir "$dir" --out "$out" ${BENCH_ARGS:-} \
    >"$OUT/logs/$name-$mode-$which-r$rep.log" 2>&1 || rc=$?
  if (( rc != 0 )); then
    log "rep $rep $mode $name $which: weir bench exited $rc (see $OUT/logs/$name-$mode-$which-r$rep.log)"
  else
    log "rep $rep $mode $name $which: $(grep -m1 '^measured' "$OUT/logs/$name-$mode-$which-r$rep.log")"
  fi
  if [[ "$which" == weir ]]; then stop_weir; else stop_kafka; fi
  du -sh "$dir" 2>/dev/null | sed 's/^/bench-vs-kafka: data written: /' >&2 || true
  rm -rf "$dir"
}

{
  echo "machine: $(nproc) cores, kernel $(uname -r), $(df -T "$BENCH_DIR" | awk 'NR==2 { print $2 " on " $1 }') ($BENCH_DIR)"
  echo "$(cd "$REPO" && go version), $("$JAVA" -version 2>&1 | head -n1), Kafka $KAFKA_VERSION"
  echo "weir: ${WEIR_ENV:+$WEIR_ENV }$WEIR_BIN"
  echo "runs: workloads $WORKLOADS, flush $MODES, $REPS repetitions, $DURATION measured after $WARMUP warm-up, at most $MAX_MESSAGES messages${BENCH_ARGS:+, plus $BENCH_ARGS}"
} | tee -a "$OUT/machine.txt" >&2

t0="$(date +%s)"
n=0
if [[ "${REPORT_ONLY:-0}" == 1 ]]; then REPS=0; fi
for rep in $(seq "$REPS"); do
  for mode in $MODES; do
    for wl in $WORKLOADS; do
      order="$BROKERS"
      if (( (rep + n) % 2 == 0 )); then order="$(tr ' ' '\n' <<<"$BROKERS" | tac | tr '\n' ' ')"; fi
      n=$((n + 1))
      for which in $order; do
        run_one "$rep" "$mode" "$wl" "$which"
      done
    done
  done
done
log "runs took $(( $(date +%s) - t0 )) s"

# --- report and plots ------------------------------------------------------------------------
"$WEIR_BIN" bench report "$OUT/runs" >"$OUT/report.md" || log "weir bench report failed"
for wl in $WORKLOADS; do
  name="$(workload_name "$wl")"
  for mode in $MODES; do
    for kind in publish e2e commit; do
      files=(); labels=()
      for which in $BROKERS; do
        for f in "$OUT/runs/$name/$mode/$which"-r*/"$kind.hgrm"; do
          if [[ -f "$f" ]]; then files+=("$f"); labels+=("$which $(basename "$(dirname "$f")" | sed "s/^$which-//")"); fi
        done
      done
      (( ${#files[@]} > 0 )) || continue
      plot="$OUT/plots/$name-$mode-$kind.png"
      "$WEIR_BIN" hist compare --plot "$plot" --title "$name, $mode, $kind latency" \
        --labels "$(IFS=,; echo "${labels[*]}")" "${files[@]}" >"$OUT/plots/$name-$mode-$kind.txt" 2>&1 ||
        log "plot $plot failed: $(tail -n 2 "$OUT/plots/$name-$mode-$kind.txt")"
    done
  done
done

{ echo; cat "$OUT/machine.txt"; echo; cat "$OUT/report.md"; echo; echo "plots:"; ls "$OUT/plots/"*.png 2>/dev/null || echo "(none)"; }

# --- Kafka's own tools -----------------------------------------------------------------------
if [[ "${TOOLS:-1}" != 0 && ( "${REPORT_ONLY:-0}" != 1 || -f "$OUT/tools/results.tsv" ) ]]; then
  trap - EXIT; cleanup
  log "Kafka's tools against both brokers (scripts/bench-kafka-tools.sh $OUT/tools)"
  REPS="$REPS" WEIR_BIN="$WEIR_BIN" BENCH_DIR="$BENCH_DIR/tools" KAFKA_ANCHOR="$KAFKA_ANCHOR" MODES="$MODES" \
    "$REPO/scripts/bench-kafka-tools.sh" "$OUT/tools" || log "bench-kafka-tools.sh failed"
fi
if [[ -n "$KAFKA_FAILED" ]]; then log "Kafka failed to start at least once: $KAFKA_FAILED"; fi
log "summaries, .hgrm files, logs, report.md and plots in $OUT"

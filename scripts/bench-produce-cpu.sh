#!/usr/bin/env bash
# bench-produce-cpu.sh OUTDIR NAME=WEIR_BIN [NAME=WEIR_BIN ...]
#
# Broker CPU per record of weir binaries under Kafka's own ProducerPerformance (the 4.4.0 jars
# the Kafka anchor resolves), with what the broker saw of the producer's batching: produce
# requests, batches (one per partition of a request) and records, read from weir's /metrics
# before and after each run. Binaries alternate: in each repetition and flush policy every
# binary in turn (the first alternates between repetitions) starts on an empty data dir, takes a
# warm-up, then every cell, and stops.
#
#   cells    ProducerPerformance --throughput -1 for every PARTITIONS x SIZES x ACKS
#            (default 64 partitions x 100 B, 1 KiB x acks=1, all)
#
# Per run (rows of OUTDIR/runs.tsv): records/s and p50/p99 as the tool prints them, the broker's
# CPU time over the tool run (utime+stime from /proc/PID/stat, JVM start included), produce
# requests, batches and records appended; summary.txt has, per binary and cell, the median and
# range over repetitions of CPU µs per record, µs per request, records/s, batches per request
# and records per batch.
#
#   REPS            repetitions (default 3)
#   MODES           "pagecache durable" (default): log.flush.interval.messages=MAX, or weir's default
#   PARTITIONS      default 64; SIZES default "100 1024"; ACKS default "1 all"
#   RECORDS_100     records per run of 100 B (default 1000000); RECORDS_1024 (default 250000)
#   WARMUP_RECORDS  1 KiB records to a 6-partition topic first, not reported (default 100000)
#   PRODUCER_PROPS  extra producer properties, e.g. "linger.ms=0"
#   PROFILE_SECONDS when > 0, a Go CPU profile of the broker (/debug/pprof/profile) is taken over
#                   that many seconds from 2 s into every run: logs/r<rep>-<mode>-<name>-<cell>.pprof
#   PERF_STAT=1     count the broker's system calls and context switches over every run with
#                   `perf stat -p` (tracepoints; logs/...perf): read, write, pwrite64, futex,
#                   epoll_pwait, nanosleep, sched_yield, io_submit, fdatasync, context switches
#   RUN_TIMEOUT     seconds per tool run (default 180)
#   WEIR_PORT       default 29292; METRICS_PORT default 29293
#   BENCH_DIR       where the broker keeps its data (default: a mktemp dir under /tmp)
#   KAFKA_ANCHOR    folder with lib.sh (default ../shared/anchors/kafka)
#
# Everything listens on 127.0.0.1; every run is bounded by its record count and RUN_TIMEOUT.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KAFKA_ANCHOR="${KAFKA_ANCHOR:-$REPO/../shared/anchors/kafka}"
KAFKA_ANCHOR="$(cd "$KAFKA_ANCHOR" && pwd)"
# shellcheck source=/dev/null
source "$KAFKA_ANCHOR/lib.sh"

if (( $# < 2 )); then echo "usage: $0 OUTDIR NAME=WEIR_BIN [NAME=WEIR_BIN ...]" >&2; exit 2; fi
OUT="$1"; shift
BINS=("$@")
REPS="${REPS:-3}"
MODES="${MODES:-pagecache durable}"
PARTITIONS="${PARTITIONS:-64}"
SIZES="${SIZES:-100 1024}"
ACKS="${ACKS:-1 all}"
WARMUP_N="${WARMUP_RECORDS:-100000}"
RUN_TIMEOUT="${RUN_TIMEOUT:-180}"
WEIR_PORT="${WEIR_PORT:-29292}"
METRICS_PORT="${METRICS_PORT:-29293}"
mkdir -p "$OUT/logs"
OUT="$(cd "$OUT" && pwd)"
RUNS="$OUT/runs.tsv"
BENCH_DIR="${BENCH_DIR:-$(mktemp -d -t bench-produce-cpu.XXXXXX)}"
log() { echo "bench-produce-cpu: $*" >&2; }

records_for() { if [[ "$1" == 100 ]]; then echo "${RECORDS_100:-1000000}"; else echo "${RECORDS_1024:-250000}"; fi; }

kafka_libs
KAFKA_TOOL_LOG_OPTS="$(kafka_tool_log_opts "$OUT/logs")"
if kafka_tool org.apache.kafka.tools.ProducerPerformance --help 2>&1 | grep -q -- '--command-property'; then
  PROPS_FLAG=--command-property; else PROPS_FLAG=--producer-props; fi
CLK_TCK="$(getconf CLK_TCK)"

PID=""
stop_weir() {
  [[ -n "$PID" ]] || return 0
  kill -TERM "$PID" 2>/dev/null || true
  local i
  for i in $(seq 300); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$PID" 2>/dev/null && kill -KILL "$PID" 2>/dev/null || true
  wait "$PID" 2>/dev/null || true
  PID=""
}
trap stop_weir EXIT
trap 'exit 130' INT TERM

start_weir() { # BIN MODE DIR
  local bin="$1" mode="$2" dir="$3"
  local args=(serve --log-level warn --set "listeners=PLAINTEXT://127.0.0.1:$WEIR_PORT" --set "log.dirs=$dir/data"
    --set "metrics.listener=127.0.0.1:$METRICS_PORT" --set metrics.pprof.enable=true)
  if [[ "$mode" == pagecache ]]; then args+=(--set log.flush.interval.messages=9223372036854775807); fi
  if port_open "$WEIR_PORT"; then log "127.0.0.1:$WEIR_PORT is already in use"; return 1; fi
  "$bin" "${args[@]}" >"$dir/weir.log" 2>&1 </dev/null &
  PID=$!
  local deadline=$(( $(date +%s) + 60 ))
  until port_open "$WEIR_PORT"; do
    kill -0 "$PID" 2>/dev/null || { log "weir exited: $(tail -n 5 "$dir/weir.log")"; PID=""; return 1; }
    (( $(date +%s) < deadline )) || { log "weir did not listen within 60 s"; stop_weir; return 1; }
    sleep 0.1
  done
}

cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$PID/stat" 2>/dev/null || echo 0; }

# counters TOPIC: produce requests answered, batches and records appended to TOPIC
counters() {
  curl -s --max-time 10 "http://127.0.0.1:$METRICS_PORT/metrics" | awk -v t="$1" '
    /^weir_requests_total\{/ && /api="Produce"/ { req += $NF }
    /^weir_topic_produced_batches_total\{/ && index($0, "topic=\"" t "\"") { bat += $NF }
    /^weir_topic_messages_in_total\{/ && index($0, "topic=\"" t "\"") { rec += $NF }
    END { printf "%d %d %d\n", req, bat, rec }'
}

producer() { # LOG TOPIC RECORDS SIZE ACKS
  # shellcheck disable=SC2086
  timeout -k 10 "$RUN_TIMEOUT" "$JAVA" -Xmx512M $KAFKA_TOOL_LOG_OPTS -cp "$KAFKA_CP" org.apache.kafka.tools.ProducerPerformance \
    --topic "$2" --num-records "$3" --record-size "$4" --throughput -1 \
    "$PROPS_FLAG" bootstrap.servers="127.0.0.1:$WEIR_PORT" acks="$5" ${PRODUCER_PROPS:-} >"$1" 2>&1 || echo "exit status $?" >>"$1"
}

[[ -f "$RUNS" ]] || printf 'rep\tbin\tmode\tcell\trecords\trecords_per_s\tp50_ms\tp99_ms\tbroker_cpu_s\tproduce_requests\tbatches\trecords_appended\n' >"$RUNS"
{
  echo "$(date -u +%FT%TZ) machine: $(nproc) cores, kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
  for b in "${BINS[@]}"; do echo "binary ${b%%=*}: ${b#*=}"; done
  echo "reps $REPS, modes $MODES, partitions $PARTITIONS, sizes $SIZES, acks $ACKS, records 100 B $(records_for 100), 1 KiB $(records_for 1024), warm-up $WARMUP_N, producer props: ${PRODUCER_PROPS:-none}"
} | tee -a "$OUT/machine.txt" >&2

n=0
for rep in $(seq "$REPS"); do
  for mode in $MODES; do
    order=("${BINS[@]}")
    if (( (rep + n) % 2 == 0 )); then
      order=(); for (( i=${#BINS[@]}-1; i>=0; i-- )); do order+=("${BINS[$i]}"); done
    fi
    n=$((n + 1))
    for b in "${order[@]}"; do
      name="${b%%=*}" bin="${b#*=}"
      dir="$BENCH_DIR/$name-$mode-r$rep"
      rm -rf "$dir"; mkdir -p "$dir"
      start_weir "$bin" "$mode" "$dir" || { rm -rf "$dir"; continue; }
      log "rep $rep $mode $name: pid $PID"
      for p in $PARTITIONS; do for s in $SIZES; do
        "$bin" topic create "perf-p$p-s$s" --partitions "$p" --bootstrap "127.0.0.1:$WEIR_PORT" >>"$OUT/logs/topics.log" 2>&1
      done; done
      "$bin" topic create perf-warmup --partitions 6 --bootstrap "127.0.0.1:$WEIR_PORT" >>"$OUT/logs/topics.log" 2>&1
      if (( WARMUP_N > 0 )); then producer "$OUT/logs/r$rep-$mode-$name-warmup.log" perf-warmup "$WARMUP_N" 1024 1; fi
      for p in $PARTITIONS; do for s in $SIZES; do for a in $ACKS; do
        topic="perf-p$p-s$s" recs="$(records_for "$s")"
        lf="$OUT/logs/r$rep-$mode-$name-p$p-s$s-acks$a.log"
        read -r q0 b0 m0 < <(counters "$topic")
        t0="$(cpu_ticks)"
        prof_pid=""
        if (( ${PROFILE_SECONDS:-0} > 0 )); then
          ( sleep 2; curl -s --max-time $(( PROFILE_SECONDS + 10 )) -o "${lf%.log}.pprof" \
              "http://127.0.0.1:$METRICS_PORT/debug/pprof/profile?seconds=$PROFILE_SECONDS" ) &
          prof_pid=$!
        fi
        perf_pid=""
        if [[ "${PERF_STAT:-0}" == 1 ]]; then
          perf stat -x, -o "${lf%.log}.perf" -p "$PID" -e context-switches,syscalls:sys_enter_read,syscalls:sys_enter_write,syscalls:sys_enter_writev,syscalls:sys_enter_pwrite64,syscalls:sys_enter_futex,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_nanosleep,syscalls:sys_enter_sched_yield,syscalls:sys_enter_io_submit,syscalls:sys_enter_fdatasync,syscalls:sys_enter_madvise 2>/dev/null &
          perf_pid=$!
        fi
        producer "$lf" "$topic" "$recs" "$s" "$a"
        if [[ -n "$perf_pid" ]]; then kill -INT "$perf_pid" 2>/dev/null || true; wait "$perf_pid" 2>/dev/null || true; fi
        t1="$(cpu_ticks)"
        if [[ -n "$prof_pid" ]]; then wait "$prof_pid" || true; fi
        read -r q1 b1 m1 < <(counters "$topic")
        cpu="$(awk -v a="$t0" -v b="$t1" -v h="$CLK_TCK" 'BEGIN { printf "%.3f", (b - a) / h }')"
        line="$(grep -E 'records sent, .* 99\.9th\.' "$lf" | tail -n1 || true)"
        if [[ -z "$line" ]]; then log "no result in $lf"; continue; fi
        read -r sent rps p50 p99 < <(sed -E 's/^([0-9]+) records sent, ([0-9.]+) records\/sec .* ([0-9.]+) ms 50th, [0-9.]+ ms 95th, ([0-9.]+) ms 99th.*/\1 \2 \3 \4/' <<<"$line")
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$rep" "$name" "$mode" "produce p=$p size=$s acks=$a" \
          "$sent" "$rps" "$p50" "$p99" "$cpu" "$((q1 - q0))" "$((b1 - b0))" "$((m1 - m0))" >>"$RUNS"
        log "  p=$p size=$s acks=$a: $rps records/s, cpu ${cpu}s, $((q1 - q0)) requests, $((b1 - b0)) batches"
      done; done; done
      stop_weir
      rm -rf "$dir"
    done
  done
done

python3 - "$RUNS" "$OUT/logs" >"$OUT/summary.txt" <<'EOF'
import csv, os, re, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
groups = {}
for r in rows:
    groups.setdefault((r["mode"], r["cell"], r["bin"]), []).append(r)
def fmt(vals, f):
    vals = sorted(vals)
    return f"{f(statistics.median(vals))} ({f(vals[0])}-{f(vals[-1])})"
print("mode\tcell\tbinary\truns\tcpu_us_per_record\tcpu_us_per_request\trecords_per_s\tbatches_per_request\trecords_per_batch")
for (mode, cell, b), rs in sorted(groups.items()):
    n = lambda r: max(float(r["records"]), 1)
    cpu_rec = [float(r["broker_cpu_s"]) * 1e6 / n(r) for r in rs]
    cpu_req = [float(r["broker_cpu_s"]) * 1e6 / max(int(r["produce_requests"]), 1) for r in rs]
    rps = [float(r["records_per_s"]) for r in rs]
    bpr = [int(r["batches"]) / max(int(r["produce_requests"]), 1) for r in rs]
    rpb = [int(r["records_appended"]) / max(int(r["batches"]), 1) for r in rs]
    print("\t".join([mode, cell, b, str(len(rs)), fmt(cpu_rec, lambda v: f"{v:.2f}"), fmt(cpu_req, lambda v: f"{v:.0f}"),
                     fmt(rps, lambda v: f"{v/1000:.0f}k"), fmt(bpr, lambda v: f"{v:.1f}"), fmt(rpb, lambda v: f"{v:.1f}")]))
# PERF_STAT: the broker's system calls and context switches per produce request.
perf = {}
for r in rows:
    m = re.match(r"produce p=(\d+) size=(\d+) acks=(\w+)", r["cell"])
    f = os.path.join(sys.argv[2], f"r{r['rep']}-{r['mode']}-{r['bin']}-p{m[1]}-s{m[2]}-acks{m[3]}.perf")
    if not os.path.exists(f):
        continue
    counts = {}
    for line in open(f):
        parts = line.strip().split(",")
        if len(parts) > 2 and parts[0].isdigit():
            counts[parts[2].replace("syscalls:sys_enter_", "")] = int(parts[0])
    perf.setdefault((r["mode"], r["cell"], r["bin"]), []).append((counts, max(int(r["produce_requests"]), 1)))
if perf:
    names = ["context-switches", "read", "write", "pwrite64", "futex", "epoll_pwait", "nanosleep", "sched_yield", "io_submit", "fdatasync", "madvise"]
    print()
    print("per produce request (median over runs)\tbinary\t" + "\t".join(names))
    for (mode, cell, b), runs in sorted(perf.items()):
        vals = [f"{statistics.median(c.get(n, 0) / q for c, q in runs):.2f}" for n in names]
        print("\t".join([f"{mode} {cell}", b] + vals))
EOF
column -t -s$'\t' "$OUT/summary.txt" >&2
log "runs.tsv, summary.txt and the tools' output (logs/) in $OUT"

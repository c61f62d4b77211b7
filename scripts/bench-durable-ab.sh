#!/usr/bin/env bash
# bench-durable-ab.sh OLD_BIN NEW_BIN OUTDIR
#
# Durable acknowledgements (weir's default, log.flush.interval.messages=1), two weir binaries
# (e.g. before and after a flusher change) alternating, one broker at a time on an empty data dir.
# STEPS selects what runs (default "engine syscalls tails tools"):
#
#   engine    when ENGINE_OLD_TEST and ENGINE_NEW_TEST name the engine test binaries of the two
#             versions (`go test -c ./engine/`): BenchmarkDurableRequests (a produce-shaped request
#             over P partitions of one log dir, then a wait for all) -benchtime ENGINE_BENCHTIME
#             (1000x), alternating, REPS times: OUTDIR/engine-<bin>-r<N>.txt.
#   tools     Kafka's ProducerPerformance over the durable produce cells and EndToEndLatency, through
#             scripts/bench-kafka-tools.sh (BROKERS=weir MODES=durable TOOLS_CELLS="produce e2e" REPS=1;
#             its TOOLS_* variables pass through),
#             once per binary per repetition, the first binary alternating: OUTDIR/tools-<bin>-r<N>/
#             results.tsv (records/s, p50/p99/p999, broker CPU seconds).
#   syscalls  per binary: one ProducerPerformance run (SYS_PARTITIONS partitions, SYS_SIZE B,
#             acks=all, SYS_RECORDS records after a warm-up) under `perf stat` (context switches,
#             task clock), and one under `strace -c -f` (syscall counts); produce responses and
#             fsyncs counted from the broker's /metrics around each run: OUTDIR/sys-<bin>-*.txt.
#   tails     `weir bench disk` (fdatasync latency of this disk, one appender; before and after), then per binary
#             `weir bench e2e` at E2E_RATE msg/s (16 partitions, 1 KiB, acks=all) for E2E_DURATION
#             while /proc/meminfo Dirty/Writeback and the broker's /proc/PID/io are sampled every
#             second: OUTDIR/e2e-<bin>-r<N>/ (summary.json, e2e.hgrm), OUTDIR/e2e-<bin>-r<N>.mem, and
#             the broker's flush-cycle latency histogram after the run: OUTDIR/e2e-<bin>-r<N>.flush.
#
#   REPS (default 3), SYS_PARTITIONS (6), SYS_SIZE (100), SYS_RECORDS (300000), E2E_RATE (50000),
#   E2E_DURATION (20s), PORT (29192; metrics on PORT+1000), BROKER_SET (extra `--set k=v` flags of
#   the syscalls and tails brokers, e.g. "--set log.preallocate=true")
#
# Everything listens on 127.0.0.1 only; every run is bounded by a record count or a duration and
# a timeout.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
old="$(realpath "${1:?usage: $0 OLD_BIN NEW_BIN OUTDIR}")"
new="$(realpath "${2:?usage: $0 OLD_BIN NEW_BIN OUTDIR}")"
out="${3:?usage: $0 OLD_BIN NEW_BIN OUTDIR}"
mkdir -p "$out"; out="$(cd "$out" && pwd)"
REPS="${REPS:-3}"
STEPS="${STEPS:-engine syscalls tails tools}"
PORT="${PORT:-29192}"
MPORT=$((PORT + 1000))
SYS_PARTITIONS="${SYS_PARTITIONS:-6}"
SYS_SIZE="${SYS_SIZE:-100}"
SYS_RECORDS="${SYS_RECORDS:-300000}"
E2E_RATE="${E2E_RATE:-50000}"
E2E_DURATION="${E2E_DURATION:-20s}"
source "$REPO/../shared/anchors/kafka/lib.sh"
kafka_libs
log() { echo "[$(date -u +%H:%M:%S)] $*" >&2; }
has() { [[ " $STEPS " == *" $1 "* ]]; }
label() { [[ "$1" == "$old" ]] && echo old || echo new; }

order() { # REP: the two binaries, the first alternating
  if (( $1 % 2 == 1 )); then echo "$old $new"; else echo "$new $old"; fi
}

PID=""
DATA=""
start() { # BIN
  DATA="$(mktemp -d -t durable-ab.XXXXXX)"
  "$1" serve --log-level warn --set "listeners=PLAINTEXT://127.0.0.1:$PORT" --set "log.dirs=$DATA/data" \
    --set "metrics.listener=127.0.0.1:$MPORT" --set group.initial.rebalance.delay.ms=0 ${BROKER_SET:-} >"$DATA/weir.log" 2>&1 </dev/null &
  PID=$!
  for _ in $(seq 1 200); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && return 0; sleep 0.1; done
  log "broker did not start"; return 1
}
stop() {
  [[ -n "$PID" ]] || return 0
  kill -TERM "$PID" 2>/dev/null || true
  wait "$PID" 2>/dev/null || true
  PID=""
  rm -rf "$DATA"
}
trap stop EXIT
metric() { # NAME-REGEX: sum of matching series
  curl -s "http://127.0.0.1:$MPORT/metrics" | awk -v re="$1" '$0 !~ /^#/ && $1 ~ re { s += $2 } END { printf "%.0f", s }'
}
ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$PID/stat"; }
pp() { # TOPIC N SIZE ACKS
  timeout 300 java -Xmx512M -cp "$KAFKA_CP" org.apache.kafka.tools.ProducerPerformance --topic "$1" --num-records "$2" \
    --record-size "$3" --throughput -1 --producer-props bootstrap.servers="127.0.0.1:$PORT" acks="$4" 2>&1 | tail -n 1
}

if has engine && [[ -n "${ENGINE_OLD_TEST:-}" && -n "${ENGINE_NEW_TEST:-}" ]]; then
  for rep in $(seq 1 "$REPS"); do
    for t in $(if (( rep % 2 == 1 )); then echo "$ENGINE_OLD_TEST $ENGINE_NEW_TEST"; else echo "$ENGINE_NEW_TEST $ENGINE_OLD_TEST"; fi); do
      l=new; [[ "$t" == "$ENGINE_OLD_TEST" ]] && l=old
      log "engine rep $rep $l"
      (cd "$(mktemp -d)" && timeout 600 "$t" -test.run '^$' -test.bench 'DurableRequests' \
        -test.benchtime "${ENGINE_BENCHTIME:-1000x}" -test.benchmem) >"$out/engine-$l-r$rep.txt" 2>&1 || log "engine bench failed"
    done
  done
fi

if has tools; then
  for rep in $(seq 1 "$REPS"); do
    for bin in $(order "$rep"); do
      l="$(label "$bin")"
      log "tools rep $rep $l"
      BROKERS=weir WEIR_BIN="$bin" MODES=durable TOOLS_CELLS="${TOOLS_CELLS:-produce e2e}" REPS=1 \
        "$REPO/scripts/bench-kafka-tools.sh" "$out/tools-$l-r$rep" >"$out/tools-$l-r$rep.log" 2>&1 || log "tools run failed: see $out/tools-$l-r$rep.log"
    done
  done
fi

if has syscalls; then
  for bin in $(order 1); do
    l="$(label "$bin")"
    for tool in perf strace; do
      start "$bin"
      "$bin" topic create t --partitions "$SYS_PARTITIONS" --bootstrap "127.0.0.1:$PORT" >/dev/null
      pp t 100000 "$SYS_SIZE" all >/dev/null # warm-up
      r0="$(metric 'weir_requests_total.*api="Produce"')"; f0="$(metric '^weir_log_flush_duration_seconds_count')"; c0="$(ticks)"
      if [[ "$tool" == perf ]]; then
        perf stat -e task-clock,context-switches,cpu-migrations -p "$PID" -o "$out/sys-$l-perf.txt" &
      else
        strace -c -f -p "$PID" -o "$out/sys-$l-strace.txt" &
      fi
      tpid=$!
      sleep 1
      res="$(pp t "$SYS_RECORDS" "$SYS_SIZE" all)"
      kill -INT "$tpid"; wait "$tpid" 2>/dev/null || true
      r1="$(metric 'weir_requests_total.*api="Produce"')"; f1="$(metric '^weir_log_flush_duration_seconds_count')"; c1="$(ticks)"
      echo "$tool $l: produce responses $((r1 - r0)), fsync observations $((f1 - f0)), broker cpu ticks $((c1 - c0)); $res" | tee -a "$out/sys-summary.txt"
      stop
    done
  done
fi

if has tails; then
  disk() { # N: the disk's fdatasync latency now (before and after the e2e runs)
    local d; d="$(mktemp -d -t durable-ab-disk.XXXXXX)"
    "$new" bench disk --dir "$d" --duration 5s --appenders 1 --append-bytes 134217728 --out "$out/disk-$1" >"$out/disk-$1.txt" 2>&1 || true
    rm -rf "$d"
  }
  disk 1
  for rep in $(seq 1 "$REPS"); do
    for bin in $(order "$rep"); do
      l="$(label "$bin")"
      log "e2e rep $rep $l"
      start "$bin"
      ( while kill -0 "$PID" 2>/dev/null; do
          printf '%s %s %s\n' "$(date +%s)" "$(awk '/^(Dirty|Writeback):/ { printf "%s=%s ", $1, $2 }' /proc/meminfo)" \
            "$(awk '{ printf "%s ", $0 }' "/proc/$PID/io" 2>/dev/null)"
          sleep 1
        done ) >"$out/e2e-$l-r$rep.mem" &
      spid=$!
      c0="$(ticks)"
      timeout 120 "$new" bench e2e --bootstrap "127.0.0.1:$PORT" --partitions 16 --message-size 1024 --rate "$E2E_RATE" \
        --acks all --duration "$E2E_DURATION" --warmup 5s --quiet --data-dir "$DATA/data" --out "$out/e2e-$l-r$rep" \
        >"$out/e2e-$l-r$rep.txt" 2>&1 || log "e2e failed: see $out/e2e-$l-r$rep.txt"
      c1="$(ticks)"
      echo "e2e $l r$rep: broker cpu ticks $((c1 - c0))" >>"$out/e2e-$l-r$rep.txt"
      # The broker's own flush-cycle latencies over the run (histogram buckets, seconds).
      curl -s "http://127.0.0.1:$MPORT/metrics" | grep -E '^weir_log_flush_(duration_seconds|batch_appends)_(bucket|sum|count)' >"$out/e2e-$l-r$rep.flush" || true
      kill "$spid" 2>/dev/null || true
      stop
    done
  done
  disk 2
fi
log "done: $out"

#!/usr/bin/env bash
# bench-cluster.sh [OUTDIR]     (also: make bench-cluster [OUT=dir])
#
# A replicated 3-broker weir cluster on this machine (127.0.0.1 only), three measurements:
#
#   produce   3 brokers, topic RF=3, min.insync.replicas=2, acks=all, 1 KiB x 16 partitions, at max
#             rate and at a fixed 20k msg/s (`weir bench produce`, franz-go, HdrHistogram latencies
#             from each message's intended send time); weir, then the same against a 3-node Apache
#             Kafka KRaft cluster (combined broker+controller nodes, static controller.quorum.voters,
#             each node with its own log dir and ports), same disk, same load generator. Flush modes:
#               durable    weir's default (acks wait for a group-commit fdatasync) vs Kafka with
#                          log.flush.interval.messages=1
#               pagecache  weir with log.flush.interval.messages=9223372036854775807 vs Kafka's defaults
#             One fresh cluster per broker, flush mode and repetition; both rates run against it
#             (one topic per rate). `weir bench report` prints the tables and weir/Kafka ratios.
#   failover  weir RF=3 at default settings (plus min.insync.replicas=2), an acks=all producer at
#             FAILOVER_RATE msg/s on 3 partitions: SIGKILL the leader of partition 0, time from the
#             kill to the first acknowledgement of a partition-0 batch by another broker; restart
#             the killed broker, wait for the full ISR; FAILOVER_CYCLES times; min/median/max.
#             (weir bench cluster failover)
#   catchup   weir RF=3, 16 partitions: SIGTERM a follower, produce CATCHUP_BYTES with
#             acks=CATCHUP_ACKS while it is down, restart it, time until it is back in the ISR of
#             every partition; MB/s = segment bytes it was behind / that time.
#             (weir bench cluster catchup)
#
#   PARTS          default "produce failover catchup"
#   DURATION       measured time per produce run (default 20s; QUICK=1: 5s)
#   WARMUP         warm-up per produce run (default 5s; QUICK=1: 2s)
#   REPS           repetitions of the produce runs (default 1)
#   RATES          default "max 20000" (msg/s; max = as fast as possible)
#   MODES          default "durable pagecache"
#   BROKERS        default "weir kafka"
#   FAILOVER_CYCLES  default 5 (QUICK=1: 3);  FAILOVER_RATE  default 2000 msg/s
#   CATCHUP_BYTES  default 1GiB (QUICK=1: 256MiB);  CATCHUP_ACKS  default 1
#   MAX_MESSAGES   cap per produce run (default 50000000)
#   BENCH_DIR      brokers' data (default: mktemp -d); put it on the disk being judged
#   WEIR_PORT_BASE default 29192 (clients +0..2, controllers +100..102, admin listeners +200..202)
#   KAFKA_PORT_BASE default 39192 (clients +0..2, controllers +100..102)
#   KAFKA_HEAP_OPTS  per Kafka node (default -Xmx1G -Xms1G)
#   KAFKA_ANCHOR   folder with lib.sh/setup.sh (default ../shared/anchors/kafka)
#   WEIR_BIN       a weir binary to use instead of building one from this tree
#   RUN_TIMEOUT    seconds before one `weir bench` run is stopped (default DURATION+WARMUP+90)
#
# Results: OUTDIR/runs/<workload>/<flush>/<broker>-r<rep>/{summary.json,*.hgrm},
# OUTDIR/report.md, OUTDIR/failover/result.json, OUTDIR/catchup/result.json, OUTDIR/logs,
# OUTDIR/summary.txt. Child processes are stopped on exit (trap).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KAFKA_ANCHOR="${KAFKA_ANCHOR:-$REPO/../shared/anchors/kafka}"
KAFKA_ANCHOR="$(cd "$KAFKA_ANCHOR" && pwd)"
# shellcheck source=/dev/null
source "$KAFKA_ANCHOR/lib.sh"

if [[ "${QUICK:-0}" == 1 ]]; then
  DURATION="${DURATION:-5s}"; WARMUP="${WARMUP:-2s}"
  FAILOVER_CYCLES="${FAILOVER_CYCLES:-3}"; CATCHUP_BYTES="${CATCHUP_BYTES:-256MiB}"
fi
PARTS="${PARTS:-produce failover catchup}"
DURATION="${DURATION:-20s}"
WARMUP="${WARMUP:-5s}"
REPS="${REPS:-1}"
RATES="${RATES:-max 20000}"
MODES="${MODES:-durable pagecache}"
BROKERS="${BROKERS:-weir kafka}"
FAILOVER_CYCLES="${FAILOVER_CYCLES:-5}"
FAILOVER_RATE="${FAILOVER_RATE:-2000}"
CATCHUP_BYTES="${CATCHUP_BYTES:-1GiB}"
CATCHUP_ACKS="${CATCHUP_ACKS:-1}"
MAX_MESSAGES="${MAX_MESSAGES:-50000000}"
WEIR_PORT_BASE="${WEIR_PORT_BASE:-29192}"
KAFKA_PORT_BASE="${KAFKA_PORT_BASE:-39192}"
PARTITIONS=16
MESSAGE_SIZE=1024
PAGECACHE_FLUSH=9223372036854775807
secs() { # 20s, 1m, 500ms, 20 -> whole seconds (rounded up)
  local v="$1"
  case "$v" in
    *ms) echo $(( (${v%ms} + 999) / 1000 )) ;;
    *m) echo $(( ${v%m} * 60 )) ;;
    *s) echo "${v%s}" | awk '{ printf "%d", ($1 == int($1)) ? $1 : int($1) + 1 }' ;;
    *) echo "$v" ;;
  esac
}
RUN_TIMEOUT="${RUN_TIMEOUT:-$(( $(secs "$DURATION") + $(secs "$WARMUP") + 90 ))}"
OUT="${1:-$(mktemp -d -t bench-cluster.XXXXXX)}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
BENCH_DIR="${BENCH_DIR:-$(mktemp -d -t bench-cluster-data.XXXXXX)}"
mkdir -p "$BENCH_DIR"
BENCH_DIR="$(cd "$BENCH_DIR" && pwd)"
mkdir -p "$OUT/logs" "$OUT/runs"

log() { echo "bench-cluster: $(date +%H:%M:%S) $*" >&2; }

if [[ -z "${WEIR_BIN:-}" ]]; then
  WEIR_BIN="$OUT/weir"
  log "building weir from $REPO"
  (cd "$REPO" && go build -o "$WEIR_BIN" ./cmd/weir)
fi

# --- process bookkeeping -----------------------------------------------------------------------
PIDS=()          # every broker process of the current cluster
CB_PID=""        # a running weir bench (run in the background and waited for, so a
                 # signal reaches the trap at once)
CUR_DIR=""       # the data dir of the running produce cluster, removed on exit
cleanup() {
  local p
  if [[ -n "$CB_PID" ]]; then kill -TERM "$CB_PID" 2>/dev/null || true; wait "$CB_PID" 2>/dev/null || true; fi
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for _ in $(seq 150); do
    local alive=0
    for p in "${PIDS[@]}"; do if kill -0 "$p" 2>/dev/null; then alive=1; fi; done
    (( alive )) || break
    sleep 0.2
  done
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  PIDS=()
  if [[ -n "$CUR_DIR" ]]; then rm -rf "$CUR_DIR"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The last Kafka node of a cluster that stops as a whole waits for a controlled shutdown its lost
# quorum cannot grant; its data is deleted anyway, so it gets 15 s.
stop_cluster() { # [GRACE seconds, default 60]: SIGTERM all, then SIGKILL after GRACE
  local p t0 grace="${1:-60}"
  t0="$(date +%s)"
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do
    while kill -0 "$p" 2>/dev/null && (( $(date +%s) - t0 < grace )); do sleep 0.2; done
    if kill -0 "$p" 2>/dev/null; then log "pid $p still up after $grace s; SIGKILL"; kill -KILL "$p" 2>/dev/null || true; fi
    wait "$p" 2>/dev/null || true
  done
  PIDS=()
}

bootstrap_of() { # PORT_BASE -> host:port,host:port,host:port
  echo "127.0.0.1:$1,127.0.0.1:$(( $1 + 1 )),127.0.0.1:$(( $1 + 2 ))"
}
voters_of() { # PORT_BASE -> 1@127.0.0.1:C1,...
  echo "1@127.0.0.1:$(( $1 + 100 )),2@127.0.0.1:$(( $1 + 101 )),3@127.0.0.1:$(( $1 + 102 ))"
}
check_ports() { # PORT_BASE
  local i
  for i in 0 1 2; do
    for p in $(( $1 + i )) $(( $1 + 100 + i )) $(( $1 + 200 + i )); do
      if port_open "$p"; then log "127.0.0.1:$p is already in use"; return 1; fi
    done
  done
}

# Create TOPIC (RF=3, 16 partitions, min.insync.replicas=2) retrying until every broker is
# registered, then wait for a full ISR on every partition.
create_topic() { # BOOTSTRAP TOPIC
  local bs="$1" topic="$2" deadline out
  deadline=$(( $(date +%s) + 120 ))
  until out="$(timeout 30 "$WEIR_BIN" topic create "$topic" --bootstrap "$bs" --partitions "$PARTITIONS" \
      --replication-factor 3 --config min.insync.replicas=2 2>&1)" || [[ "$out" == *already* || "$out" == *ALREADY* ]]; do
    (( $(date +%s) < deadline )) || { log "topic $topic not created: $out"; return 1; }
    sleep 0.5
  done
  until timeout 30 "$WEIR_BIN" topic describe "$topic" --bootstrap "$bs" 2>/dev/null |
      awk -F'\t' '/Partition:/ { n++; for (i = 1; i <= NF; i++) if ($i ~ /^Isr:/) { split(substr($i, 6), a, ","); if (length(a) < 3) bad = 1 } }
                  END { exit !(n == '"$PARTITIONS"' && !bad) }'; do
    (( $(date +%s) < deadline )) || { log "topic $topic: no full ISR within 120 s"; return 1; }
    sleep 0.5
  done
}

# --- weir cluster --------------------------------------------------------------------------------
start_weir_cluster() { # MODE DIR: `weir dev-cluster` (node i in DIR/node-i, ready = its /readyz answers 200)
  local mode="$1" dir="$2" extra=()
  check_ports "$WEIR_PORT_BASE" || return 1
  if [[ "$mode" == pagecache ]]; then extra+=(--set "log.flush.interval.messages=$PAGECACHE_FLUSH"); fi
  # dev-cluster's defaults for 3 nodes are this benchmark's: replication factors 3, min.insync.replicas=2.
  "$WEIR_BIN" dev-cluster -n 3 --dir "$dir" --base-port "$WEIR_PORT_BASE" \
    --controller-base-port $(( WEIR_PORT_BASE + 100 )) --metrics-base-port $(( WEIR_PORT_BASE + 200 )) \
    --start-timeout 90s --stop-timeout 50s "${extra[@]}" >"$dir/dev-cluster.txt" 2>&1 </dev/null &
  PIDS+=($!)
  until grep -q '^all 3 nodes started' "$dir/dev-cluster.txt" 2>/dev/null; do
    kill -0 "${PIDS[0]}" 2>/dev/null || { log "weir dev-cluster exited: $(tail -n 5 "$dir/dev-cluster.txt")"; return 1; }
    sleep 0.1
  done
}

# --- Kafka cluster -------------------------------------------------------------------------------
KAFKA_FAILED=""
KAFKA_CLUSTER_ID=""
start_kafka_cluster() { # MODE DIR
  local mode="$1" dir="$2" i port cport voters cfg storage
  check_ports "$KAFKA_PORT_BASE" || return 1
  kafka_libs 2>/dev/null
  KAFKA_TOOL_LOG_OPTS="$(kafka_tool_log_opts "$dir")"
  export KAFKA_TOOL_LOG_OPTS
  storage="$(kafka_find_class org.apache.kafka.tools.StorageTool kafka.tools.StorageTool)"
  if [[ -z "$KAFKA_CLUSTER_ID" ]]; then KAFKA_CLUSTER_ID="$(kafka_tool "$storage" random-uuid 2>/dev/null | tail -n1)"; fi
  voters="$(voters_of "$KAFKA_PORT_BASE")"
  local fmt_pids=()
  for i in 1 2 3; do
    port=$(( KAFKA_PORT_BASE + i - 1 )); cport=$(( KAFKA_PORT_BASE + 100 + i - 1 ))
    mkdir -p "$dir/node$i"
    cfg="$dir/node$i/server.properties"
    cat >"$cfg" <<EOF
# written by bench-cluster.sh: node $i of a 3-node KRaft cluster (broker + controller), loopback only
process.roles=broker,controller
node.id=$i
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$dir/node$i/data
num.partitions=1
default.replication.factor=3
min.insync.replicas=2
offsets.topic.replication.factor=3
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
group.initial.rebalance.delay.ms=0
# Kafka's defaults from config/server.properties of the distribution:
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
num.recovery.threads.per.data.dir=1
log.segment.bytes=1073741824
log.retention.hours=168
EOF
    if [[ "$mode" == durable ]]; then echo "log.flush.interval.messages=1" >>"$cfg"; fi
    cat >"$dir/node$i/log4j2.properties" <<EOF
rootLogger.level = info
rootLogger.appenderRef.file.ref = FILE
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = $dir/node$i/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
EOF
    kafka_tool "$storage" format -t "$KAFKA_CLUSTER_ID" -c "$cfg" >"$dir/node$i/format.log" 2>&1 &
    fmt_pids+=($!)
  done
  for i in 0 1 2; do
    wait "${fmt_pids[$i]}" || { KAFKA_FAILED="kafka-storage format of node $((i + 1)) failed: $(tail -n 3 "$dir/node$((i + 1))/format.log")"; log "$KAFKA_FAILED"; return 1; }
  done
  for i in 1 2 3; do
    # Same JVM flags as kafka-run-class.sh uses for the broker (as the anchor's start.sh).
    # shellcheck disable=SC2086
    "$JAVA" ${KAFKA_HEAP_OPTS:--Xmx1G -Xms1G} \
      -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 \
      -XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true \
      -Dlog4j2.configurationFile="$dir/node$i/log4j2.properties" -Dkafka.logs.dir="$dir/node$i" \
      -cp "$KAFKA_CP" kafka.Kafka "$dir/node$i/server.properties" >"$dir/node$i/stdout.log" 2>&1 </dev/null &
    PIDS+=($!)
  done
  local deadline=$(( $(date +%s) + 180 ))
  for i in 1 2 3; do
    until port_open $(( KAFKA_PORT_BASE + i - 1 )); do
      kill -0 "${PIDS[$((i - 1))]}" 2>/dev/null || {
        KAFKA_FAILED="node $i exited at start: $(tail -n 5 "$dir/node$i/stdout.log" "$dir/node$i/server.log" 2>/dev/null | tr '\n' ' ')"
        log "$KAFKA_FAILED"; return 1; }
      (( $(date +%s) < deadline )) || { KAFKA_FAILED="node $i: port not open within 180 s"; log "$KAFKA_FAILED"; return 1; }
      sleep 0.2
    done
  done
}

# --- produce runs --------------------------------------------------------------------------------
rate_args() { if [[ "$1" == max ]]; then echo "--rate 0"; else echo "--rate $1"; fi; }
rate_name() { if [[ "$1" == max ]]; then echo "1kb-16p-rf3-maxrate-acksall"; else echo "1kb-16p-rf3-$(( $1 / 1000 ))k-acksall"; fi; }

produce_runs() { # REP MODE BROKER
  local rep="$1" mode="$2" which="$3" dir bs rate name out rc t0
  dir="$BENCH_DIR/$which-$mode-r$rep"
  rm -rf "$dir"; mkdir -p "$dir"
  CUR_DIR="$dir"
  t0="$(date +%s)"
  if [[ "$which" == weir ]]; then
    start_weir_cluster "$mode" "$dir" || { stop_cluster; cp_logs "$dir" "$which-$mode-r$rep"; rm -rf "$dir"; return 0; }
    bs="$(bootstrap_of "$WEIR_PORT_BASE")"
  else
    start_kafka_cluster "$mode" "$dir" || { stop_cluster; cp_logs "$dir" "$which-$mode-r$rep"; rm -rf "$dir"; return 0; }
    bs="$(bootstrap_of "$KAFKA_PORT_BASE")"
  fi
  for rate in $RATES; do
    name="$(rate_name "$rate")"
    create_topic "$bs" "bench-$rate" || { KAFKA_FAILED="${KAFKA_FAILED:-$which: topic bench-$rate not ready}"; continue; }
  done
  log "$which $mode r$rep: cluster of 3 ready after $(( $(date +%s) - t0 )) s"
  for rate in $RATES; do
    name="$(rate_name "$rate")"
    out="$OUT/runs/$name/$mode/$which-r$rep"
    rm -rf "$out"
    rc=0
    # shellcheck disable=SC2046
    timeout -k 5 "$RUN_TIMEOUT" "$WEIR_BIN" bench produce --bootstrap "$bs" --topic "bench-$rate" \
      --partitions "$PARTITIONS" --replication-factor 3 --message-size "$MESSAGE_SIZE" --acks all \
      $(rate_args "$rate") --duration "$DURATION" --warmup "$WARMUP" --max-messages "$MAX_MESSAGES" \
      --broker-name "$which" --flush-mode "$mode" --data-dir "$dir" --out "$out" \
      >"$OUT/logs/$name-$mode-$which-r$rep.log" 2>&1 &
    CB_PID=$!
    wait "$CB_PID" || rc=$?
    CB_PID=""
    if (( rc != 0 )); then
      log "r$rep $mode $name $which: weir bench exited $rc (see $OUT/logs/$name-$mode-$which-r$rep.log)"
    else
      log "r$rep $mode $name $which: $(grep -m1 '^measured' "$OUT/logs/$name-$mode-$which-r$rep.log" || tail -n1 "$OUT/logs/$name-$mode-$which-r$rep.log")"
    fi
  done
  du -sh "$dir" 2>/dev/null | sed 's/^/bench-cluster: data written: /' >&2 || true
  if [[ "$which" == kafka ]]; then stop_cluster 15; else stop_cluster 60; fi
  cp_logs "$dir" "$which-$mode-r$rep"
  rm -rf "$dir"
  CUR_DIR=""
}

cp_logs() { # DIR NAME: keep the brokers' logs
  local i
  for i in 1 2 3; do
    for f in weir.log server.log stdout.log format.log; do
      if [[ -f "$1/node$i/$f" ]]; then cp "$1/node$i/$f" "$OUT/logs/$2-node$i-$f"; fi
      if [[ -f "$1/node-$i/$f" ]]; then cp "$1/node-$i/$f" "$OUT/logs/$2-node$i-$f"; fi
    done
  done
  if [[ -f "$1/dev-cluster.txt" ]]; then cp "$1/dev-cluster.txt" "$OUT/logs/$2-dev-cluster.txt"; fi
}

{
  echo "machine: $(nproc) cores, kernel $(uname -r), $(df -T "$BENCH_DIR" | awk 'NR==2 { print $2 " on " $1 }') ($BENCH_DIR), load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "$(cd "$REPO" && go version), $("$JAVA" -version 2>&1 | head -n1), Kafka $KAFKA_VERSION"
  echo "parts: $PARTS; produce: rates $RATES, flush $MODES, brokers $BROKERS, $REPS reps, $DURATION after $WARMUP warm-up;" \
    "failover: $FAILOVER_CYCLES cycles at $FAILOVER_RATE msg/s; catch-up: $CATCHUP_BYTES acks=$CATCHUP_ACKS"
} | tee -a "$OUT/machine.txt" >&2

T0="$(date +%s)"
if [[ " $PARTS " == *" produce "* ]]; then
  n=0
  for rep in $(seq "$REPS"); do
    for mode in $MODES; do
      order="$BROKERS"
      if (( (rep + n) % 2 == 0 )); then order="$(tr ' ' '\n' <<<"$BROKERS" | tac | tr '\n' ' ')"; fi
      n=$((n + 1))
      for which in $order; do produce_runs "$rep" "$mode" "$which"; done
    done
  done
  log "produce runs took $(( $(date +%s) - T0 )) s"
  "$WEIR_BIN" bench report "$OUT/runs" >"$OUT/report.md" 2>"$OUT/logs/report.err" || log "weir bench report failed: $(cat "$OUT/logs/report.err")"
fi

run_bench_cluster() { # NAME ARGS...
  local name="$1" rc=0; shift
  rm -rf "${BENCH_DIR:?}/$name"
  CUR_DIR="$BENCH_DIR/$name"
  "$WEIR_BIN" bench cluster "$@" --weir "$WEIR_BIN" --dir "$BENCH_DIR/$name" --out "$OUT/$name" --port-base "$WEIR_PORT_BASE" \
    >"$OUT/$name.txt" 2>"$OUT/logs/$name.log" &
  CB_PID=$!
  wait "$CB_PID" || rc=$?
  CB_PID=""
  for f in "$BENCH_DIR/$name"/node-*/weir.log; do [[ -f "$f" ]] && cp "$f" "$OUT/logs/$name-$(basename "$(dirname "$f")").log"; done
  rm -rf "${BENCH_DIR:?}/$name"
  CUR_DIR=""
  if (( rc != 0 )); then log "$name failed ($rc): $(tail -n 3 "$OUT/logs/$name.log")"; else log "$name: $(cat "$OUT/$name.txt")"; fi
}

if [[ " $PARTS " == *" failover "* ]]; then
  check_ports "$WEIR_PORT_BASE" &&
    run_bench_cluster failover failover --cycles "$FAILOVER_CYCLES" --rate "$FAILOVER_RATE" --timeout 15m
fi
if [[ " $PARTS " == *" catchup "* ]]; then
  check_ports "$WEIR_PORT_BASE" &&
    run_bench_cluster catchup catchup --bytes "$CATCHUP_BYTES" --acks "$CATCHUP_ACKS" --timeout 15m
fi
log "all parts took $(( $(date +%s) - T0 )) s"

{
  echo; cat "$OUT/machine.txt"; echo
  if [[ -f "$OUT/report.md" ]]; then cat "$OUT/report.md"; echo; fi
  if [[ -n "$KAFKA_FAILED" ]]; then echo "Kafka cluster: FAILED: $KAFKA_FAILED"; echo; fi
  for p in failover catchup; do if [[ -f "$OUT/$p.txt" ]]; then echo "$p: $(cat "$OUT/$p.txt")"; fi; done
} | tee "$OUT/summary.txt"
log "summaries, .hgrm files, result.json files and logs in $OUT (broker data was under $BENCH_DIR, deleted after each run)"

#!/usr/bin/env bash
# bench-fetch-sessions.sh OUTDIR
#
# Fetch sessions (KIP-227) at scale, weir against Apache Kafka 4.4: one consumer of a topic of N
# partitions (N in PARTITIONS, default 10 1000 10000), idle and then with a trickle of records on
# a few partitions. Both brokers run at the same time on 127.0.0.1 with page-cache
# acknowledgement (weir log.flush.interval.messages=MAX, Kafka's defaults; the fetch path is what
# is measured), each with one topic fs-N per N. Then, REPS times, for every N, each broker in turn
# (the order alternates between repetitions) is measured by scripts/fetchsessions (franz-go
# consumer and producer; see its header): a baseline window with no client, an idle window
# (fetch.max.wait.ms 500 as the Java consumer) and a trickle window (RATE records/s round robin
# to HOT partitions). Rows go to OUTDIR/results.tsv, a summary (median and range over the
# repetitions) to OUTDIR/summary.txt.
#
#   REPS          default 3
#   PARTITIONS    default "10 1000 10000"
#   BROKERS       default "weir kafka"
#   SESSIONLESS   1: also measure each cell with a consumer that does not use fetch sessions
#   IDLE TRICKLE BASELINE WARM   window lengths (default 8s 8s 4s 3s)
#   RATE HOT      trickle records/s (default 100) and partitions (default 4)
#   WEIR_BIN      default bin/weir, else built here; WEIR_PORT default 29400, KAFKA_PORT 29410
#   KAFKA_ANCHOR  folder with start.sh/stop.sh (default ../shared/anchors/kafka)
#
# Everything listens on 127.0.0.1 only; every run is bounded (the tool's -timeout, topic
# creation included). The machine is shared and has 2 cores: read the CPU per fetch, not rates.
set -euo pipefail
OUT="${1:?usage: $0 OUTDIR}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KAFKA_ANCHOR="${KAFKA_ANCHOR:-$REPO/../shared/anchors/kafka}"
REPS="${REPS:-3}"
PARTITIONS="${PARTITIONS:-10 1000 10000}"
BROKERS="${BROKERS:-weir kafka}"
WEIR_PORT="${WEIR_PORT:-29400}"
KAFKA_PORT="${KAFKA_PORT:-29410}"
WINDOWS=(-idle "${IDLE:-8s}" -trickle "${TRICKLE:-8s}" -baseline "${BASELINE:-4s}" -warm "${WARM:-3s}"
  -rate "${RATE:-100}" -hot "${HOT:-4}")
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
log() { echo "bench-fetch-sessions: $*" >&2; }

if [[ -z "${WEIR_BIN:-}" ]]; then
  if [[ -x "$REPO/bin/weir" ]]; then WEIR_BIN="$REPO/bin/weir"; else
    WEIR_BIN="$OUT/weir"; log "building weir"; (cd "$REPO" && go build -o "$WEIR_BIN" ./cmd/weir); fi
fi
TOOL="$OUT/fetchsessions"
(cd "$REPO" && go build -o "$TOOL" ./scripts/fetchsessions)
parts_csv="$(tr ' ' ',' <<<"$PARTITIONS")"

declare -A PID ADDR
cleanup() {
  if [[ -n "${PID[weir]:-}" ]]; then
    kill -TERM "${PID[weir]}" 2>/dev/null || true
    for _ in $(seq 300); do kill -0 "${PID[weir]}" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "${PID[weir]}" 2>/dev/null || true
  fi
  if [[ -n "${PID[kafka]:-}" ]]; then "$KAFKA_ANCHOR/stop.sh" "$OUT/kafka" >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

wait_port() { # PORT: up to 60 s
  for _ in $(seq 600); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done
  log "port $1 did not open"; return 1
}

for b in $BROKERS; do
  case "$b" in
    weir)
      rm -rf "$OUT/weir" && mkdir -p "$OUT/weir"
      "$WEIR_BIN" serve --log-level warn --set "listeners=PLAINTEXT://127.0.0.1:$WEIR_PORT" --set "log.dirs=$OUT/weir/data" \
        --set log.flush.interval.messages=9223372036854775807 --set group.initial.rebalance.delay.ms=0 \
        >"$OUT/weir/serve.log" 2>&1 </dev/null &
      PID[weir]=$!; ADDR[weir]="127.0.0.1:$WEIR_PORT"
      wait_port "$WEIR_PORT" ;;
    kafka)
      rm -rf "$OUT/kafka"
      PID[kafka]="$("$KAFKA_ANCHOR/start.sh" "$KAFKA_PORT" "$OUT/kafka" 2>"$OUT/kafka-start.log" | tail -n1)"
      ADDR[kafka]="127.0.0.1:$KAFKA_PORT" ;;
    *) log "unknown broker $b"; exit 2 ;;
  esac
  log "$b: pid ${PID[$b]} on ${ADDR[$b]}"
done
# Topics on every broker, one broker at a time.
for b in $BROKERS; do
  t0=$SECONDS
  "$TOOL" -create -bootstrap "${ADDR[$b]}" -partitions "$parts_csv" -timeout 10m 2>&1 | sed "s/^/$b: /" >&2
  log "$b: topics ready after $(( SECONDS - t0 )) s"
done

RESULTS="$OUT/results.tsv"
header=(-header)
brokers=($BROKERS)
for rep in $(seq "$REPS"); do
  order=("${brokers[@]}")
  if (( rep % 2 == 0 )); then order=($(printf '%s\n' "${brokers[@]}" | tac)); fi
  for n in $PARTITIONS; do
    for b in "${order[@]}"; do
      modes=(on)
      [[ "${SESSIONLESS:-0}" == 1 ]] && modes+=(off)
      for m in "${modes[@]}"; do
        extra=()
        [[ "$m" == off ]] && extra=(-no-sessions)
        log "rep $rep: $b, $n partitions, sessions $m"
        timeout -k 10 600 "$TOOL" "${header[@]}" -bootstrap "${ADDR[$b]}" -pid "${PID[$b]}" -broker "$b" -rep "$rep" \
          -partitions "$n" "${WINDOWS[@]}" "${extra[@]}" >>"$RESULTS" 2>>"$OUT/tool.log" || log "run failed: see $OUT/tool.log"
        header=()
      done
    done
  done
done

# Summary: per broker, partitions, sessions and phase, the median (min-max) over repetitions of
# the broker's CPU per fetch (raw, and minus its baseline), fetches/s, bytes per fetch and the
# trickle's latencies.
{
  printf 'broker\tpartitions\tsessions\tphase\truns\tcpu_us_per_fetch\tminus_baseline\tfetches_per_s\treq_B\tresp_B\tp50_ms\tp99_ms\n'
  awk -F'\t' 'NR > 1 && $5 != "baseline" {
    k = $2 "\t" $3 "\t" $4 "\t" $5
    keys[k] = 1; c = ++n[k]
    raw[k, c] = $12; net[k, c] = $13; fps[k, c] = $8; rq[k, c] = $9; rs[k, c] = $10; p50[k, c] = $15; p99[k, c] = $16
  }
  function med(a, k, c,   i, j, t, v) {
    for (i = 1; i <= c; i++) v[i] = a[k, i]
    for (i = 1; i <= c; i++) for (j = i + 1; j <= c; j++) if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
    if (v[1] == "-") return "-"
    return sprintf("%s (%s-%s)", v[int((c + 1) / 2)], v[1], v[c])
  }
  END {
    for (k in keys) printf "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k, n[k], med(raw, k, n[k]), med(net, k, n[k]), med(fps, k, n[k]), med(rq, k, n[k]), med(rs, k, n[k]), med(p50, k, n[k]), med(p99, k, n[k])
  }' "$RESULTS" | sort -t$'\t' -k4,4 -k3,3 -k2,2n -k1,1
} >"$OUT/summary.txt"
column -t -s$'\t' "$OUT/summary.txt"
log "results.tsv, summary.txt and logs in $OUT"

#!/usr/bin/env bash
# bench-follower-sessions.sh OUTDIR NAME=BIN [NAME=BIN ...]
#
# What followers cost an idle cluster: for each binary and each partition count N (PARTITIONS,
# default "10 1000 5000"), a 3-broker `weir dev-cluster` on 127.0.0.1 gets one topic of N
# partitions with replication factor 3; once every ISR is full and WARM seconds passed, the
# three brokers are left idle for WINDOW seconds and measured: their CPU time (utime+stime of the
# three `weir serve` processes from /proc/PID/stat) and the Fetch requests they served
# (weir_fetch_session_requests_total by kind, from each node's /metrics: with no client these
# are the followers' fetches). Reported per cell: CPU ms per second of the three brokers, Fetch
# requests per second, CPU µs per Fetch, and the kinds (sessionless / full / incremental).
# Binaries alternate within each repetition (REPS, default 2). Rows go to OUTDIR/results.tsv.
#
#   PARTITIONS  default "10 1000 5000"
#   REPS        default 2
#   WINDOW      idle seconds measured (default 20); WARM seconds after the ISRs are full (10)
#   BASE_PORT   default 29500 (brokers), controller +100, metrics +200
#
# Everything listens on 127.0.0.1 only; each cluster is stopped (SIGTERM, then SIGKILL) before
# the next starts, and every wait is bounded.
set -euo pipefail
OUT="${1:?usage: $0 OUTDIR NAME=BIN ...}"
shift
(($# > 0)) || { echo "usage: $0 OUTDIR NAME=BIN ..." >&2; exit 2; }
PARTITIONS="${PARTITIONS:-10 1000 5000}"
REPS="${REPS:-2}"
WINDOW="${WINDOW:-20}"
WARM="${WARM:-10}"
BASE_PORT="${BASE_PORT:-29500}"
mkdir -p "$OUT"
TICK=$(getconf CLK_TCK)
echo -e "rep\tname\tpartitions\tcpu_ms_per_s\tfetches_per_s\tcpu_us_per_fetch\tsessionless\tfull\tincremental" >"$OUT/results.tsv"

devpid=""
cleanup() {
  if [[ -n "$devpid" ]] && kill -0 "$devpid" 2>/dev/null; then
    kill -TERM "$devpid" 2>/dev/null || true
    for _ in $(seq 1 60); do kill -0 "$devpid" 2>/dev/null || break; sleep 1; done
    kill -KILL "$devpid" 2>/dev/null || true
    pkill -KILL -f "$OUT/cluster" 2>/dev/null || true
  fi
  devpid=""
}
trap cleanup EXIT

cpu_ticks() { # sum utime+stime of the given pids
  local t=0 p
  for p in "$@"; do
    read -r -a f <"/proc/$p/stat"
    t=$((t + f[13] + f[14]))
  done
  echo "$t"
}

fetch_kinds() { # sessionless full incremental summed over the nodes
  local sl=0 fu=0 inc=0 i line
  for i in 0 1 2; do
    while read -r line; do
      case "$line" in
        weir_fetch_session_requests_total*sessionless*) sl=$(python3 -c "print(int($sl+${line##* }))") ;;
        weir_fetch_session_requests_total*full*) fu=$(python3 -c "print(int($fu+${line##* }))") ;;
        weir_fetch_session_requests_total*incremental*) inc=$(python3 -c "print(int($inc+${line##* }))") ;;
      esac
    done < <(curl -s "http://127.0.0.1:$((BASE_PORT + 200 + i))/metrics" | grep '^weir_fetch_session_requests_total')
  done
  echo "$sl $fu $inc"
}

for rep in $(seq 1 "$REPS"); do
  pairs=("$@")
  if ((rep % 2 == 0)); then # alternate the order
    rev=(); for ((i = ${#pairs[@]} - 1; i >= 0; i--)); do rev+=("${pairs[i]}"); done; pairs=("${rev[@]}")
  fi
  for n in $PARTITIONS; do
    for pair in "${pairs[@]}"; do
      name="${pair%%=*}" bin="${pair#*=}"
      dir="$OUT/cluster"
      rm -rf "$dir"
      "$bin" dev-cluster -n 3 --dir "$dir" --base-port "$BASE_PORT" --controller-base-port $((BASE_PORT + 100)) \
        --metrics-base-port $((BASE_PORT + 200)) --set log.flush.interval.messages=9223372036854775807 \
        >"$OUT/dev-$name-$n-$rep.log" 2>&1 &
      devpid=$!
      boot="127.0.0.1:$BASE_PORT,127.0.0.1:$((BASE_PORT + 1)),127.0.0.1:$((BASE_PORT + 2))"
      for _ in $(seq 1 120); do
        "$bin" topic list --bootstrap "$boot" >/dev/null 2>&1 && break
        sleep 1
      done
      # A create that times out under load is retried by the client and may then find the topic
      # made: what counts is the topic's partitions in sync, waited for below.
      timeout 600 "$bin" topic create "fs$n" --partitions "$n" --replication-factor 3 --bootstrap "$boot" >/dev/null 2>&1 ||
        timeout 60 "$bin" topic describe "fs$n" --bootstrap "$boot" >/dev/null
      ok=""
      for _ in $(seq 1 300); do
        if [[ -z "$(timeout 60 "$bin" topic describe "fs$n" --under-replicated --bootstrap "$boot" 2>/dev/null | grep -E 'Partition: [0-9]' || true)" ]]; then ok=1; break; fi
        sleep 2
      done
      [[ -n "$ok" ]] || echo "bench-follower-sessions: $name N=$n: ISRs not full within 600 s" >&2
      sleep "$WARM"
      mapfile -t pids < <(pgrep -P "$devpid")
      t0=$(cpu_ticks "${pids[@]}"); read -r sl0 fu0 inc0 < <(fetch_kinds)
      sleep "$WINDOW"
      t1=$(cpu_ticks "${pids[@]}"); read -r sl1 fu1 inc1 < <(fetch_kinds)
      cleanup
      python3 - "$rep" "$name" "$n" "$t0" "$t1" "$TICK" "$WINDOW" "$sl0" "$fu0" "$inc0" "$sl1" "$fu1" "$inc1" >>"$OUT/results.tsv" <<'PY'
import sys
rep, name, n, t0, t1, tick, win, sl0, fu0, inc0, sl1, fu1, inc1 = sys.argv[1:]
cpu_ms = (int(t1) - int(t0)) * 1000 / int(tick)
sl, fu, inc = int(sl1) - int(sl0), int(fu1) - int(fu0), int(inc1) - int(inc0)
fetches = sl + fu + inc
w = float(win)
print(f"{rep}\t{name}\t{n}\t{cpu_ms / w:.1f}\t{fetches / w:.1f}\t{(cpu_ms * 1000 / fetches) if fetches else 0:.0f}\t{sl}\t{fu}\t{inc}")
PY
      tail -1 "$OUT/results.tsv"
    done
  done
done

#!/usr/bin/env bash
# bench-ab.sh OLD_BIN NEW_BIN [OUTDIR]
#
# Two weir binaries (e.g. before and after a change) under the same `weir bench produce` load,
# one broker at a time on an empty data dir, alternating which goes first in each repetition so
# drift in the machine's load does not favour one side. Prints, per run: records/s, p50/p99
# publish latency (ms), and the broker's CPU time per record (utime+stime from /proc/PID/stat
# around the run, warm-up included, divided by the records acknowledged, warm-up included).
#
#   REPS        repetitions (default 3)
#   DURATION    measured time per run (default 15s); WARMUP (default 3s)
#   CASES       space-separated "name|bench flags" entries; default: 16 partitions x 1 KiB at max
#               rate uncompressed and zstd, acks=1 and page-cache acknowledgement
#   BROKER_SET  extra --set flags for both brokers (default: page-cache acknowledgement)
#   PORT        default 29192
#
# Everything listens on 127.0.0.1 only; every run is bounded by DURATION and a timeout.
set -euo pipefail
old="${1:?usage: $0 OLD_BIN NEW_BIN [OUTDIR]}"
new="${2:?usage: $0 OLD_BIN NEW_BIN [OUTDIR]}"
out="${3:-$(mktemp -d)}"
REPS="${REPS:-3}"
DURATION="${DURATION:-15s}"
WARMUP="${WARMUP:-3s}"
PORT="${PORT:-29192}"
BROKER_SET="${BROKER_SET:---set log.flush.interval.messages=9223372036854775807}"
if [[ -z "${CASES:-}" ]]; then
  CASES=$'none|--workload 1topic-16part-1kb-maxrate --acks 1 --compression none\nzstd|--workload 1topic-16part-1kb-maxrate --acks 1 --compression zstd'
fi
mkdir -p "$out"
tck=$(getconf CLK_TCK)

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

run_one() { # label bin case_name flags...
  local label="$1" bin="$2" cname="$3"; shift 3
  local data; data="$(mktemp -d)"
  # shellcheck disable=SC2086
  "$bin" serve --set "listeners=PLAINTEXT://127.0.0.1:$PORT" --set "log.dirs=$data" \
    --set metrics.listener= --set group.initial.rebalance.delay.ms=0 $BROKER_SET \
    >"$out/$cname-$label-broker.log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
    sleep 0.1
  done
  local t0; t0=$(cpu_ticks "$pid")
  local dir="$out/runs/$cname/$label-$(date +%s%N)"
  mkdir -p "$out/runs/$cname"
  timeout 300 "$new" bench produce --bootstrap "127.0.0.1:$PORT" --duration "$DURATION" --warmup "$WARMUP" \
    --quiet --out "$dir" "$@" >"$dir.txt" 2>&1 || true
  local t1; t1=$(cpu_ticks "$pid")
  kill "$pid"; wait "$pid" 2>/dev/null || true
  rm -rf "$data"
  python3 - "$dir/summary.json" "$label" "$cname" "$((t1 - t0))" "$tck" <<'EOF'
import json, sys
path, label, cname, ticks, tck = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
try:
    s = json.load(open(path))
except Exception as e:
    print(f"{cname:6} {label:4} failed: {e}"); sys.exit(0)
r = s["results"]
rate, total = r["msgs_per_s"], r["acked"]
p50, p99 = r["publish"]["p50_ms"], r["publish"]["p99_ms"]
cpu = ticks / tck
per = (cpu / total * 1e6) if total else float("nan")
print(f"{cname:6} {label:4} rate={rate:9.0f} rec/s p50={p50:8.2f} ms p99={p99:8.2f} ms broker_cpu={cpu:6.2f} s acked={total} cpu/record={per:5.2f} us")
EOF
}

while IFS= read -r c; do
  [[ -z "$c" ]] && continue
  cname="${c%%|*}"; flags="${c#*|}"
  for rep in $(seq 1 "$REPS"); do
    if (( rep % 2 )); then order="old new"; else order="new old"; fi
    for side in $order; do
      bin="$old"; [[ $side == new ]] && bin="$new"
      # shellcheck disable=SC2086
      run_one "$side" "$bin" "$cname" $flags | tee -a "$out/results.txt"
    done
  done
done <<<"$CASES"
echo "results: $out/results.txt"

#!/usr/bin/env bash
# scripts/manyparts.sh OUT: the runs of docs/benchmarks.md "Many partitions" (what many partitions
# and many segments cost one broker, and how fast it restarts with them), one after the other,
# each output in OUT/<step>.txt:
#
#   parts20k  weir, 20,000 idle partitions under the machine's 20,000-descriptor limit, then a burst
#             of one produce to each after every restart (scripts/manyparts -n 20000)
#   partsN    weir, N idle partitions (e.g. parts40000: as many as the machine allows)
#   seg10k    weir, a 10-partition topic grown to 10,000 segments, then restarted
#   kseg10k   Apache Kafka 4.4 (the anchor's start.sh), the same
#   seg100k   weir, grown to 100,000 segments (SEG100K_PARTITIONS partitions, default 10)
#
#   STEPS="parts20k seg10k kseg10k seg100k" scripts/manyparts.sh /tmp/mp-out
#
# The machine is shared: run it when nothing else measures, and read single runs as such.
set -euo pipefail
OUT="${1:?usage: $0 OUT}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KAFKA_ANCHOR="${KAFKA_ANCHOR:-$ROOT/../shared/anchors/kafka}"
DATA="${DATA:-/tmp/manyparts-data}"
STEPS="${STEPS:-parts20k seg10k kseg10k seg100k}"
ulimit -n "$(ulimit -Hn)"
cd "$ROOT"
go build -o "$OUT/weir" ./cmd/weir
go build -o "$OUT/manyparts" ./scripts/manyparts
MP="$OUT/manyparts"
ADDR="${ADDR:-127.0.0.1:19592}" # a port pair (Kafka: its controller on the next) nothing else here uses
for step in $STEPS; do
  echo "== $step ($(date -u +%H:%M:%S))" | tee "$OUT/$step.txt"
  set +e
  rm -rf "$DATA"
  case "$step" in
    parts*) n="${step#parts}"; n="${n/k/000}"
            "$MP" -addr "$ADDR" -weir "$OUT/weir" -n "$n" -dir "$DATA" -log "$OUT/$step.log" -timeout 4m \
              -heap 127.0.0.1:19399 2>&1 | tee -a "$OUT/$step.txt"
            [[ -f "$DATA.heap.pb.gz" ]] && mv "$DATA.heap.pb.gz" "$OUT/$step.heap.pb.gz" ;;
    seg10k) "$MP" -addr "$ADDR" -weir "$OUT/weir" -segments 10000 -dir "$DATA" -log "$OUT/$step.log" 2>&1 | tee -a "$OUT/$step.txt" ;;
    kseg10k) "$MP" -addr "$ADDR" -kafka "$KAFKA_ANCHOR" -segments 10000 -dir "$DATA" -log "$OUT/$step.log" 2>&1 | tee -a "$OUT/$step.txt" ;;
    seg100k) "$MP" -addr "$ADDR" -weir "$OUT/weir" -segments 100000 -n "${SEG100K_PARTITIONS:-10}" -dir "$DATA" -log "$OUT/$step.log" \
               -timeout 10m 2>&1 | tee -a "$OUT/$step.txt" ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
  set -e
  if [[ -f "$DATA/server.log" ]]; then cp "$DATA/server.log" "$OUT/$step.server.log"; fi # Kafka's own log
  grep -ci 'too many open files' "$OUT/$step.log" | sed 's/^/"too many open files" lines in the broker log: /' | tee -a "$OUT/$step.txt" || true
done
rm -rf "$DATA"

#!/usr/bin/env bash
# Fault runs against a 3-node weir cluster (internal/faults): client workloads while nemeses
# pause, kill and partition nodes and move leaders, then heal, a final read of every partition,
# and a check of the history. Builds weir and the runner, runs N runs, and writes each run's
# directory (history.jsonl, verdict.json, report.json, cluster/node-i/weir.log) and
# OUT/summary.md, a table of the runs (nemeses, seconds, ops ok/fail/info, faults injected,
# anomalies, max unavailability). Nemeses that cannot run here (partition without network
# namespaces, disk and clock until they exist) are listed under the table with the reason.
#
#   scripts/faults.sh --nemesis partition,pause,kill,disk,clock --time-limit 300 --runs 3
#   scripts/faults.sh --workload txn --nemesis pause,kill,membership --time-limit 120 --out /tmp/f
#
# Options: --nemesis LIST (pause,kill,partition,membership,disk,clock), --time-limit SECONDS
# (300), --runs N (1), --workload queue|txn (queue), --seed S, --net auto|netns|loopback (auto:
# network namespaces where they can be made, as root), --out DIR (default
# ${TMPDIR:-/tmp}/weir-faults-DATE). The exit status is 1 when a run fails or finds anomalies.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out=""
args=()
while [[ $# -gt 0 ]]; do
	case "$1" in
	--out) out="$2"; shift 2 ;;
	--out=*) out="${1#--out=}"; shift ;;
	-h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) args+=("$1"); shift ;;
	esac
done
out="${out:-${TMPDIR:-/tmp}/weir-faults-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
cd "$root"
# -tags faults: the disk and clock nemeses drive the fault control (internal/faultctl) of this
# test-only build; never ship it.
go build -tags faults -o "$out/weir" ./cmd/weir
go build -o "$out/faults" ./scripts/faults
echo "fault runs in $out" >&2
exec "$out/faults" --bin "$out/weir" --out "$out" "${args[@]}"

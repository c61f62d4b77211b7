#!/usr/bin/env bash
# Fault runs against a 3-node weir cluster (internal/faults): client workloads while nemeses
# pause, kill and partition nodes and move leaders, then heal, a final read of every partition,
# and a check of the history. Builds weir and the runner, runs N runs, and writes each run's
# directory (history.jsonl, verdict.json, report.json, cluster/node-i/weir.log) and
# OUT/summary.md, a table of the runs (nemeses, seconds, ops ok/fail/info, faults injected,
# anomalies, max unavailability). Nemeses that cannot run here (partition without network
# namespaces; disk and clock against Kafka) are listed under the table with the reason.
# --broker kafka runs the same on a 3-node Apache Kafka 4.x cluster (KRaft combined mode), so
# its unavailability per fault can be set beside weir's; the jars come from WEIR_KAFKA_LIBS,
# else scripts/kafka-libs.sh (Maven Central, cached), and java from PATH.
#
#   scripts/faults.sh --nemesis partition,pause,kill,disk,clock --time-limit 300 --runs 3
#   scripts/faults.sh --workload txn --nemesis pause,kill,membership --time-limit 120 --out /tmp/f
#   scripts/faults.sh --broker kafka --nemesis pause,kill,partition --time-limit 90
#
# Options: --broker weir|kafka (weir), --nemesis LIST (pause,kill,partition,membership,disk,clock),
# --time-limit SECONDS (300), --runs N (1), --workload queue|txn (queue), --seed S,
# --net auto|netns|loopback (auto: network namespaces where they can be made, as root), --out DIR
# (default ${TMPDIR:-/tmp}/weir-faults-DATE). The exit status is 1 when a run fails or finds
# anomalies.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out=""
broker=weir
args=()
while [[ $# -gt 0 ]]; do
	case "$1" in
	--out) out="$2"; shift 2 ;;
	--out=*) out="${1#--out=}"; shift ;;
	--broker) broker="$2"; shift 2 ;;
	--broker=*) broker="${1#--broker=}"; shift ;;
	-h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) args+=("$1"); shift ;;
	esac
done
out="${out:-${TMPDIR:-/tmp}/weir-faults-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
cd "$root"
go build -o "$out/faults" ./scripts/faults
case "$broker" in
weir)
	# -tags faults: the disk and clock nemeses drive the fault control (internal/faultctl) of
	# this test-only build; never ship it.
	go build -tags faults -o "$out/weir" ./cmd/weir
	args+=(--bin "$out/weir")
	;;
kafka)
	libs="${WEIR_KAFKA_LIBS:-$("$root/scripts/kafka-libs.sh")}"
	# Kafka's Maven artifacts leave out the SLF4J binding its distribution ships, without which a
	# broker logs nothing: fetch log4j-slf4j-impl of the jars' log4j version next to them.
	core="$(ls "$libs"/log4j-core-*.jar 2>/dev/null | head -n1 || true)"
	if [[ -n "$core" ]]; then
		v="$(basename "$core" .jar)"; v="${v#log4j-core-}"
		logging="${WEIR_KAFKA_CACHE:-$HOME/.cache/weir-kafka}/log4j-slf4j-impl-$v"
		if [[ -f "$logging/log4j-slf4j-impl-$v.jar" ]] ||
			mvn -B -q org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy \
				-Dartifact="org.apache.logging.log4j:log4j-slf4j-impl:$v" -DoutputDirectory="$logging" >&2; then
			libs="$libs:$logging"
		else
			echo "faults.sh: no log4j-slf4j-impl $v: the Kafka brokers will log nothing" >&2
		fi
	fi
	args+=(--kafka-libs "$libs")
	;;
*) echo "faults.sh: unknown --broker $broker: want weir or kafka" >&2; exit 2 ;;
esac
echo "fault runs ($broker) in $out" >&2
exec "$out/faults" --broker "$broker" --out "$out" "${args[@]}"

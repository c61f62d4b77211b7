#!/usr/bin/env bash
# kafka-tools.sh [OUTDIR]   (also: make kafka-tools [OUT=dir])
#
# Runs Apache Kafka's own admin tools (the Java CLI classes of the Kafka 4.4 jars) against a
# 3-broker weir cluster and judges each by its exit status and its output.
#
# It resolves the jars (WEIR_KAFKA_LIBS, else scripts/kafka-libs.sh), takes or builds the weir
# binary (WEIR_BIN, else bin/weir, else `go build` into OUTDIR), starts `weir dev-cluster -n 3`
# on 127.0.0.1 with its data in a mktemp dir (removed at the end; the cluster is stopped on any
# exit), waits until the cluster answers (`weir cluster info` lists 3 live brokers), then
# sources every scripts/kafka-tools.d/*.sh and runs every bash function named check_* (sorted by
# name), one at a time, each in its own bash bounded by KT_CHECK_TIMEOUT. It prints a table
# check | result | seconds and writes it to OUTDIR/results.md; each check's output is in
# OUTDIR/work/<check>.out (the tools' output) and OUTDIR/work/<check>.log (everything else).
#
# Exit status: 0 when every check passes or fails only as scripts/kafka-tools.d/known-failures
# says; 1 when a check not listed there fails; 2 when the run could not start (no java, no jars,
# no cluster). known-failures (and any scripts/kafka-tools.d/<file>.known-failures, so that each
# check file can keep its own list): one line per check, `check_name  reason` (a documented
# refusal); blank lines and lines starting with # are ignored. A listed check that passes is reported
# "PASS (listed as known failure)" so the list can be trimmed.
#
# Environment:
#   WEIR_KAFKA_LIBS     the Kafka jar folder (default: scripts/kafka-libs.sh resolves it)
#   WEIR_BIN            the weir binary (default bin/weir, else built into OUTDIR)
#   KT_BASE_PORT        broker port of node 1 (default 41200; nodes use +0..+2)
#   KT_CONTROLLER_BASE_PORT   default KT_BASE_PORT+10; KT_METRICS_BASE_PORT default 0 (a free port
#                       per node: the /readyz listener dev-cluster waits for)
#   KT_TOOL_TIMEOUT     seconds one tool run (kt) may take (default 60)
#   KT_CHECK_TIMEOUT    seconds one check may take (default 150)
#   KT_ONLY             run only the checks whose name matches this extended regexp
#   KT_DEBUG=1          the tools log at DEBUG (the admin client says which API failed)
#   KT_CDS=0            no class-data-sharing archive for the tool JVMs (default: one is made)
#   KT_JAVA_OPTS        JVM options of every tool run (default: small heap, serial GC, C1 only)
#   KT_KEEP=1           keep the cluster's data dir (its path is printed)
#   KT_CLUSTER_SETS     extra `--set key=value` words for every node (space-separated key=value)
#   KT_BOOTSTRAP        use this running cluster (host:port,...) instead of starting one, e.g. a
#                       `weir dev-cluster -n 3 --dir D --base-port P --set ...` of your own
#                       while writing checks (KT_CLUSTER_DIR=D gives the checks NODE_LOG_i)
#
# The cluster: 3 nodes, each broker and controller voter, default.replication.factor=3,
# offsets.topic.replication.factor=3, min.insync.replicas=2 (dev-cluster's defaults),
# group.initial.rebalance.delay.ms=0, and the ACL authorizer on with super.users=User:ANONYMOUS
# (and controller.network.trusted=true: the controller ports are PLAINTEXT on loopback)
# (PLAINTEXT clients are User:ANONYMOUS, so every tool may do everything, and AclCommand can
# add, list and remove ACLs as against a Kafka cluster with StandardAuthorizer).
#
# ---- Writing checks: scripts/kafka-tools.d/<file>.sh ------------------------------------------
# A file defines bash functions named check_<file>_<what>; nothing else runs when it is sourced.
# A check runs in a fresh bash (every kafka-tools.d file sourced, set -o pipefail, no errexit)
# and is judged by its exit status: end each step with `|| return 1` or use the expect_* helpers
# (they print what they missed and return 1). A check uses only the state it creates: topic,
# group and transactional-id names start with its file name (base-..., leader-...). Set there:
#   BOOTSTRAP    the 3 brokers, host:port,host:port,host:port
#   KAFKA_LIBS   the jar folder          WEIR   the weir binary      WORK   a scratch dir (shared)
#   CHECK        this check's name       NODE_LOG_1..3   each node's weir.log
#   KT_LAST      the file holding the output of the last kt (or weir_cli) run of this check
# Helpers:
#   kt CLASS ARGS...        java -cp "$KAFKA_LIBS/*" CLASS ARGS..., bounded by KT_TOOL_TIMEOUT;
#                           stdout+stderr to $KT_LAST, appended to $WORK/$CHECK.out and echoed;
#                           returns the tool's exit status. CLASS not starting with org. or
#                           kafka. means org.apache.kafka.tools.CLASS (kt TopicCommand --list,
#                           kt consumer.group.ConsumerGroupCommand ...). Kafka's tables pad
#                           columns with spaces and tabs: match them with \s+ in patterns
#   weir_cli ARGS...        $WEIR ARGS... the same way (output in $KT_LAST and $CHECK.out)
#   expect_out ERE [FILE]   FILE (default $KT_LAST) has a line matching ERE, else say so, return 1
#   expect_no_out ERE [FILE]  no line of FILE matches ERE
#   expect_count N ERE [FILE] exactly N lines of FILE match ERE
#   expect_fail CMD...      CMD exits non-zero (kt/weir_cli output still captured)
#   retry SECONDS CMD...    runs CMD every second until it succeeds or SECONDS pass
#   fail MESSAGE...         prints MESSAGE to stderr and returns 1
#   json_file NAME TEXT     writes TEXT to $WORK/NAME and prints the path (for --*-json-file)
# ------------------------------------------------------------------------------------------------
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CHECK_DIR="$REPO/scripts/kafka-tools.d"
OUT="${1:-$(mktemp -d -t kafka-tools.XXXXXX)}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
WORK="$OUT/work"
rm -rf "$WORK"
mkdir -p "$WORK"

KT_PORTS_GIVEN="${KT_BASE_PORT:-}${KT_CONTROLLER_BASE_PORT:-}"
KT_BASE_PORT="${KT_BASE_PORT:-41200}"
KT_CONTROLLER_BASE_PORT="${KT_CONTROLLER_BASE_PORT:-$((KT_BASE_PORT + 10))}"
KT_METRICS_BASE_PORT="${KT_METRICS_BASE_PORT:-0}"
KT_TOOL_TIMEOUT="${KT_TOOL_TIMEOUT:-60}"
KT_CHECK_TIMEOUT="${KT_CHECK_TIMEOUT:-150}"
KT_ONLY="${KT_ONLY:-}"

log() { echo "kafka-tools: $*" >&2; }

command -v java >/dev/null || { log "java not found"; exit 2; }
if [[ -n "${WEIR_KAFKA_LIBS:-}" ]]; then
  KAFKA_LIBS="$WEIR_KAFKA_LIBS"
else
  # scripts/kafka-libs.sh (Maven Central); else the Kafka anchor's jar cache next to the repository.
  if ! KAFKA_LIBS="$("$REPO/scripts/kafka-libs.sh")"; then
    anchor="$REPO/../shared/anchors/kafka/setup.sh"
    [[ -x "$anchor" ]] && KAFKA_LIBS="$("$anchor" 2>/dev/null | tail -n1)" ||
      { log "Kafka jars unavailable (scripts/kafka-libs.sh failed)"; exit 2; }
  fi
fi
ls "$KAFKA_LIBS"/kafka-tools-*.jar >/dev/null 2>&1 || { log "no kafka-tools jar in $KAFKA_LIBS"; exit 2; }

if [[ -z "${WEIR_BIN:-}" ]]; then
  if [[ -x "$REPO/bin/weir" ]]; then WEIR_BIN="$REPO/bin/weir"; else
    WEIR_BIN="$OUT/weir"
    log "building weir from $REPO"
    (cd "$REPO" && go build -o "$WEIR_BIN" ./cmd/weir) || { log "go build failed"; exit 2; }
  fi
fi
WEIR="$(cd "$(dirname "$WEIR_BIN")" && pwd)/$(basename "$WEIR_BIN")"

# Log configuration for the tools: WARN (KT_DEBUG=1: DEBUG) to stderr, which kt captures.
level=WARN
[[ "${KT_DEBUG:-0}" == 1 ]] && level=DEBUG
cat >"$WORK/tools-log4j2.properties" <<EOF
rootLogger.level = $level
rootLogger.appenderRef.stderr.ref = STDERR
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
EOF
# Short-lived JVMs on 2 cores: the C1 compiler only and the serial collector start fastest.
KT_JAVA_OPTS="${KT_JAVA_OPTS:--Xmx256M -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto} -Dlog4j2.configurationFile=$WORK/tools-log4j2.properties"

# ---- the cluster ---------------------------------------------------------------------------
if [[ -n "${KT_BOOTSTRAP:-}" ]]; then DATA="${KT_CLUSTER_DIR:-}"; else DATA="$(mktemp -d -t kafka-tools-data.XXXXXX)"; fi
CLUSTER_PID=""
NODE_PIDS=()
stop_cluster() {
  if [[ -n "$CLUSTER_PID" ]] && kill -0 "$CLUSTER_PID" 2>/dev/null; then
    kill -TERM "$CLUSTER_PID" 2>/dev/null
    local i
    for i in $(seq 400); do kill -0 "$CLUSTER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$CLUSTER_PID" 2>/dev/null
    wait "$CLUSTER_PID" 2>/dev/null
  fi
  CLUSTER_PID=""
  # dev-cluster puts each node in its own process group: if it could not stop them, we do.
  local p
  for p in "${NODE_PIDS[@]}"; do
    if kill -0 "$p" 2>/dev/null && grep -q weir "/proc/$p/cmdline" 2>/dev/null; then
      log "node pid $p still running: SIGKILL"
      kill -KILL "$p" 2>/dev/null
    fi
  done
  NODE_PIDS=()
}
cleanup() {
  stop_cluster
  [[ -n "${KT_BOOTSTRAP:-}" || -z "$DATA" ]] && return
  if [[ "${KT_KEEP:-0}" == 1 ]]; then log "cluster data kept in $DATA"; else rm -rf "$DATA"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_s=$(date +%s)
if [[ -n "${KT_BOOTSTRAP:-}" ]]; then
  BOOTSTRAP="$KT_BOOTSTRAP"
  log "using the running cluster at $BOOTSTRAP"
else
sets=(--set group.initial.rebalance.delay.ms=0
  --set authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
  --set super.users=User:ANONYMOUS
  --set controller.network.trusted=true) # loopback: only this cluster's nodes dial the controller ports
for kv in ${KT_CLUSTER_SETS:-}; do sets+=(--set "$kv"); done
# The default ports lie among the ephemeral ones, where a client connection may hold one: when
# KT_BASE_PORT was not given and a node cannot bind its port, the cluster is started again 100
# ports higher (3 tries).
ready=0
for attempt in 1 2 3; do
BOOTSTRAP="127.0.0.1:$KT_BASE_PORT,127.0.0.1:$((KT_BASE_PORT + 1)),127.0.0.1:$((KT_BASE_PORT + 2))"
busy=0
for p in "$KT_BASE_PORT" $((KT_BASE_PORT + 1)) $((KT_BASE_PORT + 2)) \
  "$KT_CONTROLLER_BASE_PORT" $((KT_CONTROLLER_BASE_PORT + 1)) $((KT_CONTROLLER_BASE_PORT + 2)); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then log "127.0.0.1:$p is already in use (KT_BASE_PORT picks others)"; busy=1; fi
done
if (( ! busy )); then
log "starting weir dev-cluster -n 3 on $BOOTSTRAP (data in $DATA)"
# Two log dirs per node: the jbod checks move replicas between them (AlterReplicaLogDirs).
"$WEIR" dev-cluster -n 3 --log-dirs-per-node 2 --dir "$DATA" --base-port "$KT_BASE_PORT" \
  --controller-base-port "$KT_CONTROLLER_BASE_PORT" --metrics-base-port "$KT_METRICS_BASE_PORT" --start-timeout 110s \
  "${sets[@]}" >"$OUT/dev-cluster.log" 2>&1 </dev/null &
CLUSTER_PID=$!
while (( $(date +%s) - start_s < 120 * attempt )); do
  mapfile -t NODE_PIDS < <(sed -n 's/^  node [0-9]*: pid \([0-9]*\),.*/\1/p' "$OUT/dev-cluster.log")
  if ! kill -0 "$CLUSTER_PID" 2>/dev/null; then break; fi
  if grep -q '^all 3 nodes started' "$OUT/dev-cluster.log" &&
    timeout 20 "$WEIR" cluster info --bootstrap "$BOOTSTRAP" >"$WORK/cluster-info.txt" 2>&1 &&
    grep -qE '^Brokers: +3$' "$WORK/cluster-info.txt" &&
    grep -qE '^Active controller: +[0-9]' "$WORK/cluster-info.txt"; then
    ready=1
    break
  fi
  sleep 1
done
fi
(( ready )) && break
[[ -n "$KT_PORTS_GIVEN" ]] && break
if (( ! busy )) && ! grep -rqs 'address already in use' "$OUT/dev-cluster.log" "$DATA"; then break; fi
log "ports $KT_BASE_PORT.. are taken: starting again 100 ports higher"
stop_cluster
rm -rf "${DATA:?}"/*
KT_BASE_PORT=$((KT_BASE_PORT + 100))
KT_CONTROLLER_BASE_PORT=$((KT_CONTROLLER_BASE_PORT + 100))
done
if (( ! ready )); then
  log "the cluster did not come up within 120 s:"
  tail -n 20 "$OUT/dev-cluster.log" >&2
  cat "$WORK/cluster-info.txt" >&2 2>/dev/null
  exit 2
fi
log "cluster up after $(( $(date +%s) - start_s )) s"
fi

# ---- the checks ----------------------------------------------------------------------------
# Class data sharing: one BrokerApiVersionsCommand run dumps the classes it loaded (the admin
# client, the network layer) into an archive every later tool run maps instead of loading them
# again from the jars: about 2 s less per tool run on a busy 2-core machine.
if [[ "${KT_CDS:-1}" == 1 ]]; then
  # shellcheck disable=SC2086
  if timeout -k 5 "$KT_TOOL_TIMEOUT" java -XX:ArchiveClassesAtExit="$WORK/kafka-tools.jsa" $KT_JAVA_OPTS -cp "$KAFKA_LIBS/*" \
    org.apache.kafka.tools.BrokerApiVersionsCommand --bootstrap-server "$BOOTSTRAP" >"$WORK/cds.out" 2>&1 &&
    [[ -s "$WORK/kafka-tools.jsa" ]]; then
    KT_JAVA_OPTS="$KT_JAVA_OPTS -XX:SharedArchiveFile=$WORK/kafka-tools.jsa -Xlog:cds=off,cds+dynamic=off"
  else
    log "no class data sharing archive (see $WORK/cds.out); tools start without one"
  fi
fi
# The helpers, exported into every check's bash.
kt() {
  local cls="$1"; shift
  [[ "$cls" == org.* || "$cls" == kafka.* ]] || cls="org.apache.kafka.tools.$cls"
  KT_LAST="$WORK/$CHECK.last"
  echo "\$ kt $cls $*" >>"$WORK/$CHECK.out"
  # --foreground: no process group of its own, so a check's timeout (which signals the check's
  # whole group) stops the tool too.
  # shellcheck disable=SC2086
  timeout --foreground -k 5 "$KT_TOOL_TIMEOUT" java $KT_JAVA_OPTS -cp "$KAFKA_LIBS/*" "$cls" "$@" >"$KT_LAST" 2>&1
  local rc=$?
  cat "$KT_LAST" >>"$WORK/$CHECK.out"
  echo "[exit $rc]" >>"$WORK/$CHECK.out"
  cat "$KT_LAST"
  return $rc
}
weir_cli() {
  KT_LAST="$WORK/$CHECK.last"
  echo "\$ weir $*" >>"$WORK/$CHECK.out"
  timeout --foreground -k 5 "$KT_TOOL_TIMEOUT" "$WEIR" "$@" >"$KT_LAST" 2>&1
  local rc=$?
  cat "$KT_LAST" >>"$WORK/$CHECK.out"
  echo "[exit $rc]" >>"$WORK/$CHECK.out"
  cat "$KT_LAST"
  return $rc
}
fail() { echo "FAIL: $*" >&2; return 1; }
expect_out() {
  local f="${2:-$KT_LAST}"
  grep -qE -- "$1" "$f" && return 0
  echo "FAIL: expected a line matching /$1/ in $f; its last lines:" >&2
  tail -n 15 "$f" >&2
  return 1
}
expect_no_out() {
  local f="${2:-$KT_LAST}"
  grep -qE -- "$1" "$f" || return 0
  echo "FAIL: expected no line matching /$1/ in $f, got:" >&2
  grep -E -- "$1" "$f" | head -n 5 >&2
  return 1
}
expect_count() {
  local f="${3:-$KT_LAST}" n
  n=$(grep -cE -- "$2" "$f")
  [[ "$n" == "$1" ]] && return 0
  echo "FAIL: expected $1 lines matching /$2/ in $f, got $n:" >&2
  tail -n 15 "$f" >&2
  return 1
}
expect_fail() {
  if "$@"; then echo "FAIL: expected a failure from: $*" >&2; return 1; fi
  return 0
}
retry() {
  local secs="$1"; shift
  local end=$(( $(date +%s) + secs ))
  while true; do
    "$@" && return 0
    (( $(date +%s) < end )) || return 1
    sleep 1
  done
}
json_file() { printf '%s\n' "$2" >"$WORK/$1"; echo "$WORK/$1"; }
export -f kt weir_cli fail expect_out expect_no_out expect_count expect_fail retry json_file
export BOOTSTRAP KAFKA_LIBS WEIR WORK KT_TOOL_TIMEOUT KT_JAVA_OPTS
for i in 1 2 3; do export "NODE_LOG_$i=$DATA/node-$i/weir.log"; done

shopt -s nullglob
files=("$CHECK_DIR"/*.sh)
checks=()
if (( ${#files[@]} )); then
  # The names of the check_* functions the files define (sourced in a subshell: nothing leaks).
  mapfile -t checks < <(
    for f in "${files[@]}"; do source "$f" || echo "kafka-tools: sourcing $f failed" >&2; done
    declare -F | awk '{print $3}' | grep '^check_' | LC_ALL=C sort
  )
fi
if [[ -n "$KT_ONLY" ]]; then
  mapfile -t checks < <(printf '%s\n' "${checks[@]}" | grep -E -- "$KT_ONLY")
fi
(( ${#checks[@]} )) || { log "no check_* functions in $CHECK_DIR/*.sh${KT_ONLY:+ matching $KT_ONLY}"; exit 2; }

declare -A known=()
for kf in "$CHECK_DIR"/known-failures "$CHECK_DIR"/*.known-failures; do
  [[ -f "$kf" ]] || continue
  while read -r name reason; do
    [[ -z "$name" || "$name" == \#* ]] && continue
    known[$name]="$reason"
  done <"$kf"
done

RESULTS="$OUT/results.md"
{
  echo "| check | result | seconds | notes |"
  echo "|---|---|---|---|"
} >"$RESULTS"
log "running ${#checks[@]} checks"
printf '%-52s %-34s %s\n' CHECK RESULT SECONDS
failed=0
npass=0
nknown=0
for c in "${checks[@]}"; do
  t0=$(date +%s.%N)
  CHECK="$c" timeout -k 10 "$KT_CHECK_TIMEOUT" bash -c '
    set -o pipefail
    shopt -s nullglob
    for f in "$0"/*.sh; do source "$f"; done
    "$CHECK"' "$CHECK_DIR" >"$WORK/$c.log" 2>&1 </dev/null
  rc=$?
  secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  note="${known[$c]:-}"
  if (( rc == 0 )); then
    res=PASS; npass=$((npass + 1))
    [[ -n "${known[$c]+x}" ]] && res="PASS (listed as known failure)"
  elif [[ -n "${known[$c]+x}" ]]; then
    res="KNOWN FAILURE"; nknown=$((nknown + 1))
  else
    res=FAIL; failed=$((failed + 1))
    (( rc == 124 || rc == 137 )) && res="FAIL (timeout ${KT_CHECK_TIMEOUT} s)"
    note="see work/$c.log and work/$c.out"
  fi
  printf '%-52s %-34s %s\n' "$c" "$res" "$secs"
  echo "| $c | $res | $secs | $note |" >>"$RESULTS"
  if [[ "$res" == FAIL* ]]; then sed 's/^/    /' "$WORK/$c.log" | tail -n 12; fi
done
summary="${#checks[@]} checks: $npass passed, $nknown known failures, $failed failed"
echo "$summary"
{ echo; echo "$summary (Kafka jars: $(basename "$(ls "$KAFKA_LIBS"/kafka-tools-*.jar | head -n1)" .jar))"; } >>"$RESULTS"
log "results in $RESULTS; tool output in $WORK"
(( failed == 0 ))

# shellcheck shell=bash
# Checks of part "racks" (issue 14): broker.rack and rack-aware placement seen through Kafka's
# own tools. The shared 3-broker cluster has no racks, so the check starts its own cluster of 6
# brokers in racks rack-a, rack-b, rack-c (two each: `weir dev-cluster -n 6 --racks ...`) on
# ports RACKS_BASE_PORT.. (default 40500; +10 controller; metrics on free ports), with the rack-aware
# replica selector on, and stops it when the check ends. Topic names start with racks-.

# racks_cluster_up: starts the 6-broker cluster with racks in $WORK/racks-dc and waits until
# it answers with 6 brokers. Sets RACKS_BOOTSTRAP and RACKS_PID (stop it with racks_cluster_down).
racks_cluster_up() {
  local base="${RACKS_BASE_PORT:-40500}" i
  RACKS_BOOTSTRAP="127.0.0.1:$base"
  for i in 1 2 3 4 5; do RACKS_BOOTSTRAP+=",127.0.0.1:$((base + i))"; done
  rm -rf "$WORK/racks-dc"
  "$WEIR" dev-cluster -n 6 --racks rack-a,rack-b,rack-c --dir "$WORK/racks-dc" --base-port "$base" \
    --controller-base-port "$((base + 10))" --metrics-base-port 0 \
    --set group.initial.rebalance.delay.ms=0 \
    --set replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector \
    >"$WORK/racks-dc.log" 2>&1 </dev/null &
  RACKS_PID=$!
  local start=$SECONDS
  while (( SECONDS - start < 90 )); do
    kill -0 "$RACKS_PID" 2>/dev/null || { tail -n 20 "$WORK/racks-dc.log" >&2; return 1; }
    if grep -q '^all 6 nodes started' "$WORK/racks-dc.log" &&
      timeout 20 "$WEIR" cluster info --bootstrap "$RACKS_BOOTSTRAP" >"$WORK/racks-info.txt" 2>&1 &&
      grep -qE '^Brokers: +6$' "$WORK/racks-info.txt"; then
      return 0
    fi
    sleep 1
  done
  fail "the 6-broker rack cluster did not come up within 90 s"
}

racks_cluster_down() {
  [[ -n "${RACKS_PID:-}" ]] || return 0
  kill -TERM "$RACKS_PID" 2>/dev/null
  local i
  for i in $(seq 300); do kill -0 "$RACKS_PID" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$RACKS_PID" 2>/dev/null
  wait "$RACKS_PID" 2>/dev/null
  RACKS_PID=""
}

# racks_of_brokers: prints "id rack" per broker, from BrokerApiVersionsCommand's
# "host:port (id: N rack: R isFenced: ...)" lines (Metadata's rack field as Kafka's admin client reads it).
racks_of_brokers() {
  kt BrokerApiVersionsCommand --bootstrap-server "$RACKS_BOOTSTRAP" >/dev/null || return 1
  sed -nE 's/.*\(id: ([0-9]+) rack: ([^ )]+).*/\1 \2/p' "$KT_LAST" | sort -u
}

check_racks_placement_and_fetch() {
  racks_cluster_up || { racks_cluster_down; return 1; }
  local rc=0
  racks_check_placement || rc=1
  racks_check_follower_fetch || rc=1
  racks_cluster_down
  return $rc
}

racks_check_placement() {
  local t=racks-spread
  # Kafka's tools see each broker's rack: node i is in rack-{a,b,c}[(i-1) mod 3].
  racks_of_brokers >"$WORK/racks-map.txt" || return 1
  cat "$WORK/racks-map.txt"
  [[ "$(cat "$WORK/racks-map.txt")" == $'1 rack-a\n2 rack-b\n3 rack-c\n4 rack-a\n5 rack-b\n6 rack-c' ]] ||
    fail "brokers' racks from BrokerApiVersionsCommand: $(tr '\n' ' ' <"$WORK/racks-map.txt")" || return 1
  kt ConfigCommand --bootstrap-server "$RACKS_BOOTSTRAP" --describe --entity-type brokers --entity-name 2 --all &&
    expect_out "broker\.rack=rack-b" || return 1
  # TopicCommand creates the topic (no assignment: the controller places it) and describes it:
  # every partition's three replicas are in three different racks.
  kt TopicCommand --bootstrap-server "$RACKS_BOOTSTRAP" --create --topic $t --partitions 6 --replication-factor 3 &&
    expect_out "^Created topic $t\.$" || return 1
  retry 20 eval 'kt TopicCommand --bootstrap-server "$RACKS_BOOTSTRAP" --describe --topic '$t' >/dev/null &&
      expect_count 6 "Topic: '$t'	Partition: [0-5]	Leader: [1-6]	Replicas: [1-6],[1-6],[1-6]	Isr: [1-6],[1-6],[1-6]"' || return 1
  local line reps r racks
  while IFS= read -r line; do
    reps=$(sed -nE 's/.*Replicas: ([0-9,]+).*/\1/p' <<<"$line")
    racks=""
    for r in ${reps//,/ }; do racks+="$(awk -v id="$r" '$1 == id {print $2}' "$WORK/racks-map.txt") "; done
    echo "replicas $reps racks $racks"
    [[ $(tr ' ' '\n' <<<"$racks" | grep -c .) == 3 && $(tr ' ' '\n' <<<"$racks" | grep . | sort -u | wc -l) == 3 ]] ||
      fail "partition with replicas $reps is in racks $racks, want three different racks" || return 1
  done < <(grep -E "^	?Topic: $t	Partition:" "$KT_LAST")
  # Partitions added without an assignment are spread the same way.
  kt TopicCommand --bootstrap-server "$RACKS_BOOTSTRAP" --alter --topic $t --partitions 9 || return 1
  retry 20 eval 'kt TopicCommand --bootstrap-server "$RACKS_BOOTSTRAP" --describe --topic '$t' >/dev/null &&
      expect_count 9 "Topic: '$t'	Partition: [0-8]	Leader: [1-6]	Replicas: [1-6],[1-6],[1-6]	"' || return 1
  while IFS= read -r line; do
    reps=$(sed -nE 's/.*Replicas: ([0-9,]+).*/\1/p' <<<"$line")
    racks=""
    for r in ${reps//,/ }; do racks+="$(awk -v id="$r" '$1 == id {print $2}' "$WORK/racks-map.txt") "; done
    [[ $(tr ' ' '\n' <<<"$racks" | grep . | sort -u | wc -l) == 3 ]] ||
      fail "after --alter: replicas $reps in racks $racks" || return 1
  done < <(grep -E "^	?Topic: $t	Partition:" "$KT_LAST")
}

# racks_bytes_out NODE TOPIC: record bytes node NODE returned to consumers for TOPIC (its metrics).
racks_bytes_out() {
  local addr
  addr=$(sed -n "s/^  node $1: pid [0-9]*, .*, metrics \([0-9.:]*\), log .*/\1/p" "$WORK/racks-dc.log")
  curl -s "http://$addr/metrics" |
    awk -v t="$2" 'index($0, "weir_topic_bytes_out_total{topic=\"" t "\"}") == 1 {v = $2} END {print v + 0}'
}

# Kafka's console consumer with client.rack=rack-b reads a partition led by broker 1 (rack-a)
# from broker 2 (rack-b): broker 2 returned the record bytes, the leader none.
racks_check_follower_fetch() {
  local t=racks-near
  kt TopicCommand --bootstrap-server "$RACKS_BOOTSTRAP" --create --topic $t --replica-assignment 1:2:3 || return 1
  retry 20 eval 'kt TopicCommand --bootstrap-server "$RACKS_BOOTSTRAP" --describe --topic '$t' >/dev/null &&
      expect_out "Partition: 0	Leader: 1	Replicas: 1,2,3	Isr: 1,2,3"' || return 1
  seq 1 200 | sed 's/.*/near-&/' >"$WORK/racks-near.txt"
  weir_cli produce --topic $t --acks all --bootstrap "$RACKS_BOOTSTRAP" <"$WORK/racks-near.txt" >/dev/null || return 1
  kt org.apache.kafka.tools.consumer.ConsoleConsumer --bootstrap-server "$RACKS_BOOTSTRAP" --topic $t \
    --partition 0 --offset earliest --max-messages 200 --timeout-ms 30000 \
    --consumer-property client.rack=rack-b >/dev/null || return 1
  expect_count 200 '^near-[0-9]+$' || return 1
  local leader near
  leader=$(racks_bytes_out 1 $t) near=$(racks_bytes_out 2 $t)
  echo "record bytes returned to consumers: broker 1 (leader, rack-a) $leader, broker 2 (rack-b) $near"
  [[ "$leader" == 0 && "$near" -gt 0 ]] ||
    fail "client.rack=rack-b: broker 1 returned $leader bytes, broker 2 $near; want all from broker 2" || return 1
}

# shellcheck shell=bash
# Checks of KIP-848 consumer groups (group.protocol=consumer) with Kafka's own tools, against the
# 3-broker cluster of scripts/kafka-tools.sh: ConsoleConsumer as a consumer-protocol member while
# a second one joins and leaves, ConsumerGroupCommand --describe (members, assignments, epochs,
# lag, state) and GroupsCommand --list (group types). Topics and groups are named
# groups848-<check>...; setup and polling use the weir CLI (no JVM start). Helpers (kt,
# expect_out, ...) are described at the top of scripts/kafka-tools.sh.

# g848_topic NAME PARTITIONS: creates the topic (replication factor 3).
g848_topic() {
  weir_cli topic create "$1" --partitions "$2" --replication-factor 3 --bootstrap "$BOOTSTRAP" >/dev/null ||
    fail "weir topic create $1"
}

# g848_produce TOPIC FROM TO: records key-i/value-i for i in FROM..TO, acks=all.
g848_produce() {
  seq "$2" "$3" | sed 's/.*/key-&\tvalue-&/' >"$WORK/$CHECK.records"
  weir_cli produce --topic "$1" --acks all --key-separator $'\t' --bootstrap "$BOOTSTRAP" <"$WORK/$CHECK.records" >/dev/null ||
    fail "weir produce to $1"
}

# g848_describe GROUP ERE: weir group describe GROUP prints a line matching ERE.
g848_describe() {
  weir_cli group describe "$1" --bootstrap "$BOOTSTRAP" >/dev/null 2>&1 && grep -qE -- "$2" "$KT_LAST"
}

# g848_members GROUP N: the consumer group has N members (weir group describe's member table).
g848_members() {
  weir_cli group describe "$1" --bootstrap "$BOOTSTRAP" >/dev/null 2>&1 &&
    grep -qE "^group $1: type consumer, .*, $2 members," "$KT_LAST"
}

# g848_console NAME GROUP TOPIC MAX TIMEOUT_MS: a ConsoleConsumer of the consumer protocol
# (client.id GROUP-NAME), in the background: its output in $WORK/$CHECK-NAME.last, its pid in
# G848_PID. It ends by itself (MAX records, or TIMEOUT_MS with none).
g848_console() {
  local name="$1" g="$2" t="$3" max="$4" tmo="$5"
  ( CHECK="$CHECK-$name" kt consumer.ConsoleConsumer --bootstrap-server "$BOOTSTRAP" --topic "$t" --group "$g" \
      --consumer-property group.protocol=consumer --consumer-property client.id="$g-$name" \
      --from-beginning --max-messages "$max" --timeout-ms "$tmo" ) >/dev/null 2>&1 &
  G848_PID=$!
}

check_groups848_console_consumer_join_leave() {
  local t=groups848-cc g=groups848-cc-g pa pb n
  g848_topic $t 4 && g848_produce $t 1 40 || return 1
  # A reads until 40 s pass with no record; B joins, takes partitions from A, reads 10 records
  # and leaves (committing on close); A takes its partitions back and reads the rest.
  g848_console a $g $t 80 40000; pa=$G848_PID
  retry 60 g848_describe $g "$t:0,1,2,3 +$t:0,1,2,3\$" || { wait "$pa"; fail "A never held all 4 partitions"; return 1; }
  g848_console b $g $t 10 30000; pb=$G848_PID
  retry 60 g848_members $g 2 || { wait "$pa" "$pb"; fail "B never joined"; return 1; }
  retry 30 g848_describe $g "\s$g-b\s.*\s$t:[0-9,]+\s+\S+\$" || { wait "$pa" "$pb"; fail "B has no assignment"; return 1; }
  g848_produce $t 41 80 || { wait "$pa" "$pb"; return 1; }
  wait "$pb"
  retry 60 g848_members $g 1 || { wait "$pa"; fail "B never left"; return 1; }
  wait "$pa"
  cat "$WORK/$CHECK-a.last" "$WORK/$CHECK-b.last" >"$WORK/$CHECK.all"
  n=$(grep -E '^value-[0-9]+$' "$WORK/$CHECK.all" | sort -u | wc -l)
  [[ "$n" == 80 ]] || fail "A and B read $n distinct records of 80" || return 1
  expect_out '^value-' "$WORK/$CHECK-b.last" || fail "B read nothing" || return 1
  # Everything read was committed: lag 0 on all four partitions.
  retry 30 g848_describe $g '^total lag 0$'
}

# g848_kafka_describe GROUP TOPIC: ConsumerGroupCommand --describe shows the member on each of the
# topic's 3 partitions with lag 0.
g848_kafka_describe() {
  kt consumer.group.ConsumerGroupCommand --bootstrap-server "$BOOTSTRAP" --describe --group "$1" &&
    expect_count 3 "^$1\s+$2\s+[0-2]\s+[0-9]+\s+[0-9]+\s+0\s+[^- ]\S*\s+\S+\s+$1-c\s*$"
}

check_groups848_describe() {
  local t=groups848-desc g=groups848-desc-g pc
  g848_topic $t 3 && g848_produce $t 1 30 || return 1
  # One member that reads all 30 and stays (it waits 45 s for a 31st record).
  g848_console c $g $t 31 45000; pc=$G848_PID
  # The console consumer's JVM takes seconds to start: wait for its member, then for lag 0.
  retry 60 g848_members $g 1 || { wait "$pc"; fail "the member never joined"; return 1; }
  retry 60 g848_describe $g '^total lag 0$' || { wait "$pc"; fail "lag never reached 0"; return 1; }
  # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID: a member
  # owns each partition, and its offsets are committed (the console consumer auto-commits every
  # 5 s, so the first describes may show no committed offset yet).
  retry 30 g848_kafka_describe $g $t || { wait "$pc"; return 1; }
  kt consumer.group.ConsumerGroupCommand --bootstrap-server "$BOOTSTRAP" --describe --group $g --members --verbose &&
    expect_out "^$g\s+\S+\s+\S+\s+$g-c\s+3\s+[0-9]+\s+.*$t" || { wait "$pc"; return 1; }
  kt consumer.group.ConsumerGroupCommand --bootstrap-server "$BOOTSTRAP" --describe --group $g --state &&
    expect_out "^$g\s+.*\s+uniform\s+Stable\s+1\s*$" || { wait "$pc"; return 1; }
  wait "$pc"
  # The member left: Empty, the offsets stay.
  retry 30 g848_describe $g 'state Empty' || fail "the group is not Empty after the member left"
}

check_groups848_groups_list() {
  local t=groups848-list gc=groups848-list-consumer gk=groups848-list-classic
  g848_topic $t 1 && g848_produce $t 1 5 || return 1
  kt consumer.ConsoleConsumer --bootstrap-server "$BOOTSTRAP" --topic $t --group $gc \
    --consumer-property group.protocol=consumer --from-beginning --max-messages 5 --timeout-ms 40000 >/dev/null &&
    expect_count 5 '^value-[0-9]+$' || return 1
  weir_cli group reset-offsets $gk --topic $t --to-latest --execute --bootstrap "$BOOTSTRAP" >/dev/null || return 1
  kt GroupsCommand --bootstrap-server "$BOOTSTRAP" --list || return 1
  expect_out "^$gc\s+Consumer\s+consumer\s*$" && expect_out "^$gk\s+Classic\s*$" || return 1
  kt GroupsCommand --bootstrap-server "$BOOTSTRAP" --list --group-type consumer || return 1
  expect_out "^$gc( |\$)" && expect_no_out "^$gk( |\$)" || return 1
  weir_cli group list --type consumer --bootstrap "$BOOTSTRAP" && expect_out "^$gc\s+consumer\s" && expect_no_out "^$gk\s"
}

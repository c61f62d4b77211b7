# shellcheck shell=bash
# Checks of part "tools" (issue 14): Kafka's own admin tools that no other part owns, against the
# 3-broker cluster of scripts/kafka-tools.sh: TopicCommand, ConfigCommand on topics,
# ConsoleConsumer + ConsumerGroupCommand, GroupsCommand, DeleteRecordsCommand, GetOffsetShell,
# AclCommand, TransactionsCommand, BrokerApiVersionsCommand. Every check builds its own state
# (topics, groups and transactional ids named base-<check>...), the setup with the weir CLI (no
# JVM start), the judging with the Kafka tool. Helpers (kt, expect_out, ...) are described at the
# top of scripts/kafka-tools.sh.

# base_topic NAME PARTITIONS: creates the topic (replication factor 3) with the weir CLI.
base_topic() {
  weir_cli topic create "$1" --partitions "$2" --replication-factor 3 --bootstrap "$BOOTSTRAP" >/dev/null ||
    fail "weir topic create $1"
}

# base_produce TOPIC N [extra weir produce flags]: N records key-i/value-i, acks=all.
base_produce() {
  local t="$1" n="$2"; shift 2
  seq 1 "$n" | sed 's/.*/key-&\tvalue-&/' >"$WORK/$CHECK.records"
  weir_cli produce --topic "$t" --acks all --key-separator $'\t' --bootstrap "$BOOTSTRAP" "$@" <"$WORK/$CHECK.records" >/dev/null ||
    fail "weir produce to $t"
}

# base_group_at GROUP TOPIC: a group with no members whose committed offsets are the log end
# offsets of TOPIC (committed with weir group reset-offsets).
base_group_at() {
  weir_cli group reset-offsets "$1" --topic "$2" --to-latest --execute --bootstrap "$BOOTSTRAP" >/dev/null ||
    fail "weir group reset-offsets $1"
}

check_base_topic_create_list_describe() {
  local t=base-topic
  kt TopicCommand --bootstrap-server "$BOOTSTRAP" --create --topic $t --partitions 3 --replication-factor 3 &&
    expect_out "^Created topic $t\.$" || return 1
  kt TopicCommand --bootstrap-server "$BOOTSTRAP" --list && expect_out "^$t\$" || return 1
  # Every partition led, 3 replicas, all in the ISR (the ISR may take a moment to fill).
  retry 20 eval 'kt TopicCommand --bootstrap-server "$BOOTSTRAP" --describe --topic '$t' >/dev/null &&
      expect_count 3 "Topic: '$t'	Partition: [0-2]	Leader: [1-3]	Replicas: [1-3],[1-3],[1-3]	Isr: [1-3],[1-3],[1-3]"' || return 1
  expect_out "^Topic: $t	TopicId: [A-Za-z0-9_-]{22}	PartitionCount: 3	ReplicationFactor: 3	" || return 1
  # A second create of the same name is refused with Kafka's error.
  expect_fail kt TopicCommand --bootstrap-server "$BOOTSTRAP" --create --topic $t --partitions 1 --replication-factor 3 >/dev/null &&
    expect_out "TopicExistsException|already exists"
}

check_base_topic_alter_partitions() {
  local t=base-alter
  base_topic $t 2 || return 1
  kt TopicCommand --bootstrap-server "$BOOTSTRAP" --alter --topic $t --partitions 4 || return 1
  retry 20 eval 'kt TopicCommand --bootstrap-server "$BOOTSTRAP" --describe --topic '$t' >/dev/null &&
      expect_count 4 "Topic: '$t'	Partition: [0-3]	Leader: [1-3]	"' || return 1
  expect_out "PartitionCount: 4	ReplicationFactor: 3" || return 1
  # Fewer partitions than it has: refused (InvalidPartitionsException), the topic keeps 4.
  expect_fail kt TopicCommand --bootstrap-server "$BOOTSTRAP" --alter --topic $t --partitions 2 >/dev/null &&
    expect_out "INVALID_PARTITIONS|InvalidPartitionsException" || return 1
}

check_base_topic_delete() {
  local t=base-delete
  base_topic $t 1 || return 1
  kt TopicCommand --bootstrap-server "$BOOTSTRAP" --delete --topic $t || return 1
  retry 20 eval 'kt TopicCommand --bootstrap-server "$BOOTSTRAP" --list >/dev/null && expect_no_out "^'$t'\$" 2>/dev/null' ||
    fail "$t still listed after --delete" || return 1
  expect_fail kt TopicCommand --bootstrap-server "$BOOTSTRAP" --delete --topic $t >/dev/null &&
    expect_out "does not exist|UnknownTopicOrPartition"
}

check_base_topic_under_replicated() {
  local t=base-urp
  base_topic $t 2 || return 1
  # A healthy cluster: the topic's partitions are not listed (other checks' topics may be).
  kt TopicCommand --bootstrap-server "$BOOTSTRAP" --describe --under-replicated-partitions || return 1
  expect_no_out "Topic: $t	" || return 1
  kt TopicCommand --bootstrap-server "$BOOTSTRAP" --describe --topic $t --unavailable-partitions || return 1
  expect_no_out "Topic: $t	"
}

check_base_config_topic() {
  local t=base-config
  base_topic $t 1 || return 1
  kt ConfigCommand --bootstrap-server "$BOOTSTRAP" --entity-type topics --entity-name $t \
    --alter --add-config retention.ms=86400000,cleanup.policy=compact &&
    expect_out "Completed updating config for topic $t" || return 1
  kt ConfigCommand --bootstrap-server "$BOOTSTRAP" --entity-type topics --entity-name $t --describe || return 1
  expect_out "^Dynamic configs for topic $t are:" && expect_out "^  retention.ms=86400000 sensitive=false synonyms=\{DYNAMIC_TOPIC_CONFIG:retention.ms=86400000" &&
    expect_out "^  cleanup.policy=compact " || return 1
  kt ConfigCommand --bootstrap-server "$BOOTSTRAP" --entity-type topics --entity-name $t --alter --delete-config retention.ms &&
    expect_out "Completed updating config for topic $t" || return 1
  kt ConfigCommand --bootstrap-server "$BOOTSTRAP" --entity-type topics --entity-name $t --describe || return 1
  expect_no_out "retention.ms=" && expect_out "^  cleanup.policy=compact " || return 1
  # --all lists every topic config with its source (the default retention.ms too).
  kt ConfigCommand --bootstrap-server "$BOOTSTRAP" --entity-type topics --entity-name $t --describe --all || return 1
  expect_out "^All configs for topic $t are:" && expect_out "^  retention.ms=604800000 sensitive=false synonyms=\{.*DEFAULT_CONFIG:log.retention" || return 1
  # An unknown key is refused (InvalidConfigurationException), not stored.
  expect_fail kt ConfigCommand --bootstrap-server "$BOOTSTRAP" --entity-type topics --entity-name $t --alter --add-config no.such.key=1 >/dev/null
}

check_base_group_consume_describe() {
  local t=base-grp g=base-grp-g1
  base_topic $t 3 || return 1
  # Kafka's console producer (acks=all, idempotent by default), keys parsed.
  seq 1 30 | sed 's/.*/key-&\tvalue-&/' | kt ConsoleProducer --bootstrap-server "$BOOTSTRAP" --topic $t \
    --reader-property parse.key=true --reader-property 'key.separator=	' >/dev/null || return 1
  kt consumer.ConsoleConsumer --bootstrap-server "$BOOTSTRAP" --topic $t --group $g --from-beginning \
    --max-messages 30 --timeout-ms 40000 --formatter-property print.key=true >/dev/null || return 1
  expect_count 30 "^key-[0-9]+	value-[0-9]+$" || return 1
  kt consumer.group.ConsumerGroupCommand --bootstrap-server "$BOOTSTRAP" --list && expect_out "^$g\$" || return 1
  # Three partitions, committed = log end, lag 0; the members are gone (the consumer closed).
  kt consumer.group.ConsumerGroupCommand --bootstrap-server "$BOOTSTRAP" --describe --group $g || return 1
  expect_count 3 "^$g\s+$t\s+[0-2]\s+[0-9]+\s+[0-9]+\s+0\s" || return 1
  [[ "$(awk -v g=$g -v t=$t '$1==g && $2==t {s+=$4} END {print s}' "$KT_LAST")" == 30 ]] ||
    fail "committed offsets of $g do not add up to 30" || return 1
  kt consumer.group.ConsumerGroupCommand --bootstrap-server "$BOOTSTRAP" --describe --group $g --members &&
    expect_out "has no active members" || return 1
  kt consumer.group.ConsumerGroupCommand --bootstrap-server "$BOOTSTRAP" --describe --group $g --state &&
    expect_out "^$g\s+.*(Empty|Stable)\s+[0-9]+\s*\$" || return 1
  kt GroupsCommand --bootstrap-server "$BOOTSTRAP" --list && expect_out "^$g\s+Classic\s+consumer\s*$" || return 1
  kt GroupsCommand --bootstrap-server "$BOOTSTRAP" --list --consumer && expect_out "^$g( |\$)"
}

check_base_group_reset_offsets() {
  local t=base-reset g=base-reset-g1
  base_topic $t 2 && base_produce $t 20 && base_group_at $g $t || return 1
  # The plan only (no --execute), then the reset.
  kt consumer.group.ConsumerGroupCommand --bootstrap-server "$BOOTSTRAP" --reset-offsets --group $g --topic $t --to-earliest --dry-run &&
    expect_count 2 "^$g\s+$t\s+[01]\s+0\s*$" || return 1
  kt consumer.group.ConsumerGroupCommand --bootstrap-server "$BOOTSTRAP" --reset-offsets --group $g --topic $t --to-earliest --execute &&
    expect_count 2 "^$g\s+$t\s+[01]\s+0\s*$" || return 1
  kt consumer.group.ConsumerGroupCommand --bootstrap-server "$BOOTSTRAP" --describe --group $g || return 1
  expect_count 2 "^$g\s+$t\s+[01]\s+0\s+[0-9]+\s+[0-9]+\s" || return 1
  [[ "$(awk -v g=$g -v t=$t '$1==g && $2==t {s+=$6} END {print s}' "$KT_LAST")" == 20 ]] ||
    fail "lag of $g is not 20 after --to-earliest" || return 1
  kt consumer.group.ConsumerGroupCommand --bootstrap-server "$BOOTSTRAP" --reset-offsets --group $g --topic $t:0 --to-offset 3 --execute &&
    expect_out "^$g\s+$t\s+0\s+3\s*$"
}

check_base_group_delete_offsets() {
  local t=base-deloff g=base-deloff-g1
  base_topic $t 2 && base_produce $t 10 && base_group_at $g $t || return 1
  kt consumer.group.ConsumerGroupCommand --bootstrap-server "$BOOTSTRAP" --delete-offsets --group $g --topic $t &&
    expect_out "^Request succeeded for deleting offsets from group $g\." || return 1
  expect_count 2 "^$t\s+[01]\s+Successful" || return 1
  kt consumer.group.ConsumerGroupCommand --bootstrap-server "$BOOTSTRAP" --describe --group $g || return 1
  expect_no_out "^$g\s+$t\s+[01]\s+[0-9]+\s"
}

check_base_group_delete() {
  local t=base-delgrp g=base-delgrp-g1
  base_topic $t 1 && base_produce $t 5 && base_group_at $g $t || return 1
  kt consumer.group.ConsumerGroupCommand --bootstrap-server "$BOOTSTRAP" --delete --group $g &&
    expect_out "Deletion of requested consumer groups \('$g'\) was successful" || return 1
  kt consumer.group.ConsumerGroupCommand --bootstrap-server "$BOOTSTRAP" --list && expect_no_out "^$g\$" || return 1
  # Deleting it again: Kafka's GROUP_ID_NOT_FOUND.
  kt consumer.group.ConsumerGroupCommand --bootstrap-server "$BOOTSTRAP" --delete --group $g
  expect_out "GroupIdNotFoundException|does not exist"
}

check_base_delete_records() {
  local t=base-delrec f
  base_topic $t 2 && base_produce $t 20 || return 1
  f=$(json_file $CHECK.json '{"version":1,"partitions":[{"topic":"'$t'","partition":0,"offset":2},{"topic":"'$t'","partition":1,"offset":-1}]}')
  kt DeleteRecordsCommand --bootstrap-server "$BOOTSTRAP" --offset-json-file "$f" || return 1
  expect_out "^Records delete operation completed:" && expect_out "partition: $t-0	low_watermark: 2" &&
    expect_out "partition: $t-1	low_watermark: [0-9]+" || return 1
  kt GetOffsetShell --bootstrap-server "$BOOTSTRAP" --topic $t --time -2 && expect_out "^$t:0:2\$" || return 1
  # Partition 1 was emptied up to its high watermark (offset -1): earliest = latest.
  local lwm hw
  lwm=$(sed -n "s/^$t:1://p" "$KT_LAST")
  kt GetOffsetShell --bootstrap-server "$BOOTSTRAP" --topic $t --partitions 1 --time -1 || return 1
  hw=$(sed -n "s/^$t:1://p" "$KT_LAST")
  [[ -n "$hw" && "$lwm" == "$hw" ]] || fail "partition 1: earliest $lwm, latest $hw" || return 1
  # Beyond the high watermark: OFFSET_OUT_OF_RANGE, reported per partition.
  f=$(json_file $CHECK-2.json '{"version":1,"partitions":[{"topic":"'$t'","partition":0,"offset":1000}]}')
  kt DeleteRecordsCommand --bootstrap-server "$BOOTSTRAP" --offset-json-file "$f"
  expect_out "OffsetOutOfRange|out of range"
}

check_base_get_offset_shell() {
  local t=base-offsets
  base_topic $t 3 && base_produce $t 30 || return 1
  kt GetOffsetShell --bootstrap-server "$BOOTSTRAP" --topic $t --time -1 && expect_count 3 "^$t:[0-2]:[0-9]+\$" || return 1
  [[ "$(awk -F: '{s+=$3} END {print s}' "$KT_LAST")" == 30 ]] || fail "latest offsets of $t do not add up to 30" || return 1
  kt GetOffsetShell --bootstrap-server "$BOOTSTRAP" --topic $t --time -2 && expect_count 3 "^$t:[0-2]:0\$" || return 1
  # -3: the offset of the record with the largest timestamp (KIP-734), per non-empty partition.
  kt GetOffsetShell --bootstrap-server "$BOOTSTRAP" --topic-partitions "$t:0" --time -3 && expect_out "^$t:0:[0-9]+\$"
}

check_base_acl() {
  local t=base-acl
  kt AclCommand --bootstrap-server "$BOOTSTRAP" --add --allow-principal User:base-alice --operation Read \
    --operation Describe --topic $t || return 1
  expect_out "Adding ACLs for resource .ResourcePattern\(resourceType=TOPIC, name=$t, patternType=LITERAL\)" || return 1
  kt AclCommand --bootstrap-server "$BOOTSTRAP" --add --allow-principal User:base-alice --operation Read \
    --group base-acl- --resource-pattern-type prefixed || return 1
  kt AclCommand --bootstrap-server "$BOOTSTRAP" --list --principal User:base-alice || return 1
  expect_out "resourceType=TOPIC, name=$t, patternType=LITERAL" &&
    expect_out "resourceType=GROUP, name=base-acl-, patternType=PREFIXED" &&
    expect_out "principal=User:base-alice, host=\*, operation=READ, permissionType=ALLOW" &&
    expect_out "principal=User:base-alice, host=\*, operation=DESCRIBE, permissionType=ALLOW" || return 1
  kt AclCommand --bootstrap-server "$BOOTSTRAP" --remove --force --allow-principal User:base-alice --operation Read \
    --operation Describe --topic $t || return 1
  kt AclCommand --bootstrap-server "$BOOTSTRAP" --remove --force --allow-principal User:base-alice --operation Read \
    --group base-acl- --resource-pattern-type prefixed || return 1
  kt AclCommand --bootstrap-server "$BOOTSTRAP" --list --principal User:base-alice || return 1
  expect_no_out "base-alice, host"
}

check_base_transactions() {
  local t=base-txn id=base-txn-id1
  base_topic $t 1 && base_produce $t 10 --transactional-id $id || return 1
  kt TransactionsCommand --bootstrap-server "$BOOTSTRAP" list && expect_out "^$id\s+[1-3]\s+[0-9]+\s+CompleteCommit" || return 1
  kt TransactionsCommand --bootstrap-server "$BOOTSTRAP" describe --transactional-id $id || return 1
  expect_out "^[1-3]\s+$id\s+[0-9]+\s+[0-9]+\s+CompleteCommit\s" || return 1
  kt TransactionsCommand --bootstrap-server "$BOOTSTRAP" describe-producers --topic $t --partition 0 || return 1
  expect_out "^[0-9]+\s+[0-9]+\s+-?[0-9]+\s+-?[0-9]+\s+" || return 1
  kt TransactionsCommand --bootstrap-server "$BOOTSTRAP" find-hanging --broker-id 1 || return 1
  expect_out "^Topic\s+Partition\s+ProducerId" && expect_no_out "^$t\s"
}

check_base_broker_api_versions() {
  kt BrokerApiVersionsCommand --bootstrap-server "$BOOTSTRAP" || return 1
  expect_count 3 "^127\.0\.0\.1:[0-9]+ \(id: [1-3] rack: .*\) -> \(" || return 1
  expect_out "Produce\(0\): [0-9]+ to [0-9]+ \[usable: [0-9]+\]" && expect_out "ApiVersions\(18\): " || return 1
  # An API weir serves but the client cannot use would say UNUSABLE.
  expect_no_out "UNUSABLE"
}

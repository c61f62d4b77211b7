# shellcheck shell=bash
# Checks of the online migration between classic groups and KIP-848 consumer groups
# (group.consumer.migration.policy, default bidirectional) with Kafka's ConsoleConsumer, against
# the 3-broker cluster of scripts/kafka-tools.sh: a classic member and a consumer-protocol member
# in one group. Topics and groups are named migrate-<check>...; helpers (kt, retry, ...) are
# described at the top of scripts/kafka-tools.sh, g848_* in groups848.sh.

# mig_console NAME GROUP TOPIC MAX TIMEOUT_MS PROTOCOL: a ConsoleConsumer of group.protocol
# PROTOCOL (client.id GROUP-NAME), in the background; its pid in MIG_PID.
mig_console() {
  local name="$1" g="$2" t="$3" max="$4" tmo="$5" proto="$6"
  ( CHECK="$CHECK-$name" kt consumer.ConsoleConsumer --bootstrap-server "$BOOTSTRAP" --topic "$t" --group "$g" \
      --consumer-property group.protocol="$proto" --consumer-property client.id="$g-$name" \
      --from-beginning --max-messages "$max" --timeout-ms "$tmo" ) >/dev/null 2>&1 &
  MIG_PID=$!
}

# mig_type GROUP TYPE N: weir group describe shows GROUP of TYPE with N members.
mig_type() {
  weir_cli group describe "$1" --bootstrap "$BOOTSTRAP" >/dev/null 2>&1 &&
    grep -qE "^group $1: type $2, .*[ ,]$3 members," "$KT_LAST"
}

check_migrate_console_classic_then_consumer() {
  local t=migrate-cc g=migrate-cc-g pa pb n
  g848_topic $t 4 && g848_produce $t 1 40 || return 1
  # A (classic protocol) reads until 40 s pass with no record: a classic group.
  mig_console a $g $t 80 40000 classic; pa=$MIG_PID
  retry 60 mig_type $g classic 1 || { wait "$pa"; fail "A never formed a classic group"; return 1; }
  # B (consumer protocol) joins: the group becomes a consumer group with a classic member, B
  # takes partitions from A, reads 10 records and leaves.
  mig_console b $g $t 10 30000 consumer; pb=$MIG_PID
  retry 60 mig_type $g consumer 2 || { wait "$pa" "$pb"; fail "the group never became a consumer group of 2"; return 1; }
  retry 30 g848_describe $g "\s$g-a\s.*\sclassic\s" || { wait "$pa" "$pb"; fail "A is not shown as a classic member"; return 1; }
  retry 30 g848_describe $g "\s$g-b\s.*\sconsumer\s.*\s$t:[0-9,]+\s+\S+\$" || { wait "$pa" "$pb"; fail "B has no assignment"; return 1; }
  g848_produce $t 41 80 || { wait "$pa" "$pb"; return 1; }
  wait "$pb"
  # B left: the group is classic again, A alone, and reads the rest.
  retry 60 mig_type $g classic 1 || { wait "$pa"; fail "the group never became classic again"; return 1; }
  wait "$pa"
  cat "$WORK/$CHECK-a.last" "$WORK/$CHECK-b.last" >"$WORK/$CHECK.all"
  n=$(grep -E '^value-[0-9]+$' "$WORK/$CHECK.all" | sort -u | wc -l)
  [[ "$n" == 80 ]] || fail "A and B read $n distinct records of 80" || return 1
  expect_out '^value-' "$WORK/$CHECK-b.last" || fail "B read nothing" || return 1
  retry 30 g848_describe $g '^total lag 0$'
}

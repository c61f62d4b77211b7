# shellcheck shell=bash
# Checks of KIP-932 share groups with Kafka's own tools, against the 3-broker cluster of
# scripts/kafka-tools.sh: ConsoleShareConsumer (two instances sharing one partition),
# ShareGroupCommand (--describe, --reset-offsets --to-earliest --execute on an empty group,
# --delete-offsets, --delete) and GroupsCommand --list (type Share). Topics and groups are named
# shares-<check>...; setup and polling use the weir CLI (no JVM start). Share groups start at the
# latest offset (share.auto.offset.reset defaults to latest), so every check starts its share
# consumers, waits until they hold their partitions, and only then produces. Helpers (kt,
# expect_out, ...) are described at the top of scripts/kafka-tools.sh.

# shares_topic NAME PARTITIONS: creates the topic (replication factor 3).
shares_topic() {
  weir_cli topic create "$1" --partitions "$2" --replication-factor 3 --bootstrap "$BOOTSTRAP" >/dev/null ||
    fail "weir topic create $1"
}

# shares_produce TOPIC FROM TO: records key-i/value-i for i in FROM..TO, acks=all.
shares_produce() {
  seq "$2" "$3" | sed 's/.*/key-&\tvalue-&/' >"$WORK/$CHECK.records"
  weir_cli produce --topic "$1" --acks all --key-separator $'\t' --bootstrap "$BOOTSTRAP" <"$WORK/$CHECK.records" >/dev/null ||
    fail "weir produce to $1"
}

# shares_assigned GROUP N ERE: weir share-group describe GROUP shows N members whose assignment
# (the member table's last column) matches ERE.
shares_assigned() {
  weir_cli share-group describe "$1" --bootstrap "$BOOTSTRAP" >/dev/null 2>&1 || return 1
  [[ "$(awk '/^MEMBER /{m=1; next} /^TOPIC /{m=0} m' "$KT_LAST" | grep -cE -- "\s$3\$")" == "$2" ]]
}

# shares_state GROUP STATE: weir share-group describe GROUP says the group is in STATE.
shares_state() {
  weir_cli share-group describe "$1" --bootstrap "$BOOTSTRAP" >/dev/null 2>&1 &&
    grep -qE "^share group $1: state $2," "$KT_LAST"
}

# shares_console NAME GROUP TOPIC MAX TIMEOUT_MS: a ConsoleShareConsumer in the background: its
# output in $WORK/$CHECK-NAME.last, its pid in SHARES_PID. It ends by itself (MAX records, or
# TIMEOUT_MS with none).
shares_console() {
  local name="$1" g="$2" t="$3" max="$4" tmo="$5"
  ( CHECK="$CHECK-$name" kt consumer.ConsoleShareConsumer --bootstrap-server "$BOOTSTRAP" --topic "$t" --group "$g" \
      --consumer-property client.id="$g-$name" --max-messages "$max" --timeout-ms "$tmo" ) >/dev/null 2>&1 &
  SHARES_PID=$!
}

# shares_start_sum GROUP TOPIC SUM: ShareGroupCommand --describe lists both partitions of TOPIC
# and their start offsets add up to SUM.
shares_start_sum() {
  kt consumer.group.ShareGroupCommand --bootstrap-server "$BOOTSTRAP" --describe --group "$1" >/dev/null || return 1
  # GROUP TOPIC PARTITION [LEADER-EPOCH] START-OFFSET [LAG]: the START-OFFSET column by its header
  # (Kafka 4.4 prints LEADER-EPOCH only with --verbose).
  expect_count 2 "^$1\s+$2\s+[01]\s+" >/dev/null 2>&1 &&
    [[ "$(awk -v g="$1" -v t="$2" '$3=="PARTITION" {for (i=1;i<=NF;i++) if ($i=="START-OFFSET") c=i}
      c && $1==g && $2==t {s+=$c} END {print s+0}' "$KT_LAST")" == "$3" ]]
}

check_shares_console_share_consumer() {
  local t=shares-cc g=shares-cc-g pa pb n
  shares_topic $t 1 || return 1
  # Two members, one partition: the simple assignor gives the partition to both.
  shares_console a $g $t 1000 25000; pa=$SHARES_PID
  shares_console b $g $t 1000 25000; pb=$SHARES_PID
  retry 60 shares_assigned $g 2 "$t:0" || { wait "$pa" "$pb"; fail "the two members never shared $t-0"; return 1; }
  shares_produce $t 1 100 || { wait "$pa" "$pb"; return 1; }
  wait "$pa" "$pb"
  cat "$WORK/$CHECK-a.last" "$WORK/$CHECK-b.last" >"$WORK/$CHECK.all"
  # Acquisition locks hand each record to one member at a time: every record is read, and
  # (no failures, no lock time-outs) by one member only.
  n=$(grep -E '^value-[0-9]+$' "$WORK/$CHECK.all" | sort -u | wc -l)
  [[ "$n" == 100 ]] || fail "the two members read $n distinct records of 100" || return 1
  expect_count 100 '^value-[0-9]+$' "$WORK/$CHECK.all"
}

check_shares_describe_reset_delete() {
  local t=shares-rd g=shares-rd-g pa
  shares_topic $t 2 || return 1
  shares_console a $g $t 20 30000; pa=$SHARES_PID
  retry 60 shares_assigned $g 1 "$t:0,1" || { wait "$pa"; fail "the member never held $t-0 and $t-1"; return 1; }
  shares_produce $t 1 20 || { wait "$pa"; return 1; }
  wait "$pa"
  expect_count 20 '^value-[0-9]+$' "$WORK/$CHECK-a.last" || return 1
  retry 30 shares_state $g Empty || fail "the group is not Empty after its member left" || return 1
  # All 20 acknowledged: the start offsets are the log end offsets (they add up to 20).
  retry 30 shares_start_sum $g $t 20 || fail "start offsets of $g do not add up to 20" || return 1
  kt consumer.group.ShareGroupCommand --bootstrap-server "$BOOTSTRAP" --describe --group $g --state &&
    expect_out "^$g\s.*Empty" || return 1
  kt consumer.group.ShareGroupCommand --bootstrap-server "$BOOTSTRAP" --reset-offsets --group $g --topic $t --to-earliest --execute &&
    expect_count 2 "^$g\s+$t\s+[01]\s+(\S+\s+)?0\s*$" || return 1
  retry 20 shares_start_sum $g $t 0 || fail "start offsets of $g are not 0 after --to-earliest" || return 1
  kt GroupsCommand --bootstrap-server "$BOOTSTRAP" --list && expect_out "^$g\s+Share\s+share\s*$" || return 1
  kt consumer.group.ShareGroupCommand --bootstrap-server "$BOOTSTRAP" --delete-offsets --group $g --topic $t || return 1
  kt consumer.group.ShareGroupCommand --bootstrap-server "$BOOTSTRAP" --describe --group $g || return 1
  expect_no_out "^$g\s+$t\s+[01]\s+\S+\s+[0-9]+" || return 1
  kt consumer.group.ShareGroupCommand --bootstrap-server "$BOOTSTRAP" --delete --group $g &&
    expect_out "Deletion of requested share groups \('$g'\) was successful" || return 1
  kt consumer.group.ShareGroupCommand --bootstrap-server "$BOOTSTRAP" --list && expect_no_out "^$g(\s|\$)"
}

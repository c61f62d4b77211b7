# Kafka-tool checks of part "admin" (issue 14): what Kafka's tools ask first. Sourced by
# scripts/kafka-tools.sh, which sets $BOOTSTRAP, $KAFKA_LIBS, $WEIR, $WORK and the function
# `kt CLASS ARGS...`; each check_* is judged by its exit status. State changed here (the
# finalized transaction.version, the cluster-wide log.retention.ms) is put back at the end of
# the check that changed it.

# admin_expect FILE REGEX: FILE's text matches REGEX (extended), else print FILE and fail.
admin_expect() {
  if ! grep -Eq "$2" "$1"; then
    echo "expected /$2/ in:" >&2
    cat "$1" >&2
    return 1
  fi
}

check_admin_quorum_status() {
  local out="$WORK/admin_quorum_status.txt"
  kt org.apache.kafka.tools.MetadataQuorumCommand --bootstrap-server "$BOOTSTRAP" describe --status >"$out" || return 1
  admin_expect "$out" '^ClusterId: +[^ ]+' &&
    admin_expect "$out" '^LeaderId: +[1-3]$' &&
    admin_expect "$out" '^LeaderEpoch: +[1-9][0-9]*$' &&
    admin_expect "$out" '^HighWatermark: +[1-9][0-9]*$' &&
    admin_expect "$out" '^CurrentVoters: +\[.*"id": ?1.*"id": ?2.*"id": ?3'
}

check_admin_quorum_replication() {
  local out="$WORK/admin_quorum_replication.txt"
  kt org.apache.kafka.tools.MetadataQuorumCommand --bootstrap-server "$BOOTSTRAP" describe --replication >"$out" || return 1
  admin_expect "$out" 'NodeId.*LogEndOffset.*Lag.*LastFetchTimestamp.*LastCaughtUpTimestamp.*Status' &&
    admin_expect "$out" '^ *[1-3] .*Leader' &&
    [[ $(grep -Ec '^ *[1-3] .*(Leader|Follower)' "$out") -eq 3 ]] || { cat "$out" >&2; return 1; }
}

check_admin_features_describe() {
  local out="$WORK/admin_features_describe.txt"
  kt org.apache.kafka.tools.FeatureCommand --bootstrap-server "$BOOTSTRAP" describe >"$out" || return 1
  admin_expect "$out" 'Feature: metadata.version.*FinalizedVersionLevel: 4\.4-IV2' &&
    admin_expect "$out" 'Feature: transaction.version.*SupportedMaxVersion: 2.*FinalizedVersionLevel: 2' &&
    admin_expect "$out" 'Feature: kraft.version.*FinalizedVersionLevel: 1' &&
    admin_expect "$out" 'Feature: group.version.*SupportedMaxVersion: 1.*FinalizedVersionLevel: 1'
}

check_admin_features_downgrade_upgrade() {
  local out="$WORK/admin_features_change.txt"
  kt org.apache.kafka.tools.FeatureCommand --bootstrap-server "$BOOTSTRAP" downgrade --feature transaction.version=1 >"$out" || return 1
  admin_expect "$out" 'transaction.version was downgraded to 1' || return 1
  kt org.apache.kafka.tools.FeatureCommand --bootstrap-server "$BOOTSTRAP" describe >"$out" || return 1
  admin_expect "$out" 'Feature: transaction.version.*FinalizedVersionLevel: 1' || return 1
  # A level weir does not support is refused, as Kafka refuses it.
  if kt org.apache.kafka.tools.FeatureCommand --bootstrap-server "$BOOTSTRAP" upgrade --feature group.version=2 >"$out" 2>&1; then
    echo "group.version=2 was accepted" >&2
    return 1
  fi
  kt org.apache.kafka.tools.FeatureCommand --bootstrap-server "$BOOTSTRAP" upgrade --feature transaction.version=2 >"$out" || return 1
  admin_expect "$out" 'transaction.version was upgraded to 2' || return 1
  kt org.apache.kafka.tools.FeatureCommand --bootstrap-server "$BOOTSTRAP" describe >"$out" || return 1
  admin_expect "$out" 'Feature: transaction.version.*FinalizedVersionLevel: 2'
}

check_admin_broker_configs_describe() {
  local out="$WORK/admin_broker_configs.txt"
  kt org.apache.kafka.tools.ConfigCommand --bootstrap-server "$BOOTSTRAP" --describe --entity-type brokers --entity-name 1 --all >"$out" || return 1
  admin_expect "$out" 'broker\.id=1 ' &&
    admin_expect "$out" 'advertised\.listeners=PLAINTEXT://[^ ]+:[0-9]+ ' &&
    admin_expect "$out" 'node\.id=1 ' &&
    admin_expect "$out" 'log\.retention\.ms=[0-9]+ '
}

check_admin_broker_configs_default() {
  local out="$WORK/admin_broker_configs_default.txt"
  kt org.apache.kafka.tools.ConfigCommand --bootstrap-server "$BOOTSTRAP" --alter --entity-type brokers --entity-default \
    --add-config log.retention.ms=5400000 >"$out" || return 1
  kt org.apache.kafka.tools.ConfigCommand --bootstrap-server "$BOOTSTRAP" --describe --entity-type brokers --entity-default >"$out" || return 1
  admin_expect "$out" 'log\.retention\.ms=5400000 .*DYNAMIC_DEFAULT_BROKER_CONFIG' || return 1
  local id
  for id in 1 2 3; do
    kt org.apache.kafka.tools.ConfigCommand --bootstrap-server "$BOOTSTRAP" --describe --entity-type brokers --entity-name "$id" --all >"$out" || return 1
    admin_expect "$out" 'log\.retention\.ms=5400000 sensitive=false synonyms=\{DYNAMIC_DEFAULT_BROKER_CONFIG' || return 1
  done
  kt org.apache.kafka.tools.ConfigCommand --bootstrap-server "$BOOTSTRAP" --alter --entity-type brokers --entity-default \
    --delete-config log.retention.ms >"$out" || return 1
  kt org.apache.kafka.tools.ConfigCommand --bootstrap-server "$BOOTSTRAP" --describe --entity-type brokers --entity-default >"$out" || return 1
  if grep -q 'log\.retention\.ms=' "$out"; then
    cat "$out" >&2
    return 1
  fi
}

check_admin_broker_api_versions() {
  local out="$WORK/admin_broker_api_versions.txt"
  kt org.apache.kafka.tools.BrokerApiVersionsCommand --bootstrap-server "$BOOTSTRAP" >"$out" || return 1
  admin_expect "$out" 'DescribeQuorum\(55\): 0 to 2 \[usable: 2\]' &&
    admin_expect "$out" 'UpdateFeatures\(57\): 0 to 2 \[usable: 2\]' &&
    admin_expect "$out" 'AddRaftVoter\(80\): 0 to 1' &&
    [[ $(grep -Ec '^[^ ].*\(id: [1-3] ' "$out") -eq 3 ]] || { cat "$out" >&2; return 1; }
}

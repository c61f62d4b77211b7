# Kafka tool checks of several log dirs per broker (sourced by scripts/kafka-tools.sh, which sets
# $BOOTSTRAP, $KAFKA_LIBS, $WEIR, $WORK and the function kt). The move checks need two log dirs
# or more per broker: start the dev cluster with `weir dev-cluster --log-dirs-per-node 2` (or
# more); with one dir per broker they fail saying so.

# jbod_logdirs_json prints LogDirsCommand --describe's JSON for the topic $1 on brokers $2.
jbod_logdirs_json() {
  kt org.apache.kafka.tools.LogDirsCommand --bootstrap-server "$BOOTSTRAP" --describe \
    --topic-list "$1" --broker-list "$2" | grep '^{'
}

# jbod_dir_of prints the log dir holding partition $2 of topic $1 on broker $3 ("" if none),
# and the other dirs of that broker on the next line, space-separated.
jbod_dir_of() {
  jbod_logdirs_json "$1" "$3" | python3 -c '
import json, sys
topic, part, broker = sys.argv[1], sys.argv[2], int(sys.argv[3])
doc = json.load(sys.stdin)
cur, others = "", []
for b in doc["brokers"]:
    if b["broker"] != broker:
        continue
    for d in b["logDirs"]:
        names = [p["partition"] for p in d["partitions"] if not p["isFuture"]]
        if topic + "-" + part in names:
            cur = d["logDir"]
        elif d["error"] is None:
            others.append(d["logDir"])
print(cur)
print(" ".join(others))
' "$1" "$2" "$3"
}

check_jbod_logdirs_describe() {
  local topic=jbod-describe
  kt org.apache.kafka.tools.TopicCommand --bootstrap-server "$BOOTSTRAP" --create --if-not-exists --topic "$topic" \
    --partitions 3 --replication-factor 3 || return 1
  local json
  for _ in $(seq 1 30); do
    json=$(jbod_logdirs_json "$topic" 1,2,3) || return 1
    # Every broker describes the 3 partitions, each with a size and an offset lag.
    if python3 -c '
import json, sys
doc = json.loads(sys.argv[1])
seen = {}
for b in doc["brokers"]:
    for d in b["logDirs"]:
        assert d["error"] is None, d
        for p in d["partitions"]:
            assert p["size"] >= 0 and p["offsetLag"] >= 0 and not p["isFuture"], p
            seen.setdefault(b["broker"], set()).add(p["partition"])
want = {"jbod-describe-0", "jbod-describe-1", "jbod-describe-2"}
assert sorted(seen) == [1, 2, 3] and all(v == want for v in seen.values()), seen
' "$json"; then
      return 0
    fi
    sleep 1
  done
  echo "LogDirsCommand never described every partition on every broker: $json"
  return 1
}

check_jbod_reassign_log_dirs() {
  local topic=jbod-reassign
  kt org.apache.kafka.tools.TopicCommand --bootstrap-server "$BOOTSTRAP" --create --if-not-exists --topic "$topic" \
    --replica-assignment 1:2:3 || return 1
  kt org.apache.kafka.tools.ProducerPerformance --topic "$topic" --num-records 2000 --record-size 100 \
    --throughput -1 --producer-props bootstrap.servers="$BOOTSTRAP" acks=all >/dev/null || return 1
  local where cur to
  for _ in $(seq 1 30); do
    where=$(jbod_dir_of "$topic" 0 1) || return 1
    cur=$(sed -n 1p <<<"$where")
    [[ -n "$cur" ]] && break
    sleep 1
  done
  to=$(sed -n 2p <<<"$where" | awk '{print $1}')
  if [[ -z "$cur" || -z "$to" ]]; then
    echo "broker 1 needs two log dirs (weir dev-cluster --log-dirs-per-node 2): current '$cur', other '$to'"
    return 1
  fi
  cat >"$WORK/jbod-reassign.json" <<JSON
{"version":1,"partitions":[{"topic":"$topic","partition":0,"replicas":[1,2,3],"log_dirs":["$to","any","any"]}]}
JSON
  kt org.apache.kafka.tools.reassign.ReassignPartitionsCommand --bootstrap-server "$BOOTSTRAP" \
    --reassignment-json-file "$WORK/jbod-reassign.json" --execute || return 1
  for _ in $(seq 1 60); do
    local out
    out=$(kt org.apache.kafka.tools.reassign.ReassignPartitionsCommand --bootstrap-server "$BOOTSTRAP" \
      --reassignment-json-file "$WORK/jbod-reassign.json" --verify) || true
    if grep -q "complete" <<<"$out" && ! grep -qi "in progress" <<<"$out" &&
      [[ "$(jbod_dir_of "$topic" 0 1 | sed -n 1p)" == "$to" ]]; then
      return 0
    fi
    sleep 1
  done
  echo "replica of $topic-0 on broker 1 never reached $to"
  return 1
}

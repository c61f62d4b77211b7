# Kafka-tool checks of leader election (part "leader": ElectLeaders, controller/elect.go).
# Sourced by scripts/kafka-tools.sh; each check_* function is judged by its exit status. Uses
# $BOOTSTRAP, $WEIR, $WORK and kt (see scripts/kafka-tools.sh). Topics are prefixed "leader".

# leader_topic NAME PARTITIONS RF: creates a topic with weir's CLI and waits for a full ISR.
leader_topic() {
	"$WEIR" topic create "$1" --partitions "$2" --replication-factor "$3" --bootstrap "$BOOTSTRAP" >/dev/null || return 1
	local i
	for i in $(seq 1 60); do
		if ! "$WEIR" topic describe "$1" --under-replicated --bootstrap "$BOOTSTRAP" 2>/dev/null | grep -q "$1"; then
			return 0
		fi
		sleep 0.5
	done
	echo "topic $1 still under-replicated" >&2
	return 1
}

# kafka-leader-election.sh --election-type PREFERRED --all-topic-partitions: succeeds on a
# balanced cluster (nothing to do: Kafka leaves partitions whose election is not needed out of
# the answer). It names every topic, other checks' too, but a preferred election only moves a
# leadership back to its preferred replica, which the automatic leader balance does anyway.
check_leader_preferred_all() {
	leader_topic leader-all 6 3 || return 1
	kt org.apache.kafka.tools.LeaderElectionCommand --bootstrap-server "$BOOTSTRAP" \
		--election-type PREFERRED --all-topic-partitions
}

# kafka-leader-election.sh --election-type PREFERRED --topic T --partition 0: the preferred
# replica already leads, which the tool reports as "Valid replica already elected" and exit 0.
check_leader_preferred_partition() {
	leader_topic leader-one 3 3 || return 1
	local out
	out=$(kt org.apache.kafka.tools.LeaderElectionCommand --bootstrap-server "$BOOTSTRAP" \
		--election-type PREFERRED --topic leader-one --partition 0) || return 1
	echo "$out"
	grep -q "leader-one-0" <<<"$out"
}

# --path-to-json-file with this check's partitions.
check_leader_preferred_json() {
	leader_topic leader-json 2 3 || return 1
	echo '{"partitions":[{"topic":"leader-json","partition":0},{"topic":"leader-json","partition":1}]}' >"$WORK/leader-json.json"
	local out
	out=$(kt org.apache.kafka.tools.LeaderElectionCommand --bootstrap-server "$BOOTSTRAP" \
		--election-type PREFERRED --path-to-json-file "$WORK/leader-json.json") || return 1
	echo "$out"
	grep -q "leader-json-0" <<<"$out" && grep -q "leader-json-1" <<<"$out"
}

# --election-type UNCLEAN on a led partition: ELECTION_NOT_NEEDED, exit 0.
check_leader_unclean_not_needed() {
	leader_topic leader-unclean 1 3 || return 1
	kt org.apache.kafka.tools.LeaderElectionCommand --bootstrap-server "$BOOTSTRAP" \
		--election-type UNCLEAN --topic leader-unclean --partition 0
}

# A partition of an unknown topic: the tool reports the failure and exits non-zero.
check_leader_unknown_topic_fails() {
	local out
	if out=$(kt org.apache.kafka.tools.LeaderElectionCommand --bootstrap-server "$BOOTSTRAP" \
		--election-type PREFERRED --topic leader-no-such-topic --partition 0 2>&1); then
		echo "$out"
		echo "election of an unknown topic's partition succeeded" >&2
		return 1
	fi
	echo "$out"
	grep -qi "UnknownTopicOrPartition\|does not host this topic-partition\|not exist" <<<"$out"
}

# weir's own command: `weir partition elect --type preferred --all`, and the balance table.
check_leader_weir_cli() {
	leader_topic leader-cli 3 3 || return 1
	"$WEIR" partition elect --type preferred --all --bootstrap "$BOOTSTRAP" || return 1
	"$WEIR" partition elect --type preferred --topic leader-cli --bootstrap "$BOOTSTRAP" || return 1
	"$WEIR" partition leaders --topic leader-cli --bootstrap "$BOOTSTRAP"
}

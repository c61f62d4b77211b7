# Kafka tool checks of partition reassignment (KIP-455) and replication throttles (KIP-73):
# org.apache.kafka.tools.reassign.ReassignPartitionsCommand --generate, --execute (with
# --throttle), --verify (which removes the throttles) and --cancel against a 3-broker weir
# cluster. Sourced by scripts/kafka-tools.sh; each check_* is judged by its exit status and uses
# only topics named reassign-*.

RP=org.apache.kafka.tools.reassign.ReassignPartitionsCommand
TC=org.apache.kafka.tools.TopicCommand

# reassign_replicas TOPIC PARTITION: the partition's replica list as TopicCommand describes it.
reassign_replicas() {
	kt $TC --bootstrap-server "$BOOTSTRAP" --describe --topic "$1" |
		awk -v p="$2" '$0 ~ "Partition: "p"\t" || $0 ~ "Partition: "p" " { for (i = 1; i <= NF; i++) if ($i == "Replicas:") print $(i+1) }'
}

# reassign_fill TOPIC MIB: writes about MIB MiB of 1 KiB records with weir's producer.
reassign_fill() {
	head -c $(($2 * 1024 * 768)) /dev/urandom | base64 -w 1024 | head -n $(($2 * 1024)) |
		"$WEIR" produce --bootstrap "${BOOTSTRAP%%,*}" --topic "$1" --acks all >/dev/null
}

# --generate proposes a plan over the given brokers for the topics in the JSON file.
check_reassign_generate() {
	kt $TC --bootstrap-server "$BOOTSTRAP" --create --topic reassign-gen --replica-assignment 1:2,2:3,3:1 || return 1
	echo '{"version":1,"topics":[{"topic":"reassign-gen"}]}' >"$WORK/reassign-gen-topics.json"
	kt $RP --bootstrap-server "$BOOTSTRAP" --topics-to-move-json-file "$WORK/reassign-gen-topics.json" \
		--broker-list 2,3 --generate >"$WORK/reassign-gen.txt" || return 1
	grep -q 'Current partition replica assignment' "$WORK/reassign-gen.txt" &&
		grep -q 'Proposed partition reassignment configuration' "$WORK/reassign-gen.txt" &&
		! grep -A1 'Proposed' "$WORK/reassign-gen.txt" | tail -1 | grep -q '"replicas":\[[^]]*1'
}

# --execute with --throttle moves a partition from {1,2} to {2,3}; --verify reports it
# completed and clears the throttles; the replicas are then 2,3.
check_reassign_execute_verify() {
	kt $TC --bootstrap-server "$BOOTSTRAP" --create --topic reassign-exec --replica-assignment 1:2 || return 1
	reassign_fill reassign-exec 2 || return 1
	echo '{"version":1,"partitions":[{"topic":"reassign-exec","partition":0,"replicas":[2,3]}]}' >"$WORK/reassign-exec.json"
	kt $RP --bootstrap-server "$BOOTSTRAP" --reassignment-json-file "$WORK/reassign-exec.json" \
		--execute --throttle 50000000 || return 1
	local i
	for i in $(seq 1 60); do
		if kt $RP --bootstrap-server "$BOOTSTRAP" --reassignment-json-file "$WORK/reassign-exec.json" --verify >"$WORK/reassign-verify.txt" &&
			grep -q 'reassign-exec-0 is completed' "$WORK/reassign-verify.txt"; then
			grep -q 'Clearing broker-level throttles' "$WORK/reassign-verify.txt" || return 1
			grep -q 'Clearing topic-level throttles' "$WORK/reassign-verify.txt" || return 1
			[ "$(reassign_replicas reassign-exec 0)" = "2,3" ] || return 1
			# The throttle configs are gone from the topic.
			! kt org.apache.kafka.tools.ConfigCommand --bootstrap-server "$BOOTSTRAP" --describe \
				--entity-type topics --entity-name reassign-exec | grep -q 'replication.throttled.replicas'
			return
		fi
		sleep 1
	done
	return 1
}

# A reassignment held back by a 1 B/s throttle stays in progress; --cancel puts the partition
# back on its original replicas.
check_reassign_cancel() {
	kt $TC --bootstrap-server "$BOOTSTRAP" --create --topic reassign-cancel --replica-assignment 1:2 || return 1
	reassign_fill reassign-cancel 3 || return 1
	echo '{"version":1,"partitions":[{"topic":"reassign-cancel","partition":0,"replicas":[2,3]}]}' >"$WORK/reassign-cancel.json"
	kt $RP --bootstrap-server "$BOOTSTRAP" --reassignment-json-file "$WORK/reassign-cancel.json" \
		--execute --throttle 1 || return 1
	kt $RP --bootstrap-server "$BOOTSTRAP" --reassignment-json-file "$WORK/reassign-cancel.json" --verify >"$WORK/reassign-cancel-verify.txt"
	grep -q 'reassign-cancel-0 is still in progress' "$WORK/reassign-cancel-verify.txt" || return 1
	kt $RP --bootstrap-server "$BOOTSTRAP" --reassignment-json-file "$WORK/reassign-cancel.json" \
		--cancel >"$WORK/reassign-cancel-out.txt" || return 1
	grep -q 'Successfully cancelled' "$WORK/reassign-cancel-out.txt" || return 1
	# Back on brokers 1 and 2 (in Kafka's order after a cancel: the target's replicas first).
	[ "$(reassign_replicas reassign-cancel 0 | tr , '\n' | sort -n | paste -sd,)" = "1,2" ]
}

# Client quotas through Kafka's ConfigCommand (kafka-configs.sh): AlterClientQuotas and
# DescribeClientQuotas. Sourced by scripts/kafka-tools.sh, which sets $BOOTSTRAP, $KAFKA_LIBS,
# $WEIR, $WORK and defines kt. Entities are named quotas-* so no other check sees them.

# A client-id quota: set, described by Kafka's tool and by weir's, removed.
check_quotas_client() {
	kt org.apache.kafka.tools.ConfigCommand --bootstrap-server "$BOOTSTRAP" --alter \
		--add-config 'producer_byte_rate=1024,consumer_byte_rate=2048' --entity-type clients --entity-name quotas-c1 || return 1
	out=$(kt org.apache.kafka.tools.ConfigCommand --bootstrap-server "$BOOTSTRAP" --describe \
		--entity-type clients --entity-name quotas-c1) || return 1
	echo "$out" | grep -q "client-id 'quotas-c1'" || return 1
	echo "$out" | grep -q "producer_byte_rate=1024" || return 1
	echo "$out" | grep -q "consumer_byte_rate=2048" || return 1
	"$WEIR" quota describe --bootstrap "${BOOTSTRAP%%,*}" --client-id quotas-c1 | grep -q "producer_byte_rate=1024" || return 1
	kt org.apache.kafka.tools.ConfigCommand --bootstrap-server "$BOOTSTRAP" --alter \
		--delete-config 'producer_byte_rate' --entity-type clients --entity-name quotas-c1 || return 1
	out=$(kt org.apache.kafka.tools.ConfigCommand --bootstrap-server "$BOOTSTRAP" --describe \
		--entity-type clients --entity-name quotas-c1) || return 1
	echo "$out" | grep -q "producer_byte_rate" && return 1
	echo "$out" | grep -q "consumer_byte_rate=2048" || return 1
	kt org.apache.kafka.tools.ConfigCommand --bootstrap-server "$BOOTSTRAP" --alter \
		--delete-config 'consumer_byte_rate' --entity-type clients --entity-name quotas-c1
}

# A user quota, a user + client-id quota, and the <default> user (--entity-default).
check_quotas_users() {
	kt org.apache.kafka.tools.ConfigCommand --bootstrap-server "$BOOTSTRAP" --alter \
		--add-config 'request_percentage=50' --entity-type users --entity-name quotas-alice || return 1
	kt org.apache.kafka.tools.ConfigCommand --bootstrap-server "$BOOTSTRAP" --alter \
		--add-config 'producer_byte_rate=4096' --entity-type users --entity-name quotas-alice \
		--entity-type clients --entity-name quotas-c2 || return 1
	kt org.apache.kafka.tools.ConfigCommand --bootstrap-server "$BOOTSTRAP" --alter \
		--add-config 'controller_mutation_rate=10' --entity-type users --entity-default || return 1
	out=$(kt org.apache.kafka.tools.ConfigCommand --bootstrap-server "$BOOTSTRAP" --describe \
		--entity-type users --entity-name quotas-alice) || return 1
	echo "$out" | grep -q "request_percentage=50" || return 1
	out=$(kt org.apache.kafka.tools.ConfigCommand --bootstrap-server "$BOOTSTRAP" --describe \
		--entity-type users --entity-name quotas-alice --entity-type clients --entity-name quotas-c2) || return 1
	echo "$out" | grep -q "producer_byte_rate=4096" || return 1
	out=$(kt org.apache.kafka.tools.ConfigCommand --bootstrap-server "$BOOTSTRAP" --describe \
		--entity-type users --entity-default) || return 1
	echo "$out" | grep -q "controller_mutation_rate=10" || return 1
	# Every quota, as kafka-configs.sh --describe --entity-type users lists them.
	out=$(kt org.apache.kafka.tools.ConfigCommand --bootstrap-server "$BOOTSTRAP" --describe --entity-type users) || return 1
	echo "$out" | grep -q "quotas-alice" || return 1
	kt org.apache.kafka.tools.ConfigCommand --bootstrap-server "$BOOTSTRAP" --alter \
		--delete-config 'request_percentage' --entity-type users --entity-name quotas-alice || return 1
	kt org.apache.kafka.tools.ConfigCommand --bootstrap-server "$BOOTSTRAP" --alter \
		--delete-config 'producer_byte_rate' --entity-type users --entity-name quotas-alice \
		--entity-type clients --entity-name quotas-c2 || return 1
	kt org.apache.kafka.tools.ConfigCommand --bootstrap-server "$BOOTSTRAP" --alter \
		--delete-config 'controller_mutation_rate' --entity-type users --entity-default
}

# A key Kafka does not know for quotas is refused (INVALID_REQUEST; the tool exits non-zero).
check_quotas_bad_key() {
	if kt org.apache.kafka.tools.ConfigCommand --bootstrap-server "$BOOTSTRAP" --alter \
		--add-config 'no_such_rate=1' --entity-type clients --entity-name quotas-c3; then
		return 1
	fi
	return 0
}

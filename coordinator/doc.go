// Package coordinator is weir's group coordinator: classic (pre-KIP-848) consumer groups, their
// membership, generations and client-side assignments; KIP-848 consumer groups (consumer*.go:
// member epochs, server-side target assignment, reconciliation) and the online migration of a
// group between the two protocols (migrate.go); KIP-932 share groups (share*.go:
// membership, assignment, share-partition state initialization through sharestate.Persister);
// and the committed offsets, all stored durably as records on the internal topic
// __consumer_offsets exactly as Kafka stores them.
//
// # Placement
//
// A group lives on partition abs(hashCode(groupID)) % partitions of __consumer_offsets, where
// hashCode is Java's String.hashCode over UTF-16 code units and abs is Kafka's Utils.abs
// (Integer.MIN_VALUE maps to 0): PartitionFor. The broker leading that partition coordinates the
// group (on a single broker, every group).
//
// # Concurrency
//
// One goroutine owns each group (group.run); every other goroutine changes or reads a group only
// by sending it a closure on its channel and waiting (group.do). The Coordinator's mutex guards
// only the map of groups and the per-partition load states. A group goroutine never blocks on
// the disk's fdatasync or on the network: it appends records (page cache) and hands the caller a
// durability mark; the caller (a broker handler, on the connection's writer goroutine for a
// deferred reply) waits for the fdatasync. JoinGroup and SyncGroup register at once, in request
// order, and their replies wait on a buffered channel that the group fills when the join phase
// completes or the leader's assignment arrives. Timers (sessions, join and sync phases, pending
// members) are one per group, re-armed for the earliest deadline; a firing only posts a closure,
// and the group re-checks its deadlines against the clock, so stale firings are harmless. The
// Clock is injectable: tests drive the state machine with a fake one.
//
// Two clocks: deadlines and timers (sessions, rebalance, join and sync phases, pending members,
// share-group sessions) use Config.Clock, Go's time.Now by default, whose comparisons use the
// monotonic clock, so a wall-clock step neither expires every member nor freezes expiry (Kafka's
// timers run on a monotonic clock too). Timestamps written to __consumer_offsets or compared with
// written ones (commit and expire timestamps, offsets retention, currentStateTimestamp, regex
// refresh timestamps, batch timestamps) use Config.Wall, the broker's internal/clock.Now, as
// Kafka uses Time.milliseconds(): a forward step of the wall clock can expire offsets early
// (Kafka's behaviour), a backward one delays their expiry; neither moves a committed offset back.
//
// # State machine (Kafka's ClassicGroup, rule for rule)
//
// Empty -> PreparingRebalance -> CompletingRebalance -> Stable, and Dead once deleted or expired.
//   - JoinGroup v4+ from a new dynamic member answers MEMBER_ID_REQUIRED with an id to rejoin
//     with (that pending id expires after the session timeout). Static members (group.instance.id,
//     KIP-345) join directly; a known instance id joining without a member id replaces the old
//     member (whose parked requests get FENCED_INSTANCE_ID) and, in a Stable group whose selected
//     protocol does not change, does not rebalance (v9: a static leader gets SkipAssignment).
//   - The first member to join leads; a leader that leaves or does not rejoin is replaced by the
//     earliest remaining (rejoined) member. A join phase from Empty waits
//     group.initial.rebalance.delay.ms, extended while members keep arriving, up to the rebalance
//     timeout; otherwise it ends when every member has rejoined (and no pending member is left) or
//     at the largest rebalance timeout, dropping dynamic members that did not rejoin.
//   - The protocol is chosen among those every member supports, by the members' first
//     preferences (ties: the leader's order). Only the leader's JoinGroup response lists the
//     members and their metadata. Followers' SyncGroups park until the leader's arrives; its
//     assignment is stored (GroupMetadataValue) and every member gets its own, zero-length if the
//     leader gave it none. Members that do not sync within the rebalance timeout are removed.
//   - A member missing its session timeout is removed and the group rebalances (a member parked
//     in a join or sync is not expired; a new member parked in a join expires after 5 minutes).
//   - Errors where Kafka answers them: UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
//     REBALANCE_IN_PROGRESS, FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL,
//     GROUP_MAX_SIZE_REACHED (group.max.size, counted as Kafka does), INVALID_SESSION_TIMEOUT
//     (group.min/max.session.timeout.ms), COORDINATOR_LOAD_IN_PROGRESS while the group's partition
//     loads, NOT_COORDINATOR after Close.
//
// # Records on __consumer_offsets
//
// Keys and values use Kafka's schemas (schema.go): OffsetCommitKey (key version 1: group,
// topic, partition) with OffsetCommitValue v3 (offset, leader epoch, metadata, commit time; v1
// when an OffsetCommit v2-v4 retention time sets an expire time), GroupMetadataKey (version 2)
// with GroupMetadataValue v3 (protocol type, generation, protocol, leader, state time, members
// with instance id, client id and host, timeouts, subscription and assignment). Values v0-v4
// (including the flexible v4 newer Kafka writes) are read. A null value is a tombstone. Record
// types of KIP-848 consumer groups (3-8, 16: consumer_records.go) and share groups (9-15:
// share_records.go) are replayed by their own code; other types are skipped at load; compressed batches (a
// log Kafka wrote) are read within record.DecompressLimit. Control batches are transaction
// markers (key: version, type 0 ABORT / 1 COMMIT).
// Each commit is one uncompressed batch (atomic); its reply waits for the fdatasync. A group
// record is written when a generation's assignment arrives, when a static member is replaced,
// and when the group becomes empty; tombstones when a group is deleted or offsets expire or are
// deleted.
//
// # Transactional offsets (txn.go)
//
// TxnCommitOffsets (TxnOffsetCommit, KIP-447 fencing as Kafka's ClassicGroup.validateOffsetCommit
// with isTransactional) appends one transactional batch (the producer's id and epoch, base
// sequence 0) through the log's TxnAppender and keeps the offsets pending per producer id in the
// group (group.txn); the Coordinator's txnOpen index, guarded by its mutex, names the groups of
// each partition holding a producer's pending offsets. CompleteTxn, called once the producer's
// end marker is in the partition's log, makes them committed (COMMIT: where their record is
// later in the log than the committed one's, as Kafka compares record offsets) or drops them
// (ABORT). OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for a partition with a
// pending offset. An offset tombstone drops the partition's pending offsets; pending offsets
// stop their partition's committed offset from expiring and their group from being removed.
// Markers CompleteTxn receives while the partition loads are kept (bounded; past the bound the
// partition is read again) and applied at install when the load had not read them.
//
// # Loading
//
// Start reads every existing partition (LoadThreads at a time) from its log start: the last
// value per key wins, tombstones delete; a transactional batch's offsets are pending under its
// producer id until that producer's COMMIT or ABORT control batch, and stay pending when the log
// ends first. A loaded group with members is Stable in its stored
// generation; each member must heartbeat within its session timeout (as after a coordinator
// failover). A partition that cannot be read leaves its groups COORDINATOR_NOT_AVAILABLE.
//
// # Expiry (KIP-211)
//
// Every offsets.retention.check.interval.ms: offsets of an Empty group expire
// offsets.retention.minutes after it became empty; of a Stable consumer group, those of topics
// no member subscribes to, by commit time; of a group that only stores offsets, by commit time;
// an expire time from OffsetCommit v2-v4 wins. An Empty group left with no offsets is removed.
//
// # Bounds
//
// Group ids and the strings stored in records are at most 32767 bytes (the schemas' int16
// lengths; INVALID_GROUP_ID / INVALID_REQUEST beyond); a member's protocol metadata at most 1 MiB
// and an assignment at most 1 MiB (INVALID_REQUEST); pending MEMBER_ID_REQUIRED ids per group at
// most min(group.max.size, 10000) (GROUP_MAX_SIZE_REACHED); commit metadata at most
// offset.metadata.max.bytes (OFFSET_METADATA_TOO_LARGE).
package coordinator

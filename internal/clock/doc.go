// Package clock is the broker's one clock seam: the process's wall clock, which the fault suite
// can step, and its monotonic clock, which nothing steps.
//
// # The two clocks
//
// A real wall-clock step (NTP, an operator, a VM resumed on another host) moves the wall reading
// of every time.Now() and leaves Go's monotonic reading alone: Sub, Since, Until, Before and
// After between two time.Now() values, timers and net deadlines use the monotonic reading and
// never see the step; Unix, UnixMilli, UnixNano, Format see it. This package makes that split
// explicit and gives the wall side one place where a test can move it:
//
//   - Now is the wall clock: time.Now's wall reading plus an offset, with no monotonic reading
//     (so comparisons between its values compare wall readings and show a step). It is what
//     Kafka reads with Time.milliseconds() for values that are wall timestamps: stored, sent to
//     clients, or compared with stored ones.
//   - Nanotime is the monotonic clock as an integer (Kafka's Time.nanoseconds()), for
//     elapsed-time rules kept in integer fields. Its origin is far from zero (NanotimeOrigin),
//     so a zero field can mean "never".
//   - Elapsed-time rules kept as time.Time values keep using time.Now()/time.Since/Sub: their
//     monotonic reading already ignores steps.
//
// The offset is zero unless internal/clock/clockctl moves it; only test files and files built
// with -tags faults may import clockctl (internal/layering checks it), and in a -tags faults
// binary internal/faultctl mounts clockctl.Handler at /faults/clock on the admin listener. A
// release binary has no code that moves the clock. TestBrokerReadsTheWallClockOnlyThroughThisPackage
// refuses a wall reading of time.Now in the broker's code (time.Now().Unix*(), .UTC(), .Format(),
// time.Now passed as a clock), so that the control reaches every wall-clock consumer and no
// elapsed-time rule reads the wall clock by mistake.
//
// Routing rule, per call site: a value that is a wall timestamp reads Now; an elapsed-time
// measurement (timeouts, leases, rates, intervals) reads the monotonic clock, even where Kafka
// reads Time.milliseconds(), unless it is compared with a stored timestamp (then there is no
// monotonic reading to compare with, and it is wall time, as in Kafka).
//
// # Routed to Now (the wall clock the control steps), wired in broker start-up
//
//   - engine.Config.Now (broker/config.go LogConfig): LogAppendTime stamped into batches
//     (record.Policy.Now), the CreateTime bounds message.timestamp.before/after.max.ms, time
//     retention (retention.ms against each segment's largest timestamp, or its creation time
//     when it has none), time-based rolls (segment.ms: a batch's timestamp against the
//     segment's first, as Kafka; the clock against the segment's creation when either has none),
//     producer-id expiry (producer.id.expiration.ms against the last batch's timestamp, also at
//     open), min/max.compaction.lag.ms and the delete horizon of tombstones and markers, and the
//     timestamps of the transaction markers the log writes.
//   - coordinator.Config.Wall (broker/groups.go): offset commit timestamps and expire
//     timestamps, offsets retention (offsets.retention.minutes; ExpireOffsets), the group's
//     currentStateTimestamp (Empty-group expiry base), regex-resolution timestamps and their
//     refresh interval (compared with the stored timestamp), timestamps of __consumer_offsets
//     batches.
//   - txncoord.Config.Clock (broker/txnstate.go wallClock; also txncoord's default): transaction
//     start and last-update timestamps, transaction timeouts (AbortTimedOut), transactional-id
//     expiry, __transaction_state batch timestamps: all compared with stored timestamps, as
//     Kafka's TransactionStateManager does.
//   - sharecoord.Config.Now (broker/sharecoord.go; also its default): CreateTimestamp and
//     WriteTimestamp of __share_group_state records and their batch timestamps.
//   - broker/sharefetch.go shareStartOffset: share.auto.offset.reset=by_duration:<d> (a
//     timestamp lookup at Now - d).
//   - broker/broker.go: the date comment written into meta.properties.
//
// # On the monotonic clock (a step changes nothing)
//
//   - Group membership (coordinator.Config.Clock, Go's time.Now): session timeouts, rebalance,
//     join and sync phases, pending members, share-group sessions; timers are time.AfterFunc.
//     Kafka's group timers also run on a monotonic clock.
//   - Share-record acquisition locks (sharepart's default clock, Nanotime): lock deadlines and
//     their timer. Before, they were UnixNano of time.Now (a wall reading).
//   - ISR lag (replication.LeaderState, fed time.Now() by broker/replicas.go; compared with
//     Sub): replica.lag.time.max.ms. Kafka reads Time.milliseconds() here; a forward step there
//     shrinks the ISR and a backward one keeps a dead follower in it for the step's length,
//     so weir keeps it monotonic.
//   - Client quotas (broker/quotas.go monoMs, Nanotime): rate windows, the controller-mutation
//     token bucket, idle sensor eviction. Kafka reads the wall clock here; a backward step would
//     keep a window open for its length and throttle without end. Before, they read
//     time.Now().UnixMilli().
//   - Quota mutes of a connection (netio/conn.go muteUntil, Nanotime). Before, UnixNano of
//     time.Now: a backward step during a mute held the connection for the step's length.
//   - Producer-id expiry's second rule (engine.Config.Nanotime): a producer this process saw
//     write less than producer.id.expiration.ms ago is kept whatever the wall clock says.
//   - Uncleanable-log backoff of the log cleaner (engine, Config.Nanotime).
//   - Log rate limits: engine/logdir.go refusal log, netio/server.go refused-connection log,
//     broker/sharefetch.go share-session sweep interval (Nanotime).
//   - Fetch and ShareFetch long polls (max.wait.ms deadlines and timers), fetch-session
//     eviction (broker/fetchsession.go, time.Since), replication throttles and JBOD copy quotas
//     (replication.Quota, Sub), authentication and connection-creation rate limits
//     (broker/security.go, netio/rate.go, Sub), request-time quota measurement, SCRAM and
//     transaction-marker retry deadlines, net read/write deadlines (netio, controller,
//     replication: Go uses the monotonic reading of the deadline), follower fetcher backoff and
//     request deadlines and re-authentication expiry (replication), the controller's broker
//     liveness (session timeout), elections, quorum and RPC timeouts, Raft's own timers
//     (hashicorp/raft), and every duration measured for logs or metrics (fsync time, load and
//     clean durations, request latency).
//
// # Left on time.Now's wall reading (not broker state)
//
//   - controller/quorum.go: DescribeQuorum's lastFetchTimestamp/lastCaughtUpTimestamp, reported
//     as the wall readings of the time.Now() values the controller keeps for elapsed time.
//   - record.Build's default CreateTime (the test and load-generator encoder, a client's clock;
//     record is in this package's layer), client tools and load generators (cmd/, scripts/,
//     benchmarks/), the test harnesses and test certificates.
//
// # What a step does (and what Kafka does)
//
//   - +1 day: LogAppendTime jumps ahead; segments stamped then keep their timestamps, so a later
//     backward step cannot make them expire sooner. Time retention of data younger than
//     retention.ms minus the step is unaffected (retention.ms 7 days: nothing acknowledged in
//     the last 6 days goes); data older than that is deleted early, as Kafka would. Offsets
//     retention and transactional-id expiry likewise advance by the step; an ongoing
//     transaction older than its timeout minus the step is aborted (Kafka does the same).
//     Producers writing stay known (the monotonic rule), unlike Kafka.
//   - -1 day: LogAppendTime goes back; the segment's largest timestamp and the time index keep
//     the largest timestamp so far (entries only for a larger timestamp), so the index stays
//     monotonic and ListOffsets by timestamp answers the first offset stamped at or after the
//     target, as Kafka does. Retention, offsets retention, transaction timeouts and id expiry
//     are delayed by the step. A CreateTime batch stamped by a client whose clock did not step
//     is more than message.timestamp.after.max.ms (1 hour) ahead of the broker and is refused
//     with INVALID_TIMESTAMP until the clocks agree again: Kafka does the same; nothing
//     acknowledged is affected.
//   - A strobe of ±200 ms: LogAppendTime is not monotonic within ±200 ms; the time index and the
//     segments' largest timestamps absorb it as above.
//
// Goroutines: none. Now, NowMs, Nanotime and Offset are safe for concurrent use.
package clock

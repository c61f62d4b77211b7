// Package replication is clustering's data plane: the partition leader's replication state (the
// followers' log ends, the ISR, the high watermark and what acks=all waits for) and the follower
// fetchers that copy partitions from their leaders over the Kafka protocol. The control plane
// (metadata log, image, placement, fencing) is package controller; this package imports neither
// it nor package broker. Below it are engine (the logs), record and internal/peerauth.
//
// What it owns:
//   - LeaderState (leader.go): one partition's state on its leader, Kafka's Partition/Replica
//     semantics: a follower's fetch offset is its log end; the high watermark is the minimum log
//     end over the ISR (the maximal ISR while an ISR change is pending, KIP-497) and never goes
//     back; a follower whose fetch offset reaches the high watermark and the leader epoch's
//     start offset is proposed for the ISR, one that has not caught up with the leader's end
//     for replica.lag.time.max.ms is proposed for removal. The ISR changes it proposes (ISRChange) are
//     committed by the controller (AlterPartition) and come back through ApplyPartition. A
//     change stays pending (and its additions count for the high watermark) until a committed
//     state with a newer partition epoch arrives or the controller refuses it for good
//     (AbortPending): the state at the current epochs, seen again, does not end it, since the
//     controller may have committed the change already (Kafka's Partition and
//     AlterPartitionManager).
//   - Fetchers (fetcher.go): the follower side. One goroutine and one connection per source
//     broker (kclient.go, with the inter-broker listener's TLS and SASL in kclient_security.go),
//     many partitions per Fetch request (replica id set), in an incremental fetch session
//     (KIP-227) per source broker: after the first full Fetch, a Fetch names only the
//     partitions whose fetch offset, log start or leader epoch moved, so an idle follower of N
//     partitions does not send and parse N partitions per Fetch (any failure makes the next
//     Fetch a full one). Fetchers write to a FollowerLog, the small interface engine.Log and
//     engine.MemLog both satisfy.
//
// Goroutines: LeaderState starts none and never reads the clock (time is passed in); it is not
// safe for concurrent use (the broker holds the replica's lock around every call). Fetchers runs
// one goroutine per source broker, started by Set when a partition first follows that broker
// and stopped by Set when none does any more, or by Close, which waits for them.
//
// Invariants:
//   - A follower reports an offset to its leader (its fetch offset) only once everything below
//     it is durable when the log's policy is durable: the fetch offset is the fdatasync'd end of
//     the log, and a log end not yet durable is made durable before the Fetch (settle). So the
//     leader's high watermark means "on disk on every in-sync replica", acks=all means fsynced
//     there, and no acknowledged record rests on bytes a follower never synced.
//   - A partition whose log dir failed (a failed write or fdatasync, sticky) leaves the fetchers
//     at once, as Kafka's failed partitions do: it is neither fetched (the next Fetch of the
//     session forgets it) nor appended to nor truncated again, before the broker's report of
//     the offline dir reaches the controller. Set does not bring it back under the same leader
//     and epoch.
//   - Before fetching for a new leader or leader epoch a follower truncates any divergent tail
//     with OffsetForLeaderEpoch, in rounds (KIP-101/KIP-279): it asks where its latest epoch
//     ends on the leader; when the leader's answer names an epoch the follower does not hold, it
//     truncates to where its own largest epoch below that one ends and asks again about that
//     epoch, until the leader's answer names an epoch it holds, then keeps what lies below both
//     ends. After the check every offset it keeps holds the leader's record (no two values at
//     one offset). With no epoch in its cache it keeps only what its high watermark covers. A
//     fetched batch that straddles the log end (the logs' batches differ there) starts the
//     check again. weir's follower does not send Fetch v12's LastFetchedEpoch, so leaders
//     never answer with a DivergingEpoch: OffsetForLeaderEpoch is the one truncation path.
//   - A follower whose log ends before the leader's log start empties its log and fetches from
//     the leader's log start (Kafka's truncateFullyAndStartAt). Until the leader has a batch
//     there to copy, the emptied log keeps its old offsets; the fetch offset is the leader's log
//     start.
//   - When Fetchers.Set returns, no partition it dropped is written to any more (the partition
//     lock is held across each write): a broker that becomes leader never races its old fetcher.
//   - Only whole batches are appended (a response cut inside a batch loses the cut part, which
//     is fetched again); batches keep the leader's offsets and leader epochs (AppendStored).
package replication

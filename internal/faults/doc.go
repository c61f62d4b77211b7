// Package faults runs fault runs against a weir cluster (or, for comparison, an Apache Kafka
// cluster: RunConfig.Broker), after Jepsen's Kafka test: client workloads record every
// operation in a history (internal/faults/history) while a nemesis injects faults; then
// everything is healed, every partition is read to its end, and a checker judges the history.
//
// # A run
//
// Run (RunConfig -> Report):
//  1. Starts RunConfig.Nodes (3) `weir serve` processes with internal/testcluster under
//     DIR/cluster (RF 3, min.insync.replicas 2, internal topics of 3 partitions), each node's
//     output in DIR/cluster/node-i/weir.log; creates the workload's topic and waits until
//     every partition has its 3 replicas in the ISR.
//  2. Runs the workload and the nemesis for TimeLimit.
//  3. Heals: the nemesis ends the fault under way, then SIGCONTs every node, restarts every node
//     that is down and heals the network ("heal all"); the workload clients finish the ops they
//     have in flight (each bounded by 15 s) and stop.
//  4. Waits (HealTimeout) until every node is ready (/readyz) and every partition of the workload
//     topic, __consumer_offsets and __transaction_state has a leader and its whole replica set in
//     its ISR. Failing that is Report.HealError; the run goes on.
//  5. The final read: one process reads every partition of the topic from its start to its high
//     watermark (a final-read op around poll ops; the invoke's mops are the end offsets), under
//     read_uncommitted, and for the txn workload once more under read_committed.
//  6. Checks the history (RunConfig.Check; the Kafka-semantics checker of internal/faults/checker by default) and writes the files below.
//
// The error of Run is for a run that could not take place (configuration, the cluster did not
// start); everything else (faults that found no target, a node that did not come back, anomalies)
// is in the Report and the files.
//
// # Workloads
//
// Values are unique int64s of the run, sent as decimal text. Every client is a process of the
// history; one that ends an op with info (unknown outcome) continues as a new process, since
// that op may still take effect. Every loop is bounded by the run's time and by MaxOps.
//
//   - queue: Producers idempotent producers (acks=all) each send one record at a time to a
//     random partition at OpsPerSecond: a send op, ok with the offset, fail only for an error
//     that means the record was never written (definiteProduceError), info otherwise
//     (timeouts, lost connections, retries exhausted). Consumers consumers with direct
//     assignment read random subsets of the partitions, taking a new subset every 5-15 s and
//     resuming after the last record they read (an assign op, then poll ops; a position the
//     client had to move, a truncated log, is another assign op). One classic-group consumer
//     (group "faults-group", no auto-commit) polls, commits the offsets after what it polled
//     (commit ops with group, member and generation: fail for errors answered before any append,
//     such as ILLEGAL_GENERATION; info for NOT_COORDINATOR and timeouts, which may follow an
//     append) and reads the committed offsets back every 2 s (fetch-offsets ops). Its new
//     assignments are assign ops; a poll during which the group rebalanced ends info.
//   - txn: Producers transactional producers each run transactions that send one record to
//     each of 2 or 3 partitions, then commit (70 %) or abort: a txn op, ok = committed,
//     fail = aborted, info = the commit's outcome was not confirmed (the client is then
//     replaced: its InitProducerId fences the old epoch). Consumers read_committed consumers
//     with direct assignment, as in queue.
//
// # Nemeses
//
// One fault at a time, scheduled by a seeded scheduler: rounds in which each family comes once
// in a random order, each fault after a random gap (FaultGap) and held a random time
// (FaultHold); a fault's targets are chosen at injection (metadata: the partition's leader,
// the active controller as Metadata reports it, the group's coordinator). Each fault is a
// nemesis op of process 0: invoke when it starts, ok when it is healed (info when healing went
// wrong or it found no target), Value saying what and Node whom.
//
//   - pause: SIGSTOP a partition leader, the active controller or the group coordinator, SIGCONT
//     after the hold.
//   - kill: SIGKILL a partition leader or the active controller; restart it after the hold.
//   - partition (needs RunConfig.Network): isolate a leader, isolate the controller, a
//     minority/majority split, a bridge (two halves that both reach one node), a one-way loss,
//     a flapping split (split and healed alternately every 5-15 s during the hold). Without a
//     Network the family is reported unavailable.
//   - membership: a preferred leader election of the topic; a reassignment that rotates one
//     partition's replica list (a new preferred leader, same replica set: RF stays 3),
//     waited for, then a preferred election.
//   - disk, clock: through the fault control of a -tags faults weir build (nemesis_disk.go,
//     nemesis_clock.go); reported unavailable (Report.Unavailable) for a binary without it and
//     for Kafka.
//
// # Apache Kafka
//
// With RunConfig.Broker BrokerKafka the same run (workloads, nemeses, heal, final read, check)
// goes against 3 Apache Kafka 4.x nodes in KRaft combined mode, one JVM each from the jars in
// RunConfig.KafkaLibs, with the same ports, hosts and network namespaces as weir's nodes and
// the same settings (RF 3, min.insync.replicas 2, 3 partitions for the internal topics,
// group.initial.rebalance.delay.ms 0, replica.lag.time.max.ms 10000); everything else is
// Kafka's default (no fsync per record). Storage is formatted before the first start with a
// static voter set. A node is ready when its Metadata lists every node and names a controller
// (instead of /readyz); the active controller is the metadata quorum's leader (DescribeQuorum).
// Report.Broker says which broker ran; kafkacluster.go has the details.
//
// # Files (in RunConfig.Dir)
//
//	history.jsonl   the history, one op a line (internal/faults/history)
//	verdict.json    {valid, summary, verdict}: the check's result
//	report.json     the Report (ops by function, faults, max unavailability, heal and read errors)
//	cluster/node-i  node i's log dir and weir.log (a Kafka node's: server.properties, data/, and
//	                its output in weir.log)
//
// # Goroutines
//
// During a run: one per producer, one per consumer, one for the group consumer (franz-go's own
// goroutines under each client), one nemesis goroutine, and testcluster's wait goroutine per
// node process (for Kafka, briefly, one formatting JVM per node before the start). The history
// writer and the recorder are shared and safe for concurrent use; everything else belongs to
// one goroutine. Run returns after every goroutine it started has
// ended and every node has been stopped (SIGTERM, then SIGKILL after 10 s). Nodes run with
// Pdeathsig SIGKILL in their own process group, so they do not outlive the runner.
package faults

// Package checker checks a fault run's history (internal/faults/history) against Kafka's
// semantics, after Jepsen's Kafka workload checker (jepsen.tests.kafka). Check reads the
// history once into indexes keyed by partition and value, then runs each analysis below; its
// time and memory are linear in the number of mops (plus sorting each partition's log). It is
// a pure function: safe for concurrent use, no goroutines.
//
// # Reading the history
//
// Lines are in index order. A completion pairs with its process's pending invocation of the
// same function; an invocation never completed is an info op (and is counted as info). An
// op's mops are its completion's, or its invocation's when the completion carries none. Values
// are non-zero: a send or txn mop with Value 0 is an offset a consume-transform-produce txn
// commits, not a record. A value is identified by (topic, partition, value).
//
// Known offsets: the offset of every record returned by an ok poll, of every ok send's mops,
// and of every txn's mops that carry one (whatever the txn's outcome: an aborted txn's records
// still occupy their offsets). Each partition's log is its known (offset, value) pairs in offset
// order.
//
// A txn is committed when it completed ok, or completed info and a read_committed poll returned
// one of its values. A value is acknowledged when its send completed ok or its txn committed.
// A value is visible to read_committed when a read_committed poll returned it, or it was sent
// outside a txn by a send that did not fail, or its txn committed.
//
// # Anomalies
//
// Each kind is counted once per case, with up to 20 examples naming the history indexes of the
// ops involved. Kinds marked (info) are reported but do not make Result.Valid false.
//
//   - lost-write: an acknowledged value no ok poll returned, although a poll returned a higher
//     offset of its partition; or, when the history has an ok final-read, an acknowledged value no
//     poll returned whose ack completed before the final read began (an ok final-read asserts that
//     its polls read every partition to its end). Send ops that are info are never lost.
//   - unseen (info): an acknowledged value no poll returned, beyond the highest offset read in its
//     partition. With an ok final read every unseen value is also lost.
//   - duplicate: a value at two or more offsets of its partition; counted per value. A safety
//     anomaly only with Options.Idempotent (otherwise retries legitimately duplicate).
//   - inconsistent-offsets: two or more values at one (topic, partition, offset), from send acks
//     and polls together; counted per offset.
//   - nonmonotonic-send: a send or txn op's completion acknowledges a record at an offset not
//     above the offset of a record of the same partition acknowledged (to any op, whatever the
//     txn's outcome) before this op was invoked: records appended later must get higher offsets.
//     Counted per op.
//   - nonmonotonic-poll: a process's ok polls return, for one partition, an offset not above the
//     one it returned before (within a poll or across polls) since its last ok assign. An ok
//     assign sets each listed partition's position to the assigned offset (-1: unknown, no check
//     until the next read); an info assign or info poll forgets the process's positions (records
//     may have been consumed unseen); failed polls change nothing.
//   - skipped-poll: a process's ok poll returns offset o of a partition after offset l (its
//     previous read, or the assigned offset minus one), and some known record lies strictly
//     between l and o that the consumer had to return: any known record under read_uncommitted;
//     under read_committed only records visible to read_committed (aborted records and control
//     records leave gaps legitimately).
//   - aborted-read: an ok poll returned a value whose send failed, or a read_committed poll
//     returned a value whose txn failed (aborted). read_uncommitted polls may return aborted txn
//     records.
//   - uncommitted-read (info): a read_committed poll returned a value of a txn that completed
//     info. The txn most likely committed (that read is the evidence used above); a weak signal.
//   - phantom-read: an ok poll returned a value no send or txn op sent.
//   - G1c: a cycle in the happens-before graph of transactional writes and the polls that read
//     them (below); counted per strongly connected component. The example is a shortest cycle
//     through the component, step by step.
//   - committed-offset-regression: an ok fetch-offsets returned, for (group, topic, partition),
//     an offset below the highest offset of an ok commit (or of an ok txn's offset commit, with
//     the txn's Group) that completed before the fetch-offsets was invoked. A fetched offset of -1
//     (none committed) is below every commit.
//   - fenced-commit-accepted: an ok commit with Generation g > 0 for a group, invoked after an ok
//     assign of that group with Generation above g completed: a member of an older generation
//     committed after the group had moved on. Generations are compared group-wide, as the classic
//     protocol's generation is; a KIP-848 runner must record the group epoch.
//   - share-redelivered-after-accept: for (group, topic, partition, offset), an ok share-deliver
//     of a record after an ok share-ack accepted it: the delivery was invoked after the accept
//     completed, or, concurrent with it, carried a delivery count above the one the accepting
//     process last received for the record.
//   - share-delivery-count-exceeded: an ok share-deliver with a DeliveryCount above
//     Options.MaxDeliveryCount (0: 5, Kafka's default group.share.delivery.count.limit).
//
// # The happens-before graph (G1c)
//
// Jepsen builds ww, wr and rw edges between txns and looks for cycles. In Kafka, neither ww
// (offset order of two txns' records) nor rw (a poll did not see a later record) orders
// transactions: concurrent txns interleave their records in a partition, and a poll is not a
// snapshot across partitions (it may lag on one partition and lead on another, or return a
// prefix of a txn's records). A cycle of such edges is legal, so this checker draws no ww or rw
// edges between ops. Instead it orders events that must happen in order in any correct run:
//
//   - each committed txn T has an invoke event (its invoke line), a record event per value of
//     T with a known offset, a commit event, and, if T completed ok, a completion event (its
//     line): invoke -> each record -> commit -> completion. An info txn's commit is not bounded
//     by its completion line (it may take effect later).
//   - log order: consecutive records of committed txns in a partition's log, lower offset ->
//     higher offset (offsets are assigned in append order).
//   - reads: an ok poll P's completion event follows each record it returned (read_uncommitted)
//     or the commit of each txn whose record it returned (read_committed: the last stable offset
//     passes a record only once its txn is complete).
//   - real time: these lines (txn invocations and completions, and completions of polls that read
//     txn records) in history order.
//
// A cycle is then a contradiction between real time, the log and what was read: for example a
// txn whose record sits below the record of a txn that committed before it began, a poll that
// returned a record before its txn started, or two consume-transform-produce processes each
// reading the other's txn before running its own (T1 -wr-> P2 -process-> T2 -wr-> P1 -process->
// T1). Strongly connected components are found with Tarjan's algorithm, without recursion.
//
// # Counts and unavailability (not anomalies)
//
// Result.Ops counts completed ops by function and outcome. Each nemesis op is a fault window,
// from its invocation to its completion (or the end of the history); Result.FaultCounts counts
// them by the first word of their Value. For each window, and for the whole run (first line to
// the final read's invocation, or the last line), the unavailability is the longest interval in
// which no send or txn op completed ok.
package checker

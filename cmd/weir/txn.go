package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

const txnUsage = `usage: weir txn <list|describe|abort> [flags]

  weir txn list [--state Ongoing,PrepareCommit,...] [--producer-id N[,N...]]
      every transactional id the coordinators know: id, coordinator, producer id, state
  weir txn describe TXN_ID [TXN_ID ...]
      state, producer id and epoch, timeout, start time, time open and the partitions in the transaction
  weir txn abort --topic T --partition P --start-offset O
  weir txn abort --topic T --partition P --producer-id N --producer-epoch E --coordinator-epoch C
      writes an ABORT marker on one partition for a hanging transaction (one the coordinator
      no longer tracks, holding the last stable offset back), as kafka-transactions.sh abort:
      with --start-offset the producer is the partition's open transaction starting at O
      (DescribeProducers); the marker goes to the partition's leader (WriteTxnMarkers, which
      needs CLUSTER_ACTION on the cluster)

Every subcommand takes --bootstrap host:port[,host:port] (default 127.0.0.1:9092).
`

// txnCmd runs `weir txn ...` (Kafka's kafka-transactions.sh list, describe and abort),
// writing its results to stdout.
func txnCmd(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New(strings.TrimSpace(txnUsage))
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("txn "+sub, flag.ContinueOnError)
	var cf clientFlags
	cf.register(fs)
	states := fs.String("state", "", "list: only transactions in these states (comma-separated: Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, PrepareEpochFence, Dead)")
	pids := fs.String("producer-id", "", "list: only these producer ids (comma-separated); abort: the producer whose transaction to abort")
	topic := fs.String("topic", "", "abort: the topic of the partition holding the hanging transaction")
	partition := fs.Int("partition", -1, "abort: the partition holding the hanging transaction")
	startOffset := fs.Int64("start-offset", -1, "abort: the first offset of the hanging transaction (finds producer and epochs with DescribeProducers)")
	producerEpoch := fs.Int("producer-epoch", -1, "abort: the producer epoch of the hanging transaction")
	coordinatorEpoch := fs.Int("coordinator-epoch", -1, "abort: the coordinator epoch of the hanging transaction")
	switch sub {
	case "list", "describe", "abort":
	case "-h", "--help", "help":
		fmt.Fprint(stdout, txnUsage)
		return nil
	default:
		return fmt.Errorf("unknown txn subcommand %q\n%s", sub, txnUsage)
	}
	names, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	var spec abortSpec
	switch sub {
	case "list":
		if len(names) > 0 {
			return fmt.Errorf("txn list: unexpected arguments %q", names)
		}
	case "describe":
		if len(names) == 0 {
			return errors.New("txn describe: name at least one transactional id")
		}
	case "abort":
		if len(names) > 0 {
			return fmt.Errorf("txn abort: unexpected arguments %q", names)
		}
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		spec, err = parseAbortSpec(set, *topic, *partition, *startOffset, *pids, *producerEpoch, *coordinatorEpoch)
		if err != nil {
			return err
		}
	}
	var pidFilter []int64
	if sub == "list" {
		if pidFilter, err = parseProducerIDs(*pids); err != nil {
			return err
		}
	}
	cl, err := cf.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	switch sub {
	case "list":
		return txnList(ctx, adm, splitList(*states), pidFilter, stdout)
	case "describe":
		return txnDescribe(ctx, adm, names, stdout)
	default:
		return txnAbort(ctx, adm, spec, stdout)
	}
}

// splitList splits a comma-separated flag value, dropping empty elements.
func splitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// maxProducerIDFilters bounds --producer-id on list (the request carries them all).
const maxProducerIDFilters = 1000

func parseProducerIDs(s string) ([]int64, error) {
	elems := splitList(s)
	if len(elems) > maxProducerIDFilters {
		return nil, fmt.Errorf("--producer-id: at most %d ids", maxProducerIDFilters)
	}
	var ids []int64
	for _, e := range elems {
		id, err := strconv.ParseInt(e, 10, 64)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("--producer-id: %q is not a producer id", e)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

func txnList(ctx context.Context, adm *kadm.Client, states []string, pids []int64, stdout io.Writer) error {
	listed, err := adm.ListTransactions(ctx, pids, states)
	// A *ShardErrors still carries the answers of the brokers that did answer: print them,
	// then report the others.
	if err != nil && len(listed) == 0 {
		return fmt.Errorf("list transactions: %w", err)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TRANSACTIONAL-ID\tCOORDINATOR\tPRODUCER-ID\tSTATE")
	for _, l := range listed.Sorted() {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", l.TxnID, l.Coordinator, l.ProducerID, l.State)
	}
	if ferr := tw.Flush(); ferr != nil {
		return ferr
	}
	if err != nil {
		return fmt.Errorf("list transactions (some brokers did not answer): %w", err)
	}
	return nil
}

func txnDescribe(ctx context.Context, adm *kadm.Client, ids []string, stdout io.Writer) error {
	described, err := adm.DescribeTransactions(ctx, ids...)
	if err != nil && len(described) == 0 {
		return fmt.Errorf("describe transactions: %w", err)
	}
	var errs []error
	if err != nil {
		errs = append(errs, fmt.Errorf("describe transactions: %w", err))
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TRANSACTIONAL-ID\tCOORDINATOR\tSTATE\tPRODUCER-ID\tPRODUCER-EPOCH\tTIMEOUT-MS\tSTART-TIME\tOPEN-FOR\tPARTITIONS")
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		d, ok := described[id]
		if !ok {
			if err == nil {
				errs = append(errs, fmt.Errorf("transactional id %s: no answer", id))
			}
			continue
		}
		if d.Err != nil {
			errs = append(errs, fmt.Errorf("transactional id %s: %w", id, d.Err))
			continue
		}
		// Kafka's describe prints the start time and how long the transaction has been open
		// ("None" when no transaction is open: start timestamp -1); the time here is UTC.
		start, dur := "-", "-"
		if d.StartTimestamp >= 0 {
			st := time.UnixMilli(d.StartTimestamp)
			start = st.UTC().Format(time.RFC3339Nano)
			dur = time.Since(st).Round(time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n", d.TxnID, d.Coordinator, d.State, d.ProducerID,
			d.ProducerEpoch, d.TimeoutMillis, start, dur, partitionsString(d.Topics))
	}
	if ferr := tw.Flush(); ferr != nil {
		return ferr
	}
	return errors.Join(errs...)
}

// partitionsString renders a topic set as t-0,t-1,u-3 (Kafka's TopicPartition form), sorted.
func partitionsString(ts kadm.TopicsSet) string {
	var parts []string
	for _, tp := range ts.Sorted() {
		ps := append([]int32{}, tp.Partitions...)
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		for _, p := range ps {
			parts = append(parts, tp.Topic+"-"+strconv.Itoa(int(p)))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}

// abortSpec is the partition and, unless startOffset >= 0, the producer of a hanging
// transaction to abort.
type abortSpec struct {
	topic            string
	partition        int32
	startOffset      int64
	producerID       int64
	producerEpoch    int16
	coordinatorEpoch int32
}

// parseAbortSpec checks abort's flags (set: the names of the flags given) as Kafka's
// TransactionsCommand does: the partition, and either --start-offset or all of --producer-id,
// --producer-epoch and --coordinator-epoch. A negative coordinator epoch (what DescribeProducers
// shows for a producer whose transaction hung before its first marker) is sent as 0, as Kafka
// does. Unlike Kafka, which then ignores the producer flags, giving both forms is an error.
func parseAbortSpec(set map[string]bool, topic string, partition int, startOffset int64, pid string, producerEpoch, coordinatorEpoch int) (abortSpec, error) {
	if topic == "" || partition < 0 || partition > 1<<31-1 {
		return abortSpec{}, errors.New("txn abort: needs --topic and --partition (>= 0)")
	}
	s := abortSpec{topic: topic, partition: int32(partition), startOffset: -1}
	explicit := set["producer-id"] || set["producer-epoch"] || set["coordinator-epoch"]
	switch {
	case set["start-offset"] && explicit:
		return abortSpec{}, errors.New("txn abort: give either --start-offset or --producer-id/--producer-epoch/--coordinator-epoch, not both")
	case set["start-offset"]:
		if startOffset < 0 {
			return abortSpec{}, fmt.Errorf("txn abort: --start-offset %d is negative", startOffset)
		}
		s.startOffset = startOffset
		return s, nil
	case !set["producer-id"] || !set["producer-epoch"] || !set["coordinator-epoch"]:
		return abortSpec{}, errors.New("txn abort: needs --start-offset, or all of --producer-id, --producer-epoch and --coordinator-epoch")
	}
	id, err := strconv.ParseInt(pid, 10, 64)
	if err != nil || id < 0 {
		return abortSpec{}, fmt.Errorf("txn abort: --producer-id %q is not a producer id", pid)
	}
	if producerEpoch < 0 || producerEpoch > 1<<15-1 {
		return abortSpec{}, fmt.Errorf("txn abort: --producer-epoch %d is not in [0, %d]", producerEpoch, 1<<15-1)
	}
	if coordinatorEpoch > 1<<31-1 {
		return abortSpec{}, fmt.Errorf("txn abort: --coordinator-epoch %d is above %d", coordinatorEpoch, 1<<31-1)
	}
	s.producerID, s.producerEpoch, s.coordinatorEpoch = id, int16(producerEpoch), int32(max(coordinatorEpoch, 0))
	return s, nil
}

// txnAbort writes an ABORT marker for a hanging transaction on one partition. With a start
// offset the producer, its epoch and the coordinator epoch come from DescribeProducers on the
// partition: the active producer whose current transaction starts at that offset (none: an
// error, as Kafka's "Could not find any open transactions starting at offset"); a coordinator
// epoch the partition does not know (-1) is sent as 0, as Kafka does.
func txnAbort(ctx context.Context, adm *kadm.Client, s abortSpec, stdout io.Writer) error {
	tp := fmt.Sprintf("%s-%d", s.topic, s.partition)
	if s.startOffset >= 0 {
		set := kadm.TopicsSet{}
		set.Add(s.topic, s.partition)
		described, err := adm.DescribeProducers(ctx, set)
		if err != nil {
			return fmt.Errorf("txn abort: describe producers of %s: %w", tp, err)
		}
		dp, ok := described[s.topic].Partitions[s.partition]
		if !ok {
			return fmt.Errorf("txn abort: describe producers of %s: no answer", tp)
		}
		if dp.Err != nil {
			return fmt.Errorf("txn abort: describe producers of %s: %w", tp, dp.Err)
		}
		found := false
		for _, p := range dp.ActiveProducers.Sorted() {
			if p.CurrentTxnStartOffset == s.startOffset {
				s.producerID, s.producerEpoch, s.coordinatorEpoch = p.ProducerID, p.ProducerEpoch, max(p.CoordinatorEpoch, 0)
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("txn abort: no open transaction starts at offset %d on %s", s.startOffset, tp)
		}
	}
	set := kadm.TopicsSet{}
	set.Add(s.topic, s.partition)
	resp, err := adm.WriteTxnMarkers(ctx, kadm.TxnMarkers{
		ProducerID:       s.producerID,
		ProducerEpoch:    s.producerEpoch,
		Commit:           false,
		CoordinatorEpoch: s.coordinatorEpoch,
		Topics:           set,
	})
	if err != nil {
		return fmt.Errorf("txn abort on %s: %w", tp, err)
	}
	written := false
	var errs []error
	resp.EachPartition(func(p kadm.TxnMarkersPartitionResponse) {
		if p.Err != nil {
			errs = append(errs, fmt.Errorf("txn abort on %s-%d: %w", p.Topic, p.Partition, p.Err))
		} else if p.Topic == s.topic && p.Partition == s.partition {
			written = true
		}
	})
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if !written {
		return fmt.Errorf("txn abort on %s: no answer from the partition's leader", tp)
	}
	fmt.Fprintf(stdout, "aborted the transaction of producer %d (epoch %d, coordinator epoch %d) on %s\n",
		s.producerID, s.producerEpoch, s.coordinatorEpoch, tp)
	return nil
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
)

// lagRow is one partition of a group's offsets table.
type lagRow struct {
	Topic     string
	Partition int32
	Committed int64 // -1: none
	End       int64 // -1: unknown
	Member    string
}

// consumerGroupDescribe prints a KIP-848 consumer group: ConsumerGroupDescribe (key 69) for
// the members and their current and target assignments, OffsetFetch and ListOffsets for lag.
func consumerGroupDescribe(ctx context.Context, adm *kadm.Client, name string, stdout io.Writer) error {
	described, err := adm.DescribeConsumerGroups(ctx, name)
	g, ok := described[name]
	switch {
	case !ok && err != nil:
		return fmt.Errorf("group %s: %w", name, err)
	case !ok:
		return fmt.Errorf("group %s: no answer", name)
	case g.Err != nil:
		return fmt.Errorf("group %s: %w", name, g.Err)
	}
	commits, err := adm.FetchOffsets(ctx, name)
	if err != nil {
		return fmt.Errorf("group %s: offsets: %w", name, err)
	}
	topics := g.AssignedPartitions()
	topics.Merge(commits.Partitions())
	var ends kadm.ListedOffsets
	if ts := topics.Topics(); len(ts) > 0 {
		if ends, err = adm.ListEndOffsets(ctx, ts...); err != nil {
			return fmt.Errorf("group %s: end offsets: %w", name, err)
		}
	}
	return writeConsumerGroup(stdout, g, consumerLagRows(g, commits, ends))
}

// consumerLagRows joins a consumer group's assignment, its committed offsets and the log end
// offsets: one row per partition assigned or committed, sorted by topic and partition.
func consumerLagRows(g kadm.DescribedConsumerGroup, commits kadm.OffsetResponses, ends kadm.ListedOffsets) []lagRow {
	owner := map[string]map[int32]string{}
	for _, m := range g.Members {
		m.Assignment.Each(func(t string, p int32) {
			if owner[t] == nil {
				owner[t] = map[int32]string{}
			}
			owner[t][p] = m.MemberID
		})
	}
	all := g.AssignedPartitions()
	all.Merge(commits.Partitions())
	var rows []lagRow
	for _, tp := range all.Sorted() {
		for _, p := range tp.Partitions {
			r := lagRow{Topic: tp.Topic, Partition: p, Committed: -1, End: -1, Member: owner[tp.Topic][p]}
			if c, ok := commits.Lookup(tp.Topic, p); ok && c.Err == nil {
				r.Committed = c.At
			}
			if e, ok := ends.Lookup(tp.Topic, p); ok && e.Err == nil {
				r.End = e.Offset
			}
			rows = append(rows, r)
		}
	}
	return rows
}

// writeConsumerGroup renders a described consumer group and its offsets table.
func writeConsumerGroup(w io.Writer, g kadm.DescribedConsumerGroup, rows []lagRow) error {
	fmt.Fprintf(w, "group %s: type consumer, state %s, group epoch %d, assignment epoch %d, assignor %s, %d members, coordinator %d (%s:%d)\n",
		g.Group, g.State, g.Epoch, g.AssignmentEpoch, dash(g.AssignorName), len(g.Members), g.Coordinator.NodeID, g.Coordinator.Host, g.Coordinator.Port)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(g.Members) > 0 {
		fmt.Fprintln(tw, "MEMBER\tINSTANCE\tCLIENT\tHOST\tPROTOCOL\tEPOCH\tSUBSCRIBED\tASSIGNED\tTARGET")
		for _, m := range g.Members {
			inst := "-"
			if m.InstanceID != nil {
				inst = *m.InstanceID
			}
			sub := strings.Join(m.SubscribedTopics, ",")
			if m.SubscribedTopicRegex != nil && *m.SubscribedTopicRegex != "" {
				sub = "regex:" + *m.SubscribedTopicRegex
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", m.MemberID, inst, m.ClientID, m.ClientHost,
				memberProtocol(m.MemberType), m.MemberEpoch, dash(sub), topicsSetString(m.Assignment), topicsSetString(m.TargetAssignment))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return writeLagTable(w, rows)
}

// memberProtocol names a consumer group member's protocol (ConsumerGroupDescribe v1
// MemberType): classic for one that joined with JoinGroup, consumer for KIP-848.
func memberProtocol(t int8) string {
	switch t {
	case 0:
		return "classic"
	case 1:
		return "consumer"
	default:
		return "-"
	}
}

// writeLagTable prints the offsets table and the total lag (partitions with no commit or no
// end offset count nothing and show "-").
func writeLagTable(w io.Writer, rows []lagRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tMEMBER")
	var total int64
	for _, r := range rows {
		cur, end, lag := "-", "-", "-"
		if r.Committed >= 0 {
			cur = strconv.FormatInt(r.Committed, 10)
		}
		if r.End >= 0 {
			end = strconv.FormatInt(r.End, 10)
		}
		if r.Committed >= 0 && r.End >= 0 {
			l := max(r.End-r.Committed, 0)
			total += l
			lag = strconv.FormatInt(l, 10)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", r.Topic, r.Partition, cur, end, lag, dash(r.Member))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "total lag %d\n", total)
	return err
}

// topicsSetString renders partitions as topic:p,p topic:p (topics and partitions ascending),
// "-" for none.
func topicsSetString(s kadm.TopicsSet) string {
	var parts []string
	for _, tp := range s.Sorted() {
		if len(tp.Partitions) == 0 {
			continue
		}
		ps := append([]int32(nil), tp.Partitions...)
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		strs := make([]string, len(ps))
		for i, p := range ps {
			strs[i] = strconv.Itoa(int(p))
		}
		parts = append(parts, tp.Topic+":"+strings.Join(strs, ","))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// parseTopicPartitions parses T or T:P,P,... (no partitions: every partition).
func parseTopicPartitions(spec string) (string, []int32, error) {
	topic, list, hasList := strings.Cut(spec, ":")
	if topic == "" {
		return "", nil, fmt.Errorf("--topic %q: no topic name", spec)
	}
	if !hasList {
		return topic, nil, nil
	}
	var ps []int32
	for _, s := range strings.Split(list, ",") {
		p, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
		if err != nil || p < 0 {
			return "", nil, fmt.Errorf("--topic %s: bad partition %q", spec, s)
		}
		ps = append(ps, int32(p))
	}
	if len(ps) == 0 {
		return "", nil, errors.New("--topic " + spec + ": no partitions after ':'")
	}
	return topic, ps, nil
}

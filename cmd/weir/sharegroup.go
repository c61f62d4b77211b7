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

const shareGroupUsage = `usage: weir share-group <list|describe|reset-offsets|delete-offsets|delete> [flags]

Share groups (KIP-932): members share partitions; each share-partition has a start offset below
which records are done, and in-flight records above it.

  weir share-group list [--state Stable,Empty,...]
  weir share-group describe GROUP [GROUP ...]
      the group (state, epochs, assignor), its members (client, host, epoch, subscription,
      assignment) and, per share-partition, the start offset, leader epoch and lag
  weir share-group reset-offsets GROUP (--topic T[:P,P...] ... | --all-topics)
        (--to-earliest | --to-latest | --to-offset N | --to-datetime YYYY-MM-DDTHH:mm:SS.sss) [--execute]
      prints the plan (the new start offsets); --execute applies it (AlterShareGroupOffsets;
      the group must have no members). --to-datetime takes local time unless the value ends
      with Z or an offset (+02:00); --to-offset is clamped to the partition's log
  weir share-group delete-offsets GROUP --topic T [--topic T ...]
      forgets the share-partition state of those topics (DeleteShareGroupOffsets; the group
      must have no members)
  weir share-group delete GROUP [GROUP ...]
      only groups with no members can be deleted; their share-partition state goes too

Every subcommand takes --bootstrap host:port[,host:port] (default 127.0.0.1:9092).
`

// shareResetSpec is the target of a share group offset reset: exactly one of the four.
type shareResetSpec struct {
	earliest, latest bool
	offset           int64 // >= 0 when set
	datetime         *time.Time
}

// shareGroupCmd runs `weir share-group ...`, writing its results to stdout.
func shareGroupCmd(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New(strings.TrimSpace(shareGroupUsage))
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("share-group "+sub, flag.ContinueOnError)
	var cf clientFlags
	cf.register(fs)
	states := fs.String("state", "", "list: only groups in these states (comma-separated)")
	var topics nameFlag
	fs.Var(&topics, "topic", "reset-offsets: T or T:0,1,2; delete-offsets: a topic; repeatable")
	allTopics := fs.Bool("all-topics", false, "reset-offsets: every topic the group has share-partition state for")
	toEarliest := fs.Bool("to-earliest", false, "reset-offsets: to the log start offset")
	toLatest := fs.Bool("to-latest", false, "reset-offsets: to the log end offset")
	toOffset := fs.Int64("to-offset", -1, "reset-offsets: to this offset (clamped to the log's range)")
	toDatetime := fs.String("to-datetime", "", "reset-offsets: to the first offset at or after this time, YYYY-MM-DDTHH:mm:SS.sss")
	execute := fs.Bool("execute", false, "reset-offsets: apply the plan (without it, only print it)")
	dryRun := fs.Bool("dry-run", false, "reset-offsets: only print the plan (the default)")
	switch sub {
	case "list", "describe", "reset-offsets", "delete-offsets", "delete":
	case "-h", "--help", "help":
		fmt.Fprint(stdout, shareGroupUsage)
		return nil
	default:
		return fmt.Errorf("unknown share-group subcommand %q\n%s", sub, shareGroupUsage)
	}
	names, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	// Validate before connecting.
	var spec shareResetSpec
	switch sub {
	case "describe", "delete":
		if len(names) == 0 {
			return fmt.Errorf("share-group %s: name at least one group", sub)
		}
	case "delete-offsets":
		if len(names) != 1 {
			return errors.New("share-group delete-offsets: name exactly one group")
		}
		if len(topics) == 0 {
			return errors.New("share-group delete-offsets: needs --topic")
		}
	case "reset-offsets":
		if spec, err = parseShareResetFlags(names, topics, *allTopics, *toEarliest, *toLatest, *toOffset, *toDatetime, *execute, *dryRun); err != nil {
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
		groups, err := adm.ListGroupsByType(ctx, []string{"share"}, splitList(*states)...)
		if err != nil {
			return err
		}
		return writeGroupList(stdout, groups.Sorted())
	case "describe":
		return shareGroupDescribe(ctx, adm, names, stdout)
	case "delete":
		return groupDelete(ctx, adm, names, stdout)
	case "delete-offsets":
		var ts []string
		for _, t := range topics {
			ts = append(ts, splitList(t)...)
		}
		return shareGroupDeleteOffsets(ctx, adm, names[0], ts, stdout)
	default:
		return shareGroupResetOffsets(ctx, adm, names[0], topics, *allTopics, spec, *execute, stdout)
	}
}

// parseShareResetFlags checks reset-offsets' flags as Kafka's kafka-share-groups does: one
// group, --topic or --all-topics, exactly one target, not both --execute and --dry-run.
func parseShareResetFlags(names, topics []string, allTopics, earliest, latest bool, offset int64, datetime string, execute, dryRun bool) (shareResetSpec, error) {
	spec := shareResetSpec{earliest: earliest, latest: latest, offset: offset}
	if len(names) != 1 {
		return spec, errors.New("share-group reset-offsets: name exactly one group")
	}
	if (len(topics) == 0) == !allTopics {
		return spec, errors.New("share-group reset-offsets: needs --topic or --all-topics (not both)")
	}
	for _, t := range topics {
		if _, _, err := parseTopicPartitions(t); err != nil {
			return spec, err
		}
	}
	if execute && dryRun {
		return spec, errors.New("share-group reset-offsets: --execute and --dry-run exclude each other")
	}
	if datetime != "" {
		at, err := parseResetDatetime(datetime)
		if err != nil {
			return spec, err
		}
		spec.datetime = &at
	}
	n := 0
	for _, set := range []bool{earliest, latest, offset >= 0, spec.datetime != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return spec, errors.New("share-group reset-offsets: needs exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime")
	}
	return spec, nil
}

// parseResetDatetime parses Kafka's reset datetime, YYYY-MM-DDTHH:mm:SS.sss (seconds and
// milliseconds optional), in local time unless a zone (Z, +hh:mm, +hhmm) follows.
func parseResetDatetime(s string) (time.Time, error) {
	for _, layout := range []string{
		"2006-01-02T15:04:05.000Z07:00", "2006-01-02T15:04:05.000Z0700", "2006-01-02T15:04:05Z07:00",
		"2006-01-02T15:04:05Z0700", "2006-01-02T15:04Z07:00",
	} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	for _, layout := range []string{"2006-01-02T15:04:05.000", "2006-01-02T15:04:05", "2006-01-02T15:04"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("--to-datetime %q: want YYYY-MM-DDTHH:mm:SS.sss (optionally with Z or +hh:mm)", s)
}

// shareResetTarget is the new start offset of one partition: start and end are the log's
// start and end offsets, atTime the first offset at or after the datetime (-1: none, the end).
func shareResetTarget(spec shareResetSpec, start, end, atTime int64) int64 {
	switch {
	case spec.earliest:
		return start
	case spec.latest:
		return end
	case spec.datetime != nil:
		if atTime < 0 {
			return end
		}
		return max(min(atTime, end), start)
	default:
		return max(min(spec.offset, end), start)
	}
}

func shareGroupDescribe(ctx context.Context, adm *kadm.Client, names []string, stdout io.Writer) error {
	described, derr := adm.DescribeShareGroups(ctx, names...)
	offsets, oerr := adm.DescribeShareGroupOffsets(ctx, names...)
	var errs []error
	for i, name := range names {
		g, ok := described[name]
		switch {
		case !ok && derr != nil:
			errs = append(errs, fmt.Errorf("share group %s: %w", name, derr))
			continue
		case !ok:
			errs = append(errs, fmt.Errorf("share group %s: no answer", name))
			continue
		case g.Err != nil:
			errs = append(errs, fmt.Errorf("share group %s: %w", name, g.Err))
			continue
		}
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		o, ok := offsets[name]
		if !ok && oerr != nil {
			errs = append(errs, fmt.Errorf("share group %s: offsets: %w", name, oerr))
		} else if o.Err != nil {
			errs = append(errs, fmt.Errorf("share group %s: offsets: %w", name, o.Err))
		}
		if err := writeShareGroup(stdout, g, o.Offsets); err != nil {
			return err
		}
	}
	return errors.Join(errs...)
}

// writeShareGroup renders a described share group and its share-partitions.
func writeShareGroup(w io.Writer, g kadm.DescribedShareGroup, offsets kadm.ShareOffsets) error {
	fmt.Fprintf(w, "share group %s: state %s, group epoch %d, assignment epoch %d, assignor %s, %d members, coordinator %d (%s:%d)\n",
		g.GroupID, g.GroupState, g.GroupEpoch, g.AssignmentEpoch, dash(g.Assignor), len(g.Members), g.Coordinator.NodeID, g.Coordinator.Host, g.Coordinator.Port)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(g.Members) > 0 {
		fmt.Fprintln(tw, "MEMBER\tCLIENT\tHOST\tEPOCH\tSUBSCRIBED\tASSIGNED")
		for _, m := range g.Members {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", m.MemberID, m.ClientID, m.ClientHost, m.MemberEpoch,
				dash(strings.Join(m.SubscribedTopicNames, ",")), topicsSetString(m.Assignment))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tSTART-OFFSET\tLEADER-EPOCH\tLAG")
	var rows []kadm.ShareOffset
	for _, ps := range offsets {
		for _, o := range ps {
			rows = append(rows, o)
		}
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Topic != rows[j].Topic {
			return rows[i].Topic < rows[j].Topic
		}
		return rows[i].Partition < rows[j].Partition
	})
	for _, o := range rows {
		start, epoch, lag := "-", "-", "-"
		if o.Err != nil {
			start = o.Err.Error()
		} else {
			if o.StartOffset >= 0 {
				start = strconv.FormatInt(o.StartOffset, 10)
			}
			if o.LeaderEpoch >= 0 {
				epoch = strconv.Itoa(int(o.LeaderEpoch))
			}
			if o.Lag >= 0 {
				lag = strconv.FormatInt(o.Lag, 10)
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", o.Topic, o.Partition, start, epoch, lag)
	}
	return tw.Flush()
}

// shareGroupResetOffsets plans new share-partition start offsets and, with execute, applies
// them with AlterShareGroupOffsets (key 91).
func shareGroupResetOffsets(ctx context.Context, adm *kadm.Client, group string, topicSpecs []string, allTopics bool, spec shareResetSpec, execute bool, stdout io.Writer) error {
	want := map[string][]int32{} // topic -> partitions (nil: all)
	current := map[string]map[int32]int64{}
	described, err := adm.DescribeShareGroupOffsets(ctx, group)
	if d, ok := described[group]; ok && d.Err == nil {
		for t, ps := range d.Offsets {
			for p, o := range ps {
				if o.Err == nil {
					if current[t] == nil {
						current[t] = map[int32]int64{}
					}
					current[t][p] = o.StartOffset
				}
			}
		}
	} else if allTopics {
		if err == nil && ok {
			err = d.Err
		}
		return fmt.Errorf("share group %s: offsets: %w", group, err)
	}
	if allTopics {
		for t, ps := range current {
			for p := range ps {
				want[t] = append(want[t], p)
			}
		}
		if len(want) == 0 {
			return fmt.Errorf("share group %s has no share-partition state: name topics with --topic", group)
		}
	}
	for _, s := range topicSpecs {
		t, ps, _ := parseTopicPartitions(s)
		if ps == nil {
			want[t] = nil
		} else if _, all := want[t]; !all || want[t] != nil {
			want[t] = append(want[t], ps...)
		}
	}
	var topics []string
	for t := range want {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return err
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return err
	}
	if err := ends.Error(); err != nil {
		return err
	}
	var byTime kadm.ListedOffsets
	if spec.datetime != nil {
		if byTime, err = adm.ListOffsetsAfterMilli(ctx, spec.datetime.UnixMilli(), topics...); err != nil {
			return err
		}
	}
	plan := kadm.Offsets{}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tTOPIC\tPARTITION\tCURRENT-START-OFFSET\tNEW-START-OFFSET")
	n := 0
	for _, t := range topics {
		ps := want[t]
		if ps == nil {
			ends.Each(func(o kadm.ListedOffset) {
				if o.Topic == t {
					ps = append(ps, o.Partition)
				}
			})
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		for i, p := range ps {
			if i > 0 && ps[i-1] == p {
				continue
			}
			end, ok := ends.Lookup(t, p)
			if !ok {
				return fmt.Errorf("topic %s has no partition %d", t, p)
			}
			start, _ := starts.Lookup(t, p)
			at := int64(-1)
			if o, ok := byTime.Lookup(t, p); ok && o.Err == nil {
				at = o.Offset
			}
			next := shareResetTarget(spec, start.Offset, end.Offset, at)
			plan.Add(kadm.Offset{Topic: t, Partition: p, At: next, LeaderEpoch: -1})
			cur := "-"
			if c, ok := current[t][p]; ok && c >= 0 {
				cur = strconv.FormatInt(c, 10)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\n", group, t, p, cur, next)
			n++
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !execute {
		fmt.Fprintln(stdout, "(dry run: add --execute to apply these start offsets)")
		return nil
	}
	resp, err := adm.AlterShareGroupOffsets(ctx, group, plan)
	if err != nil {
		return fmt.Errorf("alter share group offsets (the group must have no members): %w", err)
	}
	var errs []error
	resp.EachError(func(t string, p int32, err error) {
		errs = append(errs, fmt.Errorf("%s-%d: %w", t, p, err))
	})
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	fmt.Fprintf(stdout, "reset %d share-partition start offsets for share group %s\n", n, group)
	return nil
}

// shareGroupDeleteOffsets deletes the share-partition state of topics (DeleteShareGroupOffsets,
// key 92).
func shareGroupDeleteOffsets(ctx context.Context, adm *kadm.Client, group string, topics []string, stdout io.Writer) error {
	resp, err := adm.DeleteShareGroupOffsets(ctx, group, topics...)
	if err != nil {
		return fmt.Errorf("share group %s: delete offsets (the group must have no members): %w", group, err)
	}
	var errs []error
	sort.Strings(topics)
	for _, t := range topics {
		e, ok := resp.Lookup(t)
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("topic %s: no answer", t))
		case e != nil:
			errs = append(errs, fmt.Errorf("topic %s: %w", t, e))
		default:
			fmt.Fprintf(stdout, "deleted share group %s offsets of topic %s\n", group, t)
		}
	}
	return errors.Join(errs...)
}

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

	"github.com/twmb/franz-go/pkg/kadm"
)

const groupUsage = `usage: weir group <list|describe|delete|reset-offsets> [flags]

  weir group list [--state Stable,Empty,...]
  weir group describe GROUP [GROUP ...]
      members (id, client, host, assigned partitions) and, per partition, the committed
      offset, the log end offset and the lag
  weir group delete GROUP [GROUP ...]
      only groups with no members (Empty) can be deleted; their committed offsets go too
  weir group reset-offsets GROUP --topic T[:P,P...] (--to-earliest | --to-latest | --to-offset N | --shift-by N) [--execute]
      prints the plan; --execute commits it (the group must have no members)

Every subcommand takes --bootstrap host:port[,host:port] (default 127.0.0.1:9092).
`

// groupCmd runs `weir group ...`, writing its results to stdout.
func groupCmd(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New(strings.TrimSpace(groupUsage))
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("group "+sub, flag.ContinueOnError)
	var cf clientFlags
	cf.register(fs)
	states := fs.String("state", "", "list: only groups in these states (comma-separated)")
	topic := fs.String("topic", "", "reset-offsets: the topic, optionally with partitions: T or T:0,1,2")
	toEarliest := fs.Bool("to-earliest", false, "reset-offsets: to the log start offset")
	toLatest := fs.Bool("to-latest", false, "reset-offsets: to the log end offset")
	toOffset := fs.Int64("to-offset", -1, "reset-offsets: to this offset (clamped to the log's range)")
	shiftBy := fs.Int64("shift-by", 0, "reset-offsets: move the committed offset by N (negative: back)")
	execute := fs.Bool("execute", false, "reset-offsets: commit the plan (without it, only print it)")
	switch sub {
	case "list", "describe", "delete", "reset-offsets":
	case "-h", "--help", "help":
		fmt.Fprint(stdout, groupUsage)
		return nil
	default:
		return fmt.Errorf("unknown group subcommand %q\n%s", sub, groupUsage)
	}
	names, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	cl, err := cf.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	switch sub {
	case "list":
		return groupList(ctx, adm, *states, stdout)
	case "describe":
		if len(names) == 0 {
			return errors.New("group describe: name at least one group")
		}
		return groupDescribe(ctx, adm, names, stdout)
	case "delete":
		if len(names) == 0 {
			return errors.New("group delete: name at least one group")
		}
		return groupDelete(ctx, adm, names, stdout)
	default:
		if len(names) != 1 {
			return errors.New("group reset-offsets: name exactly one group")
		}
		n := 0
		for _, set := range []bool{*toEarliest, *toLatest, *toOffset >= 0, *shiftBy != 0} {
			if set {
				n++
			}
		}
		if n != 1 || *topic == "" {
			return errors.New("group reset-offsets: needs --topic and exactly one of --to-earliest, --to-latest, --to-offset, --shift-by")
		}
		spec := resetSpec{earliest: *toEarliest, latest: *toLatest, offset: *toOffset, shift: *shiftBy}
		return groupResetOffsets(ctx, adm, names[0], *topic, spec, *execute, stdout)
	}
}

func groupList(ctx context.Context, adm *kadm.Client, states string, stdout io.Writer) error {
	var filter []string
	for _, s := range strings.Split(states, ",") {
		if s = strings.TrimSpace(s); s != "" {
			filter = append(filter, s)
		}
	}
	groups, err := adm.ListGroups(ctx, filter...)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tTYPE\tSTATE\tPROTOCOL-TYPE")
	for _, g := range groups.Sorted() {
		typ := g.GroupType
		if typ == "" {
			typ = "classic"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", g.Group, typ, g.State, g.ProtocolType)
	}
	return tw.Flush()
}

func groupDescribe(ctx context.Context, adm *kadm.Client, names []string, stdout io.Writer) error {
	lags, err := adm.Lag(ctx, names...)
	if err != nil {
		return err
	}
	var errs []error
	for i, name := range names {
		l, ok := lags[name]
		if !ok {
			errs = append(errs, fmt.Errorf("group %s: no answer", name))
			continue
		}
		if err := l.Error(); err != nil {
			errs = append(errs, fmt.Errorf("group %s: %w", name, err))
			continue
		}
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		fmt.Fprintf(stdout, "group %s: state %s, protocol %s/%s, %d members, coordinator %d (%s:%d)\n",
			name, l.State, l.ProtocolType, l.Protocol, len(l.Members), l.Coordinator.NodeID, l.Coordinator.Host, l.Coordinator.Port)
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		if len(l.Members) > 0 {
			fmt.Fprintln(tw, "MEMBER\tINSTANCE\tCLIENT\tHOST\tASSIGNED")
			for _, m := range l.Members {
				inst := "-"
				if m.InstanceID != nil {
					inst = *m.InstanceID
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.MemberID, inst, m.ClientID, m.ClientHost, assignedString(m))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
		}
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tMEMBER")
		for _, pl := range l.Lag.Sorted() {
			member := "-"
			if pl.Member != nil {
				member = pl.Member.MemberID
			}
			cur, lag := "-", "-"
			if pl.Commit.At >= 0 {
				cur = strconv.FormatInt(pl.Commit.At, 10)
			}
			if pl.Lag >= 0 && pl.Err == nil {
				lag = strconv.FormatInt(pl.Lag, 10)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%s\n", pl.Topic, pl.Partition, cur, pl.End.Offset, lag, member)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "total lag %d\n", l.Lag.Total())
	}
	return errors.Join(errs...)
}

// assignedString renders a consumer member's assignment as topic:p,p topic:p.
func assignedString(m kadm.DescribedGroupMember) string {
	ca, ok := m.Assigned.AsConsumer()
	if !ok {
		return "(not a consumer assignment)"
	}
	var parts []string
	for _, t := range ca.Topics {
		ps := append([]int32{}, t.Partitions...)
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		var s []string
		for _, p := range ps {
			s = append(s, strconv.Itoa(int(p)))
		}
		parts = append(parts, t.Topic+":"+strings.Join(s, ","))
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

func groupDelete(ctx context.Context, adm *kadm.Client, names []string, stdout io.Writer) error {
	resp, err := adm.DeleteGroups(ctx, names...)
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range names {
		r, ok := resp[name]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("group %s: no answer", name))
		case r.Err != nil:
			errs = append(errs, fmt.Errorf("group %s: %w", name, r.Err))
		default:
			fmt.Fprintf(stdout, "deleted group %s\n", name)
		}
	}
	return errors.Join(errs...)
}

type resetSpec struct {
	earliest, latest bool
	offset, shift    int64
}

// groupResetOffsets plans new committed offsets for topic's partitions and, with execute,
// commits them (generation -1: the broker accepts it only while the group has no members).
func groupResetOffsets(ctx context.Context, adm *kadm.Client, group, topicSpec string, spec resetSpec, execute bool, stdout io.Writer) error {
	topic, partList, _ := strings.Cut(topicSpec, ":")
	want := map[int32]bool{}
	if partList != "" {
		for _, s := range strings.Split(partList, ",") {
			p, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
			if err != nil {
				return fmt.Errorf("--topic %s: bad partition %q", topicSpec, s)
			}
			want[int32(p)] = true
		}
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return err
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return err
	}
	if err := ends.Error(); err != nil {
		return err
	}
	current, err := adm.FetchOffsetsForTopics(ctx, group, topic)
	if err != nil {
		return err
	}
	plan := kadm.Offsets{}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tCURRENT-OFFSET\tNEW-OFFSET")
	var parts []int32
	ends.Each(func(o kadm.ListedOffset) {
		if len(want) == 0 || want[o.Partition] {
			parts = append(parts, o.Partition)
		}
	})
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	for p := range want {
		if _, ok := ends.Lookup(topic, p); !ok {
			return fmt.Errorf("topic %s has no partition %d", topic, p)
		}
	}
	for _, p := range parts {
		end, _ := ends.Lookup(topic, p)
		start, _ := starts.Lookup(topic, p)
		cur := int64(-1)
		if c, ok := current.Lookup(topic, p); ok && c.Err == nil {
			cur = c.At
		}
		var next int64
		switch {
		case spec.earliest:
			next = start.Offset
		case spec.latest:
			next = end.Offset
		case spec.shift != 0:
			base := cur
			if base < 0 {
				base = end.Offset
			}
			next = base + spec.shift
		default:
			next = spec.offset
		}
		next = max(min(next, end.Offset), start.Offset)
		plan.Add(kadm.Offset{Topic: topic, Partition: p, At: next, LeaderEpoch: -1})
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\n", topic, p, cur, next)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !execute {
		fmt.Fprintln(stdout, "(dry run: add --execute to commit these offsets)")
		return nil
	}
	resp, err := adm.CommitOffsets(ctx, group, plan)
	if err != nil {
		return err
	}
	if err := resp.Error(); err != nil {
		return fmt.Errorf("commit (the group must have no members): %w", err)
	}
	fmt.Fprintf(stdout, "committed %d offsets for group %s\n", len(parts), group)
	return nil
}

package main

// `weir partition ...`: partition-level administration. This file owns the `partition`
// dispatcher (one case per sub-subcommand) and:
//   - elect: leader election through Kafka's ElectLeaders API (preferred or unclean), as
//     kafka-leader-election.sh does;
//   - leaders: the leader balance per broker (preferred partitions, partitions led, preferred
//     partitions not led), from Metadata.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const partitionUsage = `usage: weir partition <subcommand> [flags]

  elect --type preferred|unclean (--all | --topic T [--partition N])
          elect leaders (Kafka's ElectLeaders, as kafka-leader-election.sh): preferred moves a
          partition's leadership to its preferred replica (the first of its replicas) when that
          replica is alive and in the ISR; unclean gives a leaderless partition a leader, from
          outside the ISR if no ISR member is alive (records only the old ISR had are lost).
          Prints one line per partition; exits 1 if an election failed (not for "not needed").
  leaders [--topic T]
          leader balance per broker: partitions it is the preferred replica of, partitions it
          leads, and preferred partitions it does not lead
`

// partitionCmd runs `weir partition ...`, writing its results to stdout.
func partitionCmd(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New(strings.TrimSpace(partitionUsage))
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "elect":
		return partitionElect(ctx, args, stdout)
	case "leaders":
		return partitionLeaders(ctx, args, stdout)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, partitionUsage)
		return nil
	}
	return fmt.Errorf("unknown partition subcommand %q\n%s", sub, partitionUsage)
}

func partitionElect(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("partition elect", flag.ContinueOnError)
	var cf clientFlags
	cf.register(fs)
	typ := fs.String("type", "", "election type: preferred or unclean")
	topic := fs.String("topic", "", "the topic whose partitions to elect leaders for")
	partition := fs.Int("partition", -1, "only this partition of --topic")
	all := fs.Bool("all", false, "every partition of every topic")
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 0 {
		return fmt.Errorf("partition elect takes no arguments, got %q", rest)
	}
	req := kmsg.NewPtrElectLeadersRequest()
	switch strings.ToLower(*typ) {
	case "preferred":
		req.ElectionType = 0
	case "unclean":
		req.ElectionType = 1
	default:
		return fmt.Errorf("--type must be preferred or unclean, not %q", *typ)
	}
	switch {
	case *all && *topic != "":
		return errors.New("give --all or --topic, not both")
	case !*all && *topic == "":
		return errors.New("give --all or --topic T [--partition N]")
	case *partition >= 0 && *topic == "":
		return errors.New("--partition needs --topic")
	case *partition < -1:
		return fmt.Errorf("--partition %d", *partition)
	}
	cl, err := cf.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	if !*all {
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic = *topic
		if *partition >= 0 {
			rt.Partitions = []int32{int32(*partition)}
		} else {
			md, err := topicMetadata(ctx, cl, *topic)
			if err != nil {
				return err
			}
			for _, p := range md.Partitions {
				rt.Partitions = append(rt.Partitions, p.Partition)
			}
			sort.Slice(rt.Partitions, func(i, j int) bool { return rt.Partitions[i] < rt.Partitions[j] })
		}
		req.Topics = []kmsg.ElectLeadersRequestTopic{rt}
	}
	req.TimeoutMillis = 30000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("ElectLeaders: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("ElectLeaders: %w", err)
	}
	elected, notNeeded, failed := 0, 0, 0
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			switch p.ErrorCode {
			case 0:
				elected++
				fmt.Fprintf(stdout, "%s-%d: elected\n", t.Topic, p.Partition)
			case kerr.ElectionNotNeeded.Code:
				notNeeded++
				fmt.Fprintf(stdout, "%s-%d: not needed (the desired leader already leads)\n", t.Topic, p.Partition)
			default:
				failed++
				msg := ""
				if p.ErrorMessage != nil {
					msg = ": " + *p.ErrorMessage
				}
				fmt.Fprintf(stdout, "%s-%d: failed: %v%s\n", t.Topic, p.Partition, kerr.ErrorForCode(p.ErrorCode), msg)
			}
		}
	}
	fmt.Fprintf(stdout, "%d elected, %d not needed, %d failed\n", elected, notNeeded, failed)
	if failed > 0 {
		return fmt.Errorf("%d elections failed", failed)
	}
	return nil
}

// topicMetadata returns one topic's metadata.
func topicMetadata(ctx context.Context, cl *kgo.Client, topic string) (kmsg.MetadataResponseTopic, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = []kmsg.MetadataRequestTopic{rt}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return kmsg.MetadataResponseTopic{}, fmt.Errorf("metadata: %w", err)
	}
	if len(resp.Topics) != 1 {
		return kmsg.MetadataResponseTopic{}, fmt.Errorf("metadata of %s: %d topics in the answer", topic, len(resp.Topics))
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		return kmsg.MetadataResponseTopic{}, fmt.Errorf("topic %s: %w", topic, err)
	}
	return resp.Topics[0], nil
}

// brokerBalance is one broker's line of `weir partition leaders`.
type brokerBalance struct {
	preferred, leads, notLed int
}

func partitionLeaders(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("partition leaders", flag.ContinueOnError)
	var cf clientFlags
	cf.register(fs)
	topic := fs.String("topic", "", "only this topic")
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 0 {
		return fmt.Errorf("partition leaders takes no arguments, got %q", rest)
	}
	cl, err := cf.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	if *topic != "" {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(*topic)
		req.Topics = []kmsg.MetadataRequestTopic{rt}
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	bal := map[int32]*brokerBalance{}
	for _, b := range resp.Brokers {
		bal[b.NodeID] = &brokerBalance{}
	}
	get := func(id int32) *brokerBalance {
		if bal[id] == nil {
			bal[id] = &brokerBalance{}
		}
		return bal[id]
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return fmt.Errorf("topic %s: %w", *t.Topic, err)
		}
		for _, p := range t.Partitions {
			if p.Leader >= 0 {
				get(p.Leader).leads++
			}
			if len(p.Replicas) > 0 {
				pb := get(p.Replicas[0])
				pb.preferred++
				if p.Leader != p.Replicas[0] {
					pb.notLed++
				}
			}
		}
	}
	ids := make([]int32, 0, len(bal))
	for id := range bal {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	fmt.Fprintf(stdout, "%-8s %10s %6s %18s\n", "BROKER", "PREFERRED", "LEADS", "PREFERRED-NOT-LED")
	for _, id := range ids {
		b := bal[id]
		fmt.Fprintf(stdout, "%-8d %10d %6d %18d\n", id, b.preferred, b.leads, b.notLed)
	}
	return nil
}

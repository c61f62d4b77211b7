package main

// weir partition reassign and weir partition reassignments: partition reassignment (KIP-455)
// through the AlterPartitionReassignments and ListPartitionReassignments APIs, as
// kafka-reassign-partitions.sh uses them.
//
//	weir partition reassign --topic T [--partition N] --replicas 2,3,4   (every partition without --partition)
//	weir partition reassign --topic T [--partition N] --cancel
//	weir partition reassignments [--topic T]

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func partitionReassignCmd(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("partition reassign", flag.ContinueOnError)
	var cf clientFlags
	cf.register(fs)
	topic := fs.String("topic", "", "topic to reassign")
	partition := fs.Int("partition", -1, "partition to reassign (default: every partition of the topic)")
	replicas := fs.String("replicas", "", "new replica list, comma-separated broker ids; the first is the preferred leader")
	cancel := fs.Bool("cancel", false, "cancel the reassignment in progress (back to the original replicas)")
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	if *topic == "" {
		return errors.New("--topic is required")
	}
	if (*replicas == "") == !*cancel {
		return errors.New("give exactly one of --replicas and --cancel")
	}
	var target []int32
	if !*cancel {
		for _, s := range strings.Split(*replicas, ",") {
			id, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
			if err != nil || id < 0 {
				return fmt.Errorf("--replicas: %q is not a broker id", s)
			}
			target = append(target, int32(id))
		}
	}
	cl, err := cf.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	parts := []int32{int32(*partition)}
	if *partition < 0 {
		md, err := adm.Metadata(ctx, *topic)
		if err != nil {
			return err
		}
		td, ok := md.Topics[*topic]
		if !ok || td.Err != nil {
			return fmt.Errorf("topic %s: %v", *topic, td.Err)
		}
		parts = parts[:0]
		for p := range td.Partitions {
			parts = append(parts, p)
		}
		sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	}
	var req kadm.AlterPartitionAssignmentsReq
	for _, p := range parts {
		req.Assign(*topic, p, target)
	}
	resp, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return err
	}
	failed := 0
	for _, r := range resp.Sorted() {
		switch {
		case r.Err != nil:
			failed++
			msg := r.Err.Error()
			if r.ErrMessage != "" {
				msg = r.ErrMessage
			}
			fmt.Fprintf(out, "%s-%d\tFAILED\t%s\n", r.Topic, r.Partition, msg)
		case *cancel:
			fmt.Fprintf(out, "%s-%d\tcancelled\n", r.Topic, r.Partition)
		default:
			fmt.Fprintf(out, "%s-%d\treassigning to %v\n", r.Topic, r.Partition, target)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d partitions failed", failed, len(parts))
	}
	return nil
}

func partitionReassignmentsCmd(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("partition reassignments", flag.ContinueOnError)
	var cf clientFlags
	cf.register(fs)
	topic := fs.String("topic", "", "only this topic's partitions")
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	cl, err := cf.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	req.TimeoutMillis = 30000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("list partition reassignments: %w", err)
	}
	fmt.Fprintln(out, "TOPIC\tPARTITION\tREPLICAS\tADDING\tREMOVING")
	n := 0
	for _, t := range resp.Topics {
		if *topic != "" && t.Topic != *topic {
			continue
		}
		for _, p := range t.Partitions {
			n++
			fmt.Fprintf(out, "%s\t%d\t%s\t%s\t%s\n", t.Topic, p.Partition, replicaList(p.Replicas), replicaList(p.AddingReplicas), replicaList(p.RemovingReplicas))
		}
	}
	if n == 0 {
		fmt.Fprintln(out, "(no reassignment in progress)")
	}
	return nil
}

func replicaList(v []int32) string {
	s := make([]string, len(v))
	for i, id := range v {
		s[i] = strconv.Itoa(int(id))
	}
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ",")
}

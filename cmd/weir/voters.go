package main

// `weir cluster quorum`, `weir cluster add-voter` and `weir cluster remove-voter`: the
// controller quorum over the Kafka API (DescribeQuorum, AddRaftVoter, RemoveRaftVoter), with
// the client's TLS and SASL options, so a change needs ALTER on CLUSTER when ACLs are on.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// votersCmd runs one of the quorum subcommands.
func votersCmd(ctx context.Context, sub string, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("cluster "+sub, flag.ContinueOnError)
	var cf clientFlags
	cf.register(fs)
	id := fs.Int("id", -1, "node id of the voter")
	address := fs.String("address", "", "host:port of the new voter's controller listener (default: the address it registered with)")
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 0 {
		return fmt.Errorf("cluster %s takes no arguments, got %q", sub, rest)
	}
	if sub != "quorum" && *id < 0 {
		return fmt.Errorf("cluster %s needs --id N", sub)
	}
	if sub != "add-voter" && *address != "" {
		return fmt.Errorf("cluster %s takes no --address", sub)
	}
	var host string
	var port uint64
	if *address != "" {
		var p string
		if host, p, err = net.SplitHostPort(*address); err != nil {
			return fmt.Errorf("--address: %w", err)
		}
		if port, err = strconv.ParseUint(p, 10, 16); err != nil || port == 0 {
			return fmt.Errorf("--address: bad port %q", p)
		}
	}
	cl, err := cf.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	switch sub {
	case "quorum":
		return printQuorum(ctx, cl, stdout)
	case "add-voter":
		req := kmsg.NewPtrAddRaftVoterRequest()
		req.VoterID, req.TimeoutMillis, req.AckWhenCommitted = int32(*id), 30000, true
		if *address != "" {
			l := kmsg.NewAddRaftVoterRequestListener()
			l.Name, l.Host, l.Port = "CONTROLLER", host, uint16(port)
			req.Listeners = append(req.Listeners, l)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return fmt.Errorf("add-voter: %w", err)
		}
		if err := voterErr(resp.ErrorCode, resp.ErrorMessage); err != nil {
			return fmt.Errorf("add-voter %d: %w", *id, err)
		}
		fmt.Fprintf(stdout, "node %d is a voter\n", *id)
	case "remove-voter":
		req := kmsg.NewPtrRemoveRaftVoterRequest()
		req.VoterID = int32(*id)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return fmt.Errorf("remove-voter: %w", err)
		}
		if err := voterErr(resp.ErrorCode, resp.ErrorMessage); err != nil {
			return fmt.Errorf("remove-voter %d: %w", *id, err)
		}
		fmt.Fprintf(stdout, "node %d is no longer a voter\n", *id)
	}
	return nil
}

func voterErr(code int16, msg *string) error {
	err := kerr.ErrorForCode(code)
	if err == nil {
		return nil
	}
	if msg != nil && *msg != "" {
		if strings.Contains(*msg, err.Error()) { // the broker's message names the error already
			return errors.New(*msg)
		}
		return fmt.Errorf("%s: %w", *msg, err)
	}
	return err
}

// printQuorum prints DescribeQuorum's answer.
func printQuorum(ctx context.Context, cl interface {
	Request(context.Context, kmsg.Request) (kmsg.Response, error)
}, w io.Writer) error {
	req := kmsg.NewPtrDescribeQuorumRequest()
	t := kmsg.NewDescribeQuorumRequestTopic()
	t.Topic = "__cluster_metadata"
	t.Partitions = append(t.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("describe quorum: %w", err)
	}
	if err := voterErr(resp.ErrorCode, resp.ErrorMessage); err != nil {
		return fmt.Errorf("describe quorum: %w", err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return errors.New("describe quorum: no partition in the answer")
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return fmt.Errorf("describe quorum: %w", err)
	}
	fmt.Fprintf(w, "leader %d  epoch %d  high watermark %d\n", p.LeaderID, p.LeaderEpoch, p.HighWatermark)
	now := time.Now().UnixMilli()
	row := func(kind string, s kmsg.DescribeQuorumResponseTopicPartitionReplicaState) {
		lag, fetched := "?", "never"
		if s.LogEndOffset >= 0 {
			lag = strconv.FormatInt(max(p.HighWatermark-s.LogEndOffset, 0), 10)
		}
		if s.LastFetchTimestamp >= 0 {
			fetched = fmt.Sprintf("%dms ago", max(now-s.LastFetchTimestamp, 0))
		}
		role := kind
		if s.ReplicaID == p.LeaderID {
			role = "leader"
		}
		fmt.Fprintf(w, "  %-8s node %-4d log end %-8d lag %-6s last report %s\n", role, s.ReplicaID, s.LogEndOffset, lag, fetched)
	}
	for _, v := range p.CurrentVoters {
		row("voter", v)
	}
	for _, o := range p.Observers {
		row("observer", o)
	}
	return nil
}

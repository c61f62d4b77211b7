package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const clusterUsage = `usage: weir cluster info [--bootstrap host:port[,host:port]]
       weir cluster quorum [--bootstrap ...]
       weir cluster add-voter --id N [--address host:port] [--bootstrap ...]
       weir cluster remove-voter --id N [--bootstrap ...]

  info          the cluster id, the active controller, the live brokers, and how many
                partitions there are, how many have no leader and how many are
                under-replicated (ISR smaller than the replica set)
  quorum        the controller quorum: leader, epoch, high watermark, voters and observers
                with their log end and lag (DescribeQuorum)
  add-voter     make node N a voter of the controller quorum (AddRaftVoter). N must be
                running with controller.listener set and controller.quorum.voters naming the
                current voters; --address defaults to the address it registered with
  remove-voter  remove node N from the controller quorum's voters (RemoveRaftVoter)
`

// clusterCmd runs `weir cluster ...`, writing its results to stdout.
func clusterCmd(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New(strings.TrimSpace(clusterUsage))
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "add-voter", "remove-voter", "quorum": // voters.go
		return votersCmd(ctx, sub, args, stdout)
	case "info":
	case "-h", "--help", "help":
		fmt.Fprint(stdout, clusterUsage)
		return nil
	default:
		return fmt.Errorf("unknown cluster subcommand %q\n%s", sub, clusterUsage)
	}
	fs := flag.NewFlagSet("cluster "+sub, flag.ContinueOnError)
	var cf clientFlags
	cf.register(fs)
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 0 {
		return fmt.Errorf("cluster info takes no arguments, got %q", rest)
	}
	cl, err := cf.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	info, err := loadClusterInfo(ctx, cl)
	if err != nil {
		return err
	}
	info.print(stdout)
	return nil
}

type clusterBroker struct {
	id   int32
	addr string
	rack string
}

type clusterInfo struct {
	clusterID       string
	controller      int32
	brokers         []clusterBroker
	topics          int
	partitions      int
	leaderless      int
	underReplicated int
	offline         int // partitions with offline replicas
}

// loadClusterInfo asks DescribeCluster for the brokers and the active controller (Metadata's
// answer when DescribeCluster fails) and Metadata for every topic's partitions.
func loadClusterInfo(ctx context.Context, cl *kgo.Client) (*clusterInfo, error) {
	md, err := kadm.NewClient(cl).Metadata(ctx)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	info := &clusterInfo{clusterID: md.Cluster, controller: md.Controller}
	for _, b := range md.Brokers {
		cb := clusterBroker{id: b.NodeID, addr: net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))}
		if b.Rack != nil {
			cb.rack = *b.Rack
		}
		info.brokers = append(info.brokers, cb)
	}
	req := kmsg.NewPtrDescribeClusterRequest()
	if resp, err := req.RequestWith(ctx, cl); err == nil && resp.ErrorCode == 0 {
		if resp.ClusterID != "" {
			info.clusterID = resp.ClusterID
		}
		info.controller = resp.ControllerID
		info.brokers = info.brokers[:0]
		for _, b := range resp.Brokers {
			cb := clusterBroker{id: b.NodeID, addr: net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))}
			if b.Rack != nil {
				cb.rack = *b.Rack
			}
			info.brokers = append(info.brokers, cb)
		}
	}
	sort.Slice(info.brokers, func(i, j int) bool { return info.brokers[i].id < info.brokers[j].id })
	for _, t := range md.Topics {
		if t.Err != nil {
			continue
		}
		info.topics++
		for _, p := range t.Partitions {
			info.partitions++
			if p.Leader < 0 {
				info.leaderless++
			}
			if underReplicated(p) {
				info.underReplicated++
			}
			if len(p.OfflineReplicas) > 0 {
				info.offline++
			}
		}
	}
	return info, nil
}

func (c *clusterInfo) print(w io.Writer) {
	controller := "none"
	if c.controller >= 0 {
		controller = strconv.Itoa(int(c.controller))
	}
	line := func(label string, v any) { fmt.Fprintf(w, "%-24s%v\n", label+":", v) }
	line("Cluster ID", c.clusterID)
	line("Active controller", controller)
	line("Brokers", len(c.brokers))
	for _, b := range c.brokers {
		extra := ""
		if b.rack != "" {
			extra += "  rack " + b.rack
		}
		if b.id == c.controller {
			extra += "  (active controller)"
		}
		fmt.Fprintf(w, "  %-4d%s%s\n", b.id, b.addr, extra)
	}
	line("Topics", c.topics)
	line("Partitions", c.partitions)
	line("Leaderless partitions", c.leaderless)
	line("Under-replicated", c.underReplicated)
	line("With offline replicas", c.offline)
}

// underReplicated: the partition's ISR is smaller than its replica set.
func underReplicated(p kadm.PartitionDetail) bool {
	return len(p.ISR) < len(p.Replicas)
}

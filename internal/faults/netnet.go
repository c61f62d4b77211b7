package faults

import (
	"fmt"
	"strconv"

	"github.com/weir-mq/weir/internal/faults/checker"
	"github.com/weir-mq/weir/internal/faults/history"
	"github.com/weir-mq/weir/internal/faults/netns"
	"github.com/weir-mq/weir/internal/testcluster"
)

// UseNetns puts the run's nodes in network namespaces of their own (internal/faults/netns, set
// name), joined by a bridge whose namespace the clients dial from, and makes the partition
// family available: cfg's Network, Dial and Cluster are set. The returned close removes the
// namespaces; call it after Run. When namespaces cannot be made here, the error says why (the
// caller then runs on 127.0.0.1 without partitions and the report says so).
func UseNetns(cfg *RunConfig, name string) (close func() error, err error) {
	if err := netns.Available(); err != nil {
		return nil, err
	}
	nodes := cfg.Nodes
	if nodes == 0 {
		nodes = 3
	}
	nt, err := netns.Create(name, nodes)
	if err != nil {
		return nil, fmt.Errorf("faults: network namespaces: %w", err)
	}
	cfg.Network = netnsNetwork{nt}
	cfg.Dial = nt.DialContext
	prev := cfg.Cluster
	cfg.Cluster = func(tc *testcluster.Config) {
		tc.Host = nt.Addr
		tc.DialContext = nt.DialContext
		tc.Wrap = func(n *testcluster.Node, argv []string) []string { return nt.Exec(int(n.ID), argv) }
		if prev != nil {
			prev(tc)
		}
	}
	return nt.Close, nil
}

// netnsNetwork adapts netns.Net, whose faults add up, to Network, whose calls each replace the
// previous fault.
type netnsNetwork struct{ nt *netns.Net }

func (n netnsNetwork) Isolate(node int) error {
	if err := n.nt.Heal(); err != nil {
		return err
	}
	return n.nt.Isolate(node)
}

func (n netnsNetwork) Split(groups ...[]int) error {
	if err := n.nt.Heal(); err != nil {
		return err
	}
	return n.nt.Split(groups...)
}

func (n netnsNetwork) Bridge(a, b []int, mid int) error {
	if err := n.nt.Heal(); err != nil {
		return err
	}
	return n.nt.Bridge(a, b, mid)
}

func (n netnsNetwork) OneWay(from, to int) error {
	if err := n.nt.Heal(); err != nil {
		return err
	}
	return n.nt.OneWay(from, to)
}

func (n netnsNetwork) Heal() error    { return n.nt.Heal() }
func (n netnsNetwork) Method() string { return n.nt.Method() }

// CheckHistory is the Kafka-semantics checker (internal/faults/checker) as RunConfig.Check
// wants it: idempotent producers, Kafka's default delivery-count limit.
func CheckHistory(ops []history.Op) (valid bool, summary string, verdict any) {
	r := checker.Check(ops, checker.Options{Idempotent: true})
	return r.Valid(), r.Summary(), r
}

// netnsName is a namespace set name unique to this process and seed.
func netnsName(prefix string, seed int64) string {
	return prefix + strconv.FormatInt(seed%100000, 36)
}

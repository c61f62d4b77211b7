package main

import (
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const defaultBootstrap = "127.0.0.1:9092"

// clientFlags are the flags every client subcommand takes: --bootstrap and the TLS and SASL
// flags of securityFlags, so every command that talks to a broker reaches secured listeners the
// same way.
type clientFlags struct {
	bootstrap string
	security  securityFlags
}

func (c *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.bootstrap, "bootstrap", defaultBootstrap, "broker addresses to bootstrap from, comma-separated")
	c.security.register(fs)
}

// client returns a franz-go client on the bootstrap brokers, with the TLS and SASL options the
// flags ask for before opts.
func (c *clientFlags) client(opts ...kgo.Opt) (*kgo.Client, error) {
	var seeds []string
	for _, s := range strings.Split(c.bootstrap, ",") {
		if s = strings.TrimSpace(s); s != "" {
			seeds = append(seeds, s)
		}
	}
	if len(seeds) == 0 {
		return nil, errors.New("--bootstrap is empty")
	}
	sec, err := c.security.opts()
	if err != nil {
		return nil, err
	}
	all := append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, sec...)
	return kgo.NewClient(append(all, opts...)...)
}

// parseInterspersed parses fs's flags wherever they appear among args (so both
// `weir topic create T --partitions 3` and `weir topic create --partitions 3 T` work) and
// returns the positional arguments. Everything after a "--" is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// configFlags collects repeated --config key=value.
type configFlags map[string]*string

func (c configFlags) String() string {
	var parts []string
	for k, v := range c {
		parts = append(parts, k+"="+*v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func (c configFlags) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("--config wants key=value, got %q", s)
	}
	v = strings.TrimSpace(v)
	c[strings.TrimSpace(k)] = &v
	return nil
}

const topicUsage = `usage: weir topic <create|list|describe|delete> [flags]

  weir topic create NAME [--partitions N] [--replication-factor R] [--config key=value ...]
  weir topic list
  weir topic describe [NAME ...] [--under-replicated]
  weir topic delete NAME [NAME ...]

Every subcommand takes --bootstrap host:port[,host:port] (default 127.0.0.1:9092).
`

// topicCmd runs `weir topic ...`, writing its results to stdout.
func topicCmd(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New(strings.TrimSpace(topicUsage))
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("topic "+sub, flag.ContinueOnError)
	var cf clientFlags
	cf.register(fs)
	partitions := fs.Int("partitions", -1, "partitions of the new topic (-1: the broker's num.partitions)")
	replication := fs.Int("replication-factor", -1, "replicas of each partition (-1: the broker's default.replication.factor)")
	configs := configFlags{}
	fs.Var(configs, "config", "topic config override key=value (repeatable)")
	onlyUnder := fs.Bool("under-replicated", false, "describe: list only the under-replicated partitions (ISR smaller than the replicas), of every topic when no NAME is given")
	switch sub {
	case "create", "list", "describe", "delete":
	case "-h", "--help", "help":
		fmt.Fprint(stdout, topicUsage)
		return nil
	default:
		return fmt.Errorf("unknown topic subcommand %q\n%s", sub, topicUsage)
	}
	names, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if *onlyUnder && sub != "describe" {
		return errors.New("--under-replicated goes with weir topic describe")
	}
	cl, err := cf.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	switch sub {
	case "create":
		if len(names) != 1 {
			return errors.New("usage: weir topic create NAME [--partitions N] [--replication-factor R] [--config key=value ...]")
		}
		resp, err := adm.CreateTopic(ctx, int32(*partitions), int16(*replication), configs, names[0])
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			return fmt.Errorf("create topic %s: %w", names[0], brokerError(err, resp.ErrMessage))
		}
		fmt.Fprintf(stdout, "Created topic %s with %d partitions.\n", resp.Topic, resp.NumPartitions)
	case "list":
		if len(names) != 0 {
			return errors.New("usage: weir topic list")
		}
		topics, err := adm.ListTopicsWithInternal(ctx)
		if err != nil {
			return err
		}
		for _, name := range topics.Names() {
			fmt.Fprintln(stdout, name)
		}
	case "describe":
		if *onlyUnder {
			return describeUnderReplicated(ctx, adm, names, stdout)
		}
		return describeTopics(ctx, adm, names, stdout)
	case "delete":
		if len(names) == 0 {
			return errors.New("usage: weir topic delete NAME [NAME ...]")
		}
		resps, err := adm.DeleteTopics(ctx, names...)
		if err != nil {
			return err
		}
		var errs []error
		for _, name := range names {
			r, ok := resps[name]
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("delete topic %s: no answer", name))
			case r.Err != nil:
				errs = append(errs, fmt.Errorf("delete topic %s: %w", name, brokerError(r.Err, r.ErrMessage)))
			default:
				fmt.Fprintf(stdout, "Deleted topic %s.\n", name)
			}
		}
		return errors.Join(errs...)
	}
	return nil
}

// describeTopics prints topics as kafka-topics --describe does: a line per topic with its id,
// partition count, replication factor and overridden configs, then a line per partition (see
// printPartition).
func describeTopics(ctx context.Context, adm *kadm.Client, names []string, stdout io.Writer) error {
	topics, err := adm.ListTopicsWithInternal(ctx, names...)
	if err != nil {
		return err
	}
	var errs []error
	var found []string
	for _, name := range topics.Names() {
		if d := topics[name]; d.Err != nil {
			errs = append(errs, fmt.Errorf("topic %s: %w", name, d.Err))
		} else {
			found = append(found, name)
		}
	}
	overrides := map[string][]string{}
	if len(found) > 0 {
		rcs, err := adm.DescribeTopicConfigs(ctx, found...)
		if err != nil {
			return err
		}
		for _, rc := range rcs {
			for _, c := range rc.Configs {
				if c.Source == kmsg.ConfigSourceDynamicTopicConfig {
					overrides[rc.Name] = append(overrides[rc.Name], c.Key+"="+c.MaybeValue())
				}
			}
		}
	}
	for _, name := range found {
		d := topics[name]
		parts := d.Partitions.Sorted()
		rf := 0
		if len(parts) > 0 {
			rf = len(parts[0].Replicas)
		}
		sort.Strings(overrides[name])
		fmt.Fprintf(stdout, "Topic: %s\tTopicId: %s\tPartitionCount: %d\tReplicationFactor: %d\tConfigs: %s\n",
			name, base64.RawURLEncoding.EncodeToString(d.ID[:]), len(parts), rf, strings.Join(overrides[name], ","))
		for _, p := range parts {
			printPartition(stdout, name, p)
		}
	}
	return errors.Join(errs...)
}

// describeUnderReplicated prints a partition line for each under-replicated partition of the
// named topics (every topic, internal ones included, when names is empty), as kafka-topics
// --describe --under-replicated-partitions does: no topic lines, nothing when all is well.
func describeUnderReplicated(ctx context.Context, adm *kadm.Client, names []string, stdout io.Writer) error {
	topics, err := adm.ListTopicsWithInternal(ctx, names...)
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range topics.Names() {
		d := topics[name]
		if d.Err != nil {
			errs = append(errs, fmt.Errorf("topic %s: %w", name, d.Err))
			continue
		}
		for _, p := range d.Partitions.Sorted() {
			if underReplicated(p) {
				printPartition(stdout, name, p)
			}
		}
	}
	return errors.Join(errs...)
}

// printPartition prints one partition line: kafka-topics' leader, replicas and ISR, then the
// leader epoch, the offline replicas, and markers for a partition without a leader or with an
// ISR smaller than its replicas.
func printPartition(w io.Writer, topic string, p kadm.PartitionDetail) {
	fmt.Fprintf(w, "\tTopic: %s\tPartition: %d\tLeader: %d\tReplicas: %s\tIsr: %s\tLeaderEpoch: %d\tOffline: %s",
		topic, p.Partition, p.Leader, joinIDs(p.Replicas), joinIDs(p.ISR), p.LeaderEpoch, joinIDs(p.OfflineReplicas))
	if p.Leader < 0 {
		fmt.Fprint(w, "\tNO LEADER")
	}
	if underReplicated(p) {
		fmt.Fprint(w, "\tUNDER-REPLICATED")
	}
	if p.Err != nil && !errors.Is(p.Err, kerr.LeaderNotAvailable) {
		fmt.Fprintf(w, "\tError: %v", p.Err)
	}
	fmt.Fprintln(w)
}

func joinIDs(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ",")
}

// brokerError is err (an error code) with the message the broker sent along, if any.
func brokerError(err error, msg string) error {
	switch {
	case msg == "" || msg == err.Error():
		return err
	case strings.Contains(msg, err.Error()):
		return messageError{msg, err}
	}
	return messageError{err.Error() + ": " + msg, err}
}

type messageError struct {
	msg string
	err error
}

func (e messageError) Error() string { return e.msg }
func (e messageError) Unwrap() error { return e.err }

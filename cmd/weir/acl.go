package main

// weir acl add|list|remove: Kafka ACLs through CreateAcls, DescribeAcls and DeleteAcls (kadm).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/weir-mq/weir/acl"
)

const aclUsage = `usage:
  weir acl add --allow|--deny --principal User:alice --operation READ [--operation DESCRIBE ...]
               (--topic T | --group G | --cluster | --transactional-id X) [--prefixed] [--host IP]
  weir acl list [--principal P] [--topic T | --group G | --cluster | --transactional-id X]
               [--pattern any|match|literal|prefixed] [--operation OP] [--allow|--deny] [--host IP]
  weir acl remove (same filters as list; at least one, or --all)
Operations: ALL READ WRITE CREATE DELETE ALTER DESCRIBE CLUSTER_ACTION DESCRIBE_CONFIGS
ALTER_CONFIGS IDEMPOTENT_WRITE CREATE_TOKENS DESCRIBE_TOKENS. Flags naming things repeat.
Every subcommand takes --bootstrap host:port and the TLS/SASL flags of 'weir user'.
`

// listFlag collects a repeated flag (comma-separated values are split too).
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l = append(*l, v)
		}
	}
	return nil
}

// nameFlag collects a repeated flag whose values may contain commas (principals).
type nameFlag []string

func (l *nameFlag) String() string { return strings.Join(*l, " ") }

func (l *nameFlag) Set(s string) error { *l = append(*l, s); return nil }

type aclFlags struct {
	allow, deny, prefixed, cluster, all bool
	principals                          nameFlag
	hosts                               listFlag
	operations                          listFlag
	topics, groups, txnIDs              nameFlag
	pattern                             string
}

func (f *aclFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.allow, "allow", false, "ALLOW ACLs")
	fs.BoolVar(&f.deny, "deny", false, "DENY ACLs")
	fs.Var(&f.principals, "principal", "principal, e.g. User:alice (User:* = every user); repeatable")
	fs.Var(&f.hosts, "host", "client IP address the ACL applies to (add: default *); repeatable")
	fs.Var(&f.operations, "operation", "operation (READ, WRITE, ...); repeatable")
	fs.Var(&f.topics, "topic", "topic name (* = every topic); repeatable")
	fs.Var(&f.groups, "group", "consumer group id (* = every group); repeatable")
	fs.Var(&f.txnIDs, "transactional-id", "transactional id; repeatable")
	fs.BoolVar(&f.cluster, "cluster", false, "the cluster resource")
	fs.BoolVar(&f.prefixed, "prefixed", false, "names are prefixes (PREFIXED pattern)")
	fs.StringVar(&f.pattern, "pattern", "", "list/remove: any (default), match, literal or prefixed")
	fs.BoolVar(&f.all, "all", false, "remove: every ACL")
}

func (f *aclFlags) hasResource() bool {
	return len(f.topics) > 0 || len(f.groups) > 0 || len(f.txnIDs) > 0 || f.cluster
}

func (f *aclFlags) ops(filter bool) ([]kadm.ACLOperation, error) {
	var out []kadm.ACLOperation
	for _, s := range f.operations {
		op, err := acl.ParseOperation(s)
		if err != nil {
			return nil, err
		}
		if !filter && (op == acl.OpAny || op == acl.OpUnknown) {
			return nil, fmt.Errorf("operation %s is only for filters", op)
		}
		out = append(out, kadm.ACLOperation(op))
	}
	if len(out) == 0 && filter {
		out = []kadm.ACLOperation{kadm.OpAny}
	}
	return out, nil
}

// builder turns the flags into a kadm.ACLBuilder, for creating or (filter) for listing and
// removing.
func (f *aclFlags) builder(filter bool) (*kadm.ACLBuilder, error) {
	b := kadm.NewACLs()
	ops, err := f.ops(filter)
	if err != nil {
		return nil, err
	}
	if !filter {
		switch {
		case f.allow == f.deny:
			return nil, errors.New("add needs exactly one of --allow and --deny")
		case len(f.principals) == 0:
			return nil, errors.New("add needs --principal (e.g. User:alice)")
		case len(ops) == 0:
			return nil, errors.New("add needs --operation")
		case !f.hasResource():
			return nil, errors.New("add needs a resource: --topic, --group, --cluster or --transactional-id")
		}
	}
	for _, p := range f.principals {
		if !strings.Contains(p, ":") {
			return nil, fmt.Errorf("principal %q: want type:name, e.g. User:%s", p, p)
		}
	}
	if filter && !f.hasResource() {
		b.AnyResource()
	} else {
		b.MaybeTopics(f.topics...).MaybeGroups(f.groups...).MaybeTransactionalIDs(f.txnIDs...).MaybeClusters(f.cluster)
	}
	pattern := kadm.ACLPatternLiteral
	switch {
	case f.prefixed:
		pattern = kadm.ACLPatternPrefixed
	case f.pattern != "":
		p, err := acl.ParsePatternType(f.pattern)
		if err != nil {
			return nil, err
		}
		pattern = kadm.ACLPattern(p)
	case filter:
		pattern = kadm.ACLPatternAny
	}
	b.ResourcePatternType(pattern)
	hosts := []string(f.hosts)
	if !filter && len(hosts) == 0 {
		hosts = []string{acl.WildcardHost}
	}
	allow, deny := f.allow, f.deny
	if filter && !allow && !deny {
		allow, deny = true, true
	}
	if allow {
		b.Allow(f.principals...).AllowHosts(hosts...)
	}
	if deny {
		b.Deny(f.principals...).DenyHosts(hosts...)
	}
	b.Operations(ops...)
	return b, nil
}

func aclCmd(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		_, _ = io.WriteString(stdout, aclUsage)
		if len(args) == 0 {
			return errors.New("acl: a subcommand is needed")
		}
		return nil
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("acl "+sub, flag.ContinueOnError)
	var cf clientFlags
	cf.register(fs)
	var f aclFlags
	f.register(fs)
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("acl %s: unexpected arguments %q", sub, rest)
	}
	run := func(do func(adm *kadm.Client) error) error {
		cl, err := cf.client()
		if err != nil {
			return err
		}
		defer cl.Close()
		return do(kadm.NewClient(cl))
	}
	switch sub {
	case "add", "create":
		b, err := f.builder(false)
		if err != nil {
			return err
		}
		return run(func(adm *kadm.Client) error {
			res, err := adm.CreateACLs(ctx, b)
			if err != nil {
				return err
			}
			var errs []error
			for _, r := range res {
				d := kadm.DescribedACL{Principal: r.Principal, Host: r.Host, Type: r.Type, Name: r.Name, Pattern: r.Pattern, Operation: r.Operation, Permission: r.Permission}
				if r.Err != nil {
					errs = append(errs, fmt.Errorf("%s: %w %s", formatACL(d), r.Err, r.ErrMessage))
					continue
				}
				fmt.Fprintf(stdout, "Added ACL %s\n", formatACL(d))
			}
			return errors.Join(errs...)
		})
	case "list", "describe":
		b, err := f.builder(true)
		if err != nil {
			return err
		}
		return run(func(adm *kadm.Client) error {
			res, err := adm.DescribeACLs(ctx, b)
			if err != nil {
				return err
			}
			var all []kadm.DescribedACL
			seen := map[kadm.DescribedACL]bool{}
			for _, r := range res {
				if r.Err != nil {
					return fmt.Errorf("%w %s", r.Err, r.ErrMessage)
				}
				for _, d := range r.Described {
					if !seen[d] {
						seen[d] = true
						all = append(all, d)
					}
				}
			}
			printACLs(stdout, all)
			return nil
		})
	case "remove", "delete":
		if !f.all && !f.hasResource() && len(f.principals) == 0 && len(f.operations) == 0 && len(f.hosts) == 0 {
			return errors.New("remove needs a filter (--principal, --topic, --group, --cluster, --operation, --host), or --all")
		}
		b, err := f.builder(true)
		if err != nil {
			return err
		}
		return run(func(adm *kadm.Client) error {
			res, err := adm.DeleteACLs(ctx, b)
			if err != nil {
				return err
			}
			var errs []error
			n := 0
			for _, r := range res {
				if r.Err != nil {
					errs = append(errs, fmt.Errorf("%w %s", r.Err, r.ErrMessage))
					continue
				}
				for _, d := range r.Deleted {
					if d.Err != nil {
						errs = append(errs, d.Err)
						continue
					}
					n++
					fmt.Fprintf(stdout, "Removed ACL %s\n", formatACL(kadm.DescribedACL{Principal: d.Principal, Host: d.Host, Type: d.Type, Name: d.Name, Pattern: d.Pattern, Operation: d.Operation, Permission: d.Permission}))
				}
			}
			if n == 0 && len(errs) == 0 {
				fmt.Fprintln(stdout, "No ACL matched")
			}
			return errors.Join(errs...)
		})
	}
	return fmt.Errorf("acl: unknown subcommand %q\n%s", sub, aclUsage)
}

func formatACL(d kadm.DescribedACL) string {
	return fmt.Sprintf("%s %s %s from %s on %s %s %q", d.Principal, acl.Permission(d.Permission), acl.Operation(d.Operation), d.Host,
		acl.PatternType(d.Pattern), acl.ResourceType(d.Type), d.Name)
}

func printACLs(w io.Writer, ds []kadm.DescribedACL) {
	sort.Slice(ds, func(i, j int) bool {
		a, b := ds[i], ds[j]
		if a.Type != b.Type {
			return a.Type < b.Type
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		if a.Pattern != b.Pattern {
			return a.Pattern < b.Pattern
		}
		if a.Principal != b.Principal {
			return a.Principal < b.Principal
		}
		if a.Operation != b.Operation {
			return a.Operation < b.Operation
		}
		return a.Permission < b.Permission
	})
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RESOURCE\tPATTERN\tNAME\tPRINCIPAL\tHOST\tOPERATION\tPERMISSION")
	for _, d := range ds {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", acl.ResourceType(d.Type), acl.PatternType(d.Pattern), d.Name,
			d.Principal, d.Host, acl.Operation(d.Operation), acl.Permission(d.Permission))
	}
	_ = tw.Flush()
}

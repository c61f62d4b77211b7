package main

// weir quota set|describe|delete: client quotas (AlterClientQuotas and DescribeClientQuotas,
// through kadm), for a user, a client id, or both, each possibly the <default> entity.

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
)

const quotaUsage = `usage:
  weir quota set ENTITY [--producer-byte-rate N] [--consumer-byte-rate N] [--request-percentage P] [--controller-mutation-rate R] [--validate-only]
  weir quota describe [ENTITY]   (no entity: every quota; with one: the entities matching it)
  weir quota delete ENTITY [--key producer_byte_rate,...]   (default: every key the entity has)
ENTITY is --user U and/or --client-id C; --user-default / --client-id-default name the <default> entity.
flags of every subcommand: --bootstrap host:port, and to reach a secured listener
  --tls [--tls-ca ca.pem] [--tls-cert client.pem --tls-key client.key]
  --sasl-mechanism PLAIN|SCRAM-SHA-256|SCRAM-SHA-512 --sasl-user U
  [--sasl-password P | --sasl-password-file F | $WEIR_SASL_PASSWORD]
`

// quotaKeys are the quota keys weir enforces, in the order they are printed.
var quotaKeys = []string{"producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate"}

func quotaCmd(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New(strings.TrimSpace(quotaUsage))
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("quota "+sub, flag.ContinueOnError)
	var cf clientFlags
	cf.register(fs)
	user := fs.String("user", "", "the user (principal name, e.g. alice for User:alice)")
	userDefault := fs.Bool("user-default", false, "the <default> user entity")
	client := fs.String("client-id", "", "the client id")
	clientDefault := fs.Bool("client-id-default", false, "the <default> client-id entity")
	values := map[string]*string{}
	for _, k := range quotaKeys {
		values[k] = fs.String(strings.ReplaceAll(k, "_", "-"), "", "set: "+k)
	}
	keys := fs.String("key", "", "delete: the quota keys to remove, comma-separated (default: all)")
	validateOnly := fs.Bool("validate-only", false, "set: only validate")
	switch sub {
	case "set", "describe", "delete":
	case "-h", "--help", "help":
		fmt.Fprint(stdout, quotaUsage)
		return nil
	default:
		return fmt.Errorf("unknown quota subcommand %q\n%s", sub, quotaUsage)
	}
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("weir quota %s: unexpected arguments %q\n%s", sub, rest, quotaUsage)
	}
	if *user != "" && *userDefault || *client != "" && *clientDefault {
		return errors.New("weir quota: give a name or the default for each entity type, not both")
	}
	var entity kadm.ClientQuotaEntity
	if *user != "" || *userDefault {
		c := kadm.ClientQuotaEntityComponent{Type: "user"}
		if !*userDefault {
			c.Name = user
		}
		entity = append(entity, c)
	}
	if *client != "" || *clientDefault {
		c := kadm.ClientQuotaEntityComponent{Type: "client-id"}
		if !*clientDefault {
			c.Name = client
		}
		entity = append(entity, c)
	}
	if sub != "describe" && len(entity) == 0 {
		return errors.New("weir quota " + sub + ": name the entity: --user U and/or --client-id C (or --user-default, --client-id-default)")
	}
	cl, err := cf.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	switch sub {
	case "set":
		var ops []kadm.AlterClientQuotaOp
		for _, k := range quotaKeys {
			if s := *values[k]; s != "" {
				v, err := strconv.ParseFloat(s, 64)
				if err != nil {
					return fmt.Errorf("--%s %q: %w", strings.ReplaceAll(k, "_", "-"), s, err)
				}
				ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Value: v})
			}
		}
		if len(ops) == 0 {
			return errors.New("weir quota set: no quota given (--producer-byte-rate, --consumer-byte-rate, --request-percentage, --controller-mutation-rate)")
		}
		return alterQuota(ctx, adm, entity, ops, *validateOnly, stdout)
	case "delete":
		var del []string
		if *keys != "" {
			for _, k := range strings.Split(*keys, ",") {
				if k = strings.TrimSpace(k); k != "" {
					del = append(del, k)
				}
			}
		} else {
			got, err := describeQuotas(ctx, adm, entity, true)
			if err != nil {
				return err
			}
			for _, q := range got {
				for _, v := range q.Values {
					del = append(del, v.Key)
				}
			}
			if len(del) == 0 {
				return fmt.Errorf("weir quota delete: %s has no quota", entityString(entity))
			}
		}
		var ops []kadm.AlterClientQuotaOp
		for _, k := range del {
			ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Remove: true})
		}
		return alterQuota(ctx, adm, entity, ops, false, stdout)
	default: // describe
		got, err := describeQuotas(ctx, adm, entity, false)
		if err != nil {
			return err
		}
		lines := make([]string, 0, len(got))
		for _, q := range got {
			vals := make([]string, 0, len(q.Values))
			for _, v := range q.Values {
				vals = append(vals, v.Key+"="+strconv.FormatFloat(v.Value, 'f', -1, 64))
			}
			sort.Strings(vals)
			lines = append(lines, entityString(q.Entity)+"\t"+strings.Join(vals, " "))
		}
		sort.Strings(lines)
		for _, l := range lines {
			fmt.Fprintln(stdout, l)
		}
		return nil
	}
}

func alterQuota(ctx context.Context, adm *kadm.Client, entity kadm.ClientQuotaEntity, ops []kadm.AlterClientQuotaOp, validateOnly bool, stdout io.Writer) error {
	entries := []kadm.AlterClientQuotaEntry{{Entity: entity, Ops: ops}}
	var res kadm.AlteredClientQuotas
	var err error
	if validateOnly {
		res, err = adm.ValidateAlterClientQuotas(ctx, entries)
	} else {
		res, err = adm.AlterClientQuotas(ctx, entries)
	}
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Err != nil {
			return fmt.Errorf("%s: %w: %s", entityString(entity), r.Err, r.ErrMessage)
		}
	}
	verb := "altered"
	if validateOnly {
		verb = "valid"
	}
	fmt.Fprintf(stdout, "%s: %s\n", entityString(entity), verb)
	return nil
}

// describeQuotas lists the quotas of the entities matching entity (all when empty); strict:
// only entity itself.
func describeQuotas(ctx context.Context, adm *kadm.Client, entity kadm.ClientQuotaEntity, strict bool) (kadm.DescribedClientQuotas, error) {
	var comps []kadm.DescribeClientQuotaComponent
	for _, c := range entity {
		dc := kadm.DescribeClientQuotaComponent{Type: c.Type, MatchType: 1}
		if c.Name != nil {
			dc.MatchType, dc.MatchName = 0, c.Name
		}
		comps = append(comps, dc)
	}
	return adm.DescribeClientQuotas(ctx, strict, comps)
}

// entityString prints an entity as user=alice client-id=<default>.
func entityString(e kadm.ClientQuotaEntity) string {
	parts := make([]string, 0, len(e))
	for _, c := range e {
		name := "<default>"
		if c.Name != nil {
			name = *c.Name
		}
		parts = append(parts, c.Type+"="+name)
	}
	return strings.Join(parts, " ")
}

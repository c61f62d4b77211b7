package main

// weir user create|delete|list: SCRAM credentials (AlterUserScramCredentials and
// DescribeUserScramCredentials, through kadm: the password is salted on this side and never
// sent). The first user is created through a PLAINTEXT listener (for example one on
// 127.0.0.1): see docs/security.md.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
)

const userUsage = `usage:
  weir user create NAME --password P [--mechanism SCRAM-SHA-256,SCRAM-SHA-512] [--iterations 8192]
  weir user delete NAME [--mechanism M]   (default: every mechanism the user has)
  weir user list
flags of every subcommand: --bootstrap host:port, and to reach a secured listener
  --tls [--tls-ca ca.pem] [--tls-cert client.pem --tls-key client.key]
  --sasl-mechanism PLAIN|SCRAM-SHA-256|SCRAM-SHA-512 --sasl-user U
  [--sasl-password P | --sasl-password-file F | $WEIR_SASL_PASSWORD]
`

func parseScramMechanism(s string) (kadm.ScramMechanism, error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "SCRAM-SHA-256":
		return kadm.ScramSha256, nil
	case "SCRAM-SHA-512":
		return kadm.ScramSha512, nil
	}
	return 0, fmt.Errorf("mechanism %q: want SCRAM-SHA-256 or SCRAM-SHA-512", s)
}

func userCmd(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New(strings.TrimSpace(userUsage))
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("user "+sub, flag.ContinueOnError)
	var cf clientFlags
	cf.register(fs)
	password := fs.String("password", "", "create: the user's password (default: $WEIR_USER_PASSWORD)")
	mechanism := fs.String("mechanism", "", "create: SCRAM mechanisms, comma-separated (default SCRAM-SHA-256,SCRAM-SHA-512); delete: the one to delete (default: all)")
	iterations := fs.Int("iterations", 8192, "create: SCRAM iterations (4096 to 16384)")
	switch sub {
	case "create", "delete", "list":
	case "-h", "--help", "help":
		fmt.Fprint(stdout, userUsage)
		return nil
	default:
		return fmt.Errorf("unknown user subcommand %q\n%s", sub, userUsage)
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
	case "create":
		if len(names) != 1 {
			return errors.New("usage: weir user create NAME --password P [--mechanism SCRAM-SHA-512] [--iterations 8192]")
		}
		pass := *password
		if pass == "" {
			pass = os.Getenv("WEIR_USER_PASSWORD")
		}
		if pass == "" {
			return errors.New("weir user create: --password (or $WEIR_USER_PASSWORD) is required")
		}
		mechs := *mechanism
		if mechs == "" {
			mechs = "SCRAM-SHA-256,SCRAM-SHA-512"
		}
		var ups []kadm.UpsertSCRAM
		for _, m := range strings.Split(mechs, ",") {
			sm, err := parseScramMechanism(m)
			if err != nil {
				return err
			}
			ups = append(ups, kadm.UpsertSCRAM{User: names[0], Mechanism: sm, Iterations: int32(*iterations), Password: pass})
		}
		res, err := adm.AlterUserSCRAMs(ctx, nil, ups)
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			return fmt.Errorf("create user %s: %w", names[0], err)
		}
		fmt.Fprintf(stdout, "Created or updated user %s (%s, %d iterations)\n", names[0], mechs, *iterations)
	case "delete":
		if len(names) != 1 {
			return errors.New("usage: weir user delete NAME [--mechanism M]")
		}
		var dels []kadm.DeleteSCRAM
		if *mechanism != "" {
			sm, err := parseScramMechanism(*mechanism)
			if err != nil {
				return err
			}
			dels = append(dels, kadm.DeleteSCRAM{User: names[0], Mechanism: sm})
		} else {
			desc, err := adm.DescribeUserSCRAMs(ctx, names[0])
			if err == nil {
				err = desc.Error()
			}
			if err != nil {
				return fmt.Errorf("user %s: %w", names[0], err)
			}
			for _, ci := range desc[names[0]].CredInfos {
				dels = append(dels, kadm.DeleteSCRAM{User: names[0], Mechanism: ci.Mechanism})
			}
		}
		res, err := adm.AlterUserSCRAMs(ctx, dels, nil)
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			return fmt.Errorf("delete user %s: %w", names[0], err)
		}
		fmt.Fprintf(stdout, "Deleted user %s\n", names[0])
	case "list":
		desc, err := adm.DescribeUserSCRAMs(ctx, names...)
		if err == nil {
			err = desc.Error()
		}
		if err != nil {
			return err
		}
		users := make([]string, 0, len(desc))
		for u := range desc {
			users = append(users, u)
		}
		sort.Strings(users)
		for _, u := range users {
			var parts []string
			for _, ci := range desc[u].CredInfos {
				parts = append(parts, fmt.Sprintf("%s (%d iterations)", ci.Mechanism, ci.Iterations))
			}
			sort.Strings(parts)
			fmt.Fprintf(stdout, "%s\t%s\n", u, strings.Join(parts, ", "))
		}
	}
	return nil
}

// Command weir is the weir broker and its tools.
//
//	weir serve [--config server.properties] [--set key=value ...]
//	weir topic create|list|describe|delete [NAME ...] [--bootstrap host:port] [flags]
//	weir produce --topic T [--key-separator SEP] [--acks all|1|0] [--transactional-id ID [--commit-every N]] < lines
//	weir consume --topic T [--from beginning|end|OFFSET] [--max N] [--format '%k\t%v\n']
//	weir group list|describe|delete|reset-offsets [GROUP ...] [flags]
//	weir share-group list|describe|reset-offsets|delete-offsets|delete [GROUP ...] [flags]
//	weir txn list|describe|abort [TXN_ID ...] [flags]
//	weir dev-cluster [-n 3] [--dir ./data-cluster] [--base-port 9092] [--controller-base-port 19093] [--set key=value ...]
//	weir cluster info [--bootstrap host:port]
//	weir user create|delete|list [NAME] [--password P] [--mechanism M] [--sasl-mechanism M --sasl-user U --tls ...]
//	weir bench produce|e2e|txn|consume|disk|report|tools-report [--workload 1topic-16part-1kb-50k] [--out DIR] [flags]
//	weir hist show X.hgrm | weir hist compare A.hgrm B.hgrm [--plot out.png|out.svg]
//	weir config docs
//	weir partition elect --type preferred|unclean (--all | --topic T [--partition N]); weir partition leaders [--topic T]
//	weir acl add|list|remove [--allow|--deny] [--principal User:P] [--operation OP] [--topic T|--group G|--cluster] [--prefixed]
//	weir quota set|describe|delete [--user U|--user-default] [--client-id C|--client-id-default] [--producer-byte-rate N ...]
//	weir partition reassign --topic T [--partition N] --replicas 2,3,4 | --cancel; weir partition reassignments [--topic T]
//
// `weir serve` re-executes itself once at start, same pid, with GODEBUG schedtrace set so the Go
// runtime's system monitor is not woken on every request (sysmon.go; WEIR_SYSMON_DEEP_SLEEP=1
// keeps the runtime's default).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		keepSysmonAwake() // may re-execute the process (sysmon.go)
		err = serve(os.Args[2:])
	case "config":
		err = configCmd(os.Args[2:], os.Stdout)
	case "hist":
		err = histCmd(os.Args[2:], os.Stdout)
	case "topic", "produce", "consume", "group", "share-group", "txn", "bench", "cluster", "dev-cluster", "user", "acl", "partition", "quota":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		switch os.Args[1] {
		case "topic":
			err = topicCmd(ctx, os.Args[2:], os.Stdout)
		case "produce":
			err = produceCmd(ctx, os.Args[2:], os.Stdin, os.Stderr)
		case "consume":
			err = consumeCmd(ctx, os.Args[2:], os.Stdout)
		case "group":
			err = groupCmd(ctx, os.Args[2:], os.Stdout)
		case "share-group":
			err = shareGroupCmd(ctx, os.Args[2:], os.Stdout)
		case "txn":
			err = txnCmd(ctx, os.Args[2:], os.Stdout)
		case "bench":
			err = benchCmd(ctx, os.Args[2:], os.Stdout, os.Stderr)
		case "cluster":
			err = clusterCmd(ctx, os.Args[2:], os.Stdout)
		case "dev-cluster":
			err = devClusterCmd(ctx, os.Args[2:], os.Stdout)
		case "user":
			err = userCmd(ctx, os.Args[2:], os.Stdout)
		case "acl":
			err = aclCmd(ctx, os.Args[2:], os.Stdout)
		case "partition":
			err = partitionCmd(ctx, os.Args[2:], os.Stdout)
		case "quota":
			err = quotaCmd(ctx, os.Args[2:], os.Stdout)
		}
		stop()
	case "-h", "--help", "help":
		usage()
		return
	default:
		fmt.Fprintf(os.Stderr, "weir: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "weir:", err)
		os.Exit(1)
	}
}

func usage() {
	_, _ = os.Stderr.WriteString(`usage: weir <command> [flags]

commands:
  serve    run a broker (no flags: 127.0.0.1:9092, data in ./data)
  dev-cluster
           n brokers on 127.0.0.1, child processes: weir dev-cluster [-n 3] [--dir ./data-cluster] [--base-port 9092]
  cluster  cluster id, controller, brokers, leaderless and under-replicated partitions: weir cluster info
  topic    create, list, describe or delete topics: weir topic create NAME --partitions 3; weir topic describe --under-replicated
  produce  send stdin lines as records: weir produce --topic T [--key-separator :] [--acks all|1|0]
           [--transactional-id ID [--commit-every N]] (in transactions, committed every N records and at the end)
  consume  print records: weir consume --topic T [--from beginning|end|OFFSET] [--max N] [--format '%k\t%v\n']
  group    list (with types), describe (members, KIP-848 epochs and target assignments, lag), delete
           consumer groups, reset their offsets
  share-group
           share groups (KIP-932): list, describe (members, share-partition start offsets, lag),
           reset-offsets --to-earliest|--to-latest|--to-offset N|--to-datetime T, delete-offsets, delete
  txn      transactions: weir txn list [--state Ongoing]; weir txn describe ID; weir txn abort --topic T --partition P --start-offset O
  user     SCRAM users (SASL): weir user create NAME --password P; weir user delete NAME; weir user list
  partition
           leader election and balance: weir partition elect --type preferred|unclean (--all | --topic T [--partition N]);
           weir partition leaders [--topic T] (per broker: preferred partitions, leaderships, preferred not led)
  acl      ACLs (authorizer on): weir acl add --allow --principal User:alice --operation READ --topic T [--prefixed]; weir acl list; weir acl remove --principal User:alice
  quota    client quotas: weir quota set --user alice --client-id c1 --producer-byte-rate 1048576; weir quota describe; weir quota delete --client-id c1
  partition  reassignment: weir partition reassign --topic T [--partition N] --replicas 2,3,4 (or --cancel); weir partition reassignments
  bench    load generator: weir bench produce|e2e|consume [--workload 1topic-16part-1kb-50k] [--out DIR];
           weir bench txn [--commit-every 1000] [--commit-interval 100ms] [--abort-ratio 0.1] (transactional producers, commit latency); weir bench disk --dir D; weir bench report [--update docs/benchmarks.md] DIR...; weir bench cluster failover|catchup --dir D
  config   configuration reference: weir config docs (Markdown: every key, default, meaning; docs/configuration.md)
  hist     latency histograms: weir hist show x.hgrm; weir hist compare a.hgrm b.hgrm [--plot out.png|out.svg]

Client commands take --bootstrap host:port (default 127.0.0.1:9092); 'weir <command> -h' lists flags.
Secured listeners (SSL, SASL_PLAINTEXT, SASL_SSL), with every client command:
  --tls [--tls-ca ca.pem] [--tls-cert client.pem --tls-key client.key] [--tls-server-name NAME]
  --sasl-mechanism PLAIN|SCRAM-SHA-256|SCRAM-SHA-512 --sasl-user U
  [--sasl-password P | --sasl-password-file F | $WEIR_SASL_PASSWORD]
`)
}

// Command weir is the weir broker and its tools. Until the wire protocol lands, `weir serve`
// opens the log dirs (recovering them as after a crash or clean shutdown) and holds them open
// until interrupted.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/weir-mq/weir/engine"
)

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	switch os.Args[1] {
	case "serve":
		if err := serve(os.Args[2:]); err != nil {
			slog.Error("serve", "err", err)
			os.Exit(1)
		}
	default:
		usage()
		os.Exit(2)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: weir serve [-log.dirs ./data]")
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	dirs := fs.String("log.dirs", "./data", "comma-separated log directories")
	if err := fs.Parse(args); err != nil {
		return err
	}
	m, err := engine.OpenManager(engine.ManagerConfig{Dirs: splitComma(*dirs), Default: engine.DefaultConfig()})
	if err != nil {
		return err
	}
	slog.Info("log dirs open", "dirs", *dirs, "partitions", len(m.Logs()))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	slog.Info("shutting down")
	return m.Close()
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}

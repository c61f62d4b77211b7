package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/weir-mq/weir/broker"
)

// setFlags collects repeated --set key=value.
type setFlags map[string]string

func (s setFlags) String() string { return fmt.Sprint(map[string]string(s)) }

func (s setFlags) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("--set wants key=value, got %q", v)
	}
	s[strings.TrimSpace(k)] = strings.TrimSpace(val)
	return nil
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	configPath := fs.String("config", "", "server.properties file (Kafka key names)")
	sets := setFlags{}
	fs.Var(sets, "set", "override one config key: --set key=value (repeatable)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*logLevel)); err != nil {
		return err
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})))
	// Each setting keeps where it came from, so a bad value is refused naming the file and line
	// (or --set) with the key.
	props := broker.Props{Values: map[string]string{}, Origin: map[string]string{}}
	if *configPath != "" {
		p, err := broker.ReadProperties(*configPath)
		if err != nil {
			return err
		}
		props = p
	}
	for k, v := range sets {
		props.Values[k] = v
		props.Origin[k] = "--set"
	}
	cfg, err := broker.NewConfigFrom(props)
	if err != nil {
		return err
	}
	b, err := broker.New(cfg)
	if err != nil {
		return err
	}
	if err := b.Start(); err != nil {
		_ = b.Shutdown(context.Background())
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	s := <-sig
	slog.Info("shutting down", "signal", s.String())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return b.Shutdown(ctx)
}

package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/faults"
)

// TestParse: the flags the script passes, and the refusals.
func TestParse(t *testing.T) {
	o, err := parse([]string{"--bin", "/x/weir", "--out", "/tmp/o", "--nemesis", "partition,pause,kill,disk,clock", "--time-limit", "30", "--runs", "2", "--workload", "txn", "--seed", "7"})
	if err != nil {
		t.Fatal(err)
	}
	if o.timeLimit != 30*time.Second || o.runs != 2 || o.workload != "txn" || o.seed != 7 || strings.Join(o.nemeses, ",") != "partition,pause,kill,disk,clock" {
		t.Errorf("parsed %+v", o)
	}
	if o.broker != faults.BrokerWeir {
		t.Errorf("default broker %q", o.broker)
	}
	t.Setenv("WEIR_KAFKA_LIBS", "")
	k, err := parse([]string{"--broker", "kafka", "--kafka-libs", "/j/libs", "--out", "/tmp/o"})
	if err != nil || k.broker != faults.BrokerKafka || k.kafkaLibs != "/j/libs" {
		t.Errorf("kafka: %+v, %v", k, err)
	}
	for _, bad := range [][]string{
		{"--out", "/tmp/o"},
		{"--broker", "kafka", "--out", "o"},
		{"--broker", "redpanda", "--bin", "w", "--out", "o"},
		{"--bin", "w", "--out", "o", "--nemesis", "flood"},
		{"--bin", "w", "--out", "o", "--workload", "share"},
		{"--bin", "w", "--out", "o", "--runs", "0"},
	} {
		if _, err := parse(bad); err == nil {
			t.Errorf("parse(%q) accepted", bad)
		}
	}
}

// TestSummary: a run's row names what ran, what was injected and what was found, and the
// nemeses that could not run are listed with why.
func TestSummary(t *testing.T) {
	o := options{broker: "weir", workload: "queue", nemeses: []string{"pause", "disk"}, timeLimit: time.Minute}
	rows := []row{
		{n: 1, rep: faults.Report{Seed: 5, Nemeses: []string{"pause", "disk"}, Unavailable: map[string]string{"disk": "not available yet"},
			Duration: 70 * time.Second, Total: faults.OpCounts{OK: 10, Fail: 1, Info: 2}, Valid: true,
			Faults: []faults.Fault{{Family: "pause", Start: 1, End: 2}, {Family: "pause", Start: 3, End: 4}}, MaxUnavailable: 1500 * time.Millisecond}},
		{n: 2, err: errors.New("start cluster: boom")},
	}
	s := summary(o, rows)
	for _, want := range []string{"| 1 | 5 | pause | 70 | 10/1/2 | pause 2 | none | 1.5 s |", "run error: start cluster: boom", "- disk: not available yet"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
}

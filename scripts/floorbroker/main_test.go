package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFloorBrokerTakesProduce: franz-go creates a topic and produces to it (idempotent, acks=all)
// and every record lands in the partition files as v2 batches with consecutive base offsets.
func TestFloorBrokerTakesProduce(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &broker{dir: dir, topics: map[string]*topic{}}
	b.host, b.port = splitHostPort(ln.Addr().String())
	go b.accept(ln)
	defer func() { ln.Close(); b.close() }()

	cl, err := kgo.NewClient(kgo.SeedBrokers(ln.Addr().String()), kgo.DefaultProduceTopic("t"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	const n = 300
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Value: fmt.Appendf(nil, "v%03d", i)}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Error(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	total := 0
	for p := range 3 {
		data, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("t-%d.log", p)))
		if err != nil {
			t.Fatal(err)
		}
		next := int64(0)
		for len(data) > 0 {
			base := int64(binary.BigEndian.Uint64(data))
			l := int(binary.BigEndian.Uint32(data[8:])) + 12
			count := int64(binary.BigEndian.Uint32(data[57:]))
			if base != next || data[16] != 2 {
				t.Fatalf("partition %d: batch at offset %d (want %d), magic %d", p, base, next, data[16])
			}
			next += count
			data = data[l:]
		}
		total += int(next)
	}
	if total != n {
		t.Fatalf("%d records in the files, want %d", total, n)
	}
	if got := b.requests.Load(); got == 0 {
		t.Fatal("no produce request counted")
	}
}

package broker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/record"
)

// TestFaultTxnBatchState: the crash points' reading of __transaction_state batches finds the
// states the coordinator really wrote for a commit (Ongoing, PrepareCommit, CompleteCommit),
// and with WEIR_TEST_FAULT_DIR unset the points are inert: a file naming a point is not read.
func TestFaultTxnBatchState(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(faultDirEnv, "")
	b := startBroker(t, nil)
	if b.faultDir != "" {
		t.Fatalf("fault dir %q with %s unset", b.faultDir, faultDirEnv)
	}
	// Inert: even a matching file in the would-be directory does nothing.
	if err := os.WriteFile(filepath.Join(dir, "node-1"), []byte(faultMarkersBefore), 0o644); err != nil {
		t.Fatal(err)
	}
	b.fault(faultMarkersBefore)

	const topic, id = "fault-state", "fault-state-tx"
	createTopic(t, b.Addr(), topic, 1, nil)
	p := newKgo(t, b.Addr(), kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	part := b.TxnCoordinator().PartitionFor(id)
	want := map[int]bool{1: false, txnValuePrepareCommit: false, txnValueCompleteCommit: false}
	waitFor(t, 10*time.Second, "the commit's records on __transaction_state", func() (bool, string) {
		data := logBytes(t, b.cfg.LogDirs()[0], txnStateTopic, part)
		var seen []int
		for len(data) >= record.HeaderSize {
			h, err := record.ParseHeader(data)
			if err != nil || h.Size() > int64(len(data)) {
				break
			}
			st := txnBatchState(data[:h.Size()])
			seen = append(seen, st)
			if _, ok := want[st]; ok {
				want[st] = true
			}
			data = data[h.Size():]
		}
		for _, ok := range want {
			if !ok {
				return false, fmt.Sprint("states ", seen)
			}
		}
		return true, ""
	})
	if st := txnBatchState([]byte{1, 2, 3}); st != -1 {
		t.Fatalf("a short batch: state %d", st)
	}
}

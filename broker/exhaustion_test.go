package broker

// The attack of creating topics until the broker runs out of descriptors, against a real
// `weir serve` started with a small RLIMIT_NOFILE (ulimit -n in a shell that then execs weir):
// with the default budget the creations past it are refused with POLICY_VIOLATION; with the budget
// off, the kernel's EMFILE refuses log creations (and checkpoint writes) one by one. Either way the
// log dir stays online and the topics created before keep serving. Both with the descriptor caches
// off; with them on (the default) idle partitions hold no descriptor and nothing is refused.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// startWeirLimited runs `weir serve` with RLIMIT_NOFILE lowered to nofile (soft and hard).
func startWeirLimited(t *testing.T, bin, dir string, port, nofile int, sets ...string) *weirProc {
	t.Helper()
	props := map[string]string{"log.flush.offset.checkpoint.interval.ms": "100"}
	for _, s := range sets {
		k, v, _ := strings.Cut(s, "=")
		props[k] = v
	}
	script := fmt.Sprintf("ulimit -n %d && exec \"$0\" \"$@\"", nofile)
	wrap := func(argv []string) []string { return append([]string{"sh", "-c", script}, argv...) }
	return startSingle(t, bin, dir, port, props, wrap)
}

func TestDescriptorExhaustionKeepsLogDirOnline(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the weir binary")
	}
	bin := buildWeir(t, t.TempDir())
	for _, tc := range []struct {
		name string
		sets []string
	}{
		// The descriptor and index caches off (Kafka's behaviour: every segment holds its
		// descriptor), so that the budget and the kernel's limit are what is reached.
		{"budget", []string{"storage.descriptor.cache.size=0", "storage.index.cache.size=0"}},
		{"kernel EMFILE", []string{"storage.descriptor.budget=0", "storage.descriptor.cache.size=0", "storage.index.cache.size=0"}},
		// With the caches on (the default), idle partitions hold no descriptor: 60 topics of 4
		// partitions fit under a limit of 160, none refused.
		{"caches", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := startWeirLimited(t, bin, dir, freePort(t), 160, tc.sets...)
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			cl := newKgo(t, p.addr, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerLinger(0))
			adm := kadm.NewClient(cl)
			if _, err := adm.CreateTopic(ctx, 2, 1, nil, "first"); err != nil {
				t.Fatalf("create the first topic: %v\n%s", err, p.out)
			}
			produce := func(n int) {
				t.Helper()
				for i := range n {
					r := &kgo.Record{Topic: "first", Value: []byte(strconv.Itoa(i))}
					if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
						t.Fatalf("produce to the first topic: %v\n%s", err, p.out)
					}
				}
			}
			produce(20)
			// Create 4-partition topics until refused (budget) or until the broker logs that
			// it ran out (kernel), at most 60 topics.
			refused := false
			var created []string
			last := ""
			for i := 0; i < 60 && !refused; i++ {
				last = fmt.Sprintf("t%02d", i)
				created = append(created, last)
				resps, err := adm.CreateTopics(ctx, 4, 1, nil, last)
				if err != nil {
					t.Logf("create topic %d: %v", i, err)
					continue
				}
				for _, r := range resps {
					switch {
					case r.Err == nil:
					case errors.Is(r.Err, kerr.PolicyViolation) && strings.Contains(r.ErrMessage, "partition budget exhausted"):
						refused = true
						t.Logf("refused after %d topics: %s", i, r.ErrMessage)
					default:
						t.Logf("create topic %d: %v %s", i, r.Err, r.ErrMessage)
					}
				}
				if strings.Contains(p.out.String(), "too many open files") {
					refused = true
					t.Logf("out of descriptors after %d topics", i)
				}
			}
			caches := tc.name == "caches"
			if !refused && !caches {
				t.Fatalf("60 topics created without a refusal\n%s", p.out)
			}
			if refused && caches {
				t.Fatalf("refused with the descriptor caches on\n%s", p.out)
			}
			time.Sleep(500 * time.Millisecond) // a few checkpoint intervals under exhaustion
			produce(20)
			if out := p.out.String(); strings.Contains(out, "log dir offline") {
				t.Fatalf("the log dir went offline\n%s", out)
			}
			ends, err := adm.ListEndOffsets(ctx, "first")
			if err != nil {
				t.Fatal(err)
			}
			var total int64
			ends.Each(func(lo kadm.ListedOffset) { total += lo.Offset })
			if total != 40 {
				t.Fatalf("first topic holds %d records, want 40", total)
			}
			// Deleting topics frees descriptors: the refused topic can then be created (budget),
			// or its refused replicas are created by the replica manager's retry (kernel).
			if _, err := adm.DeleteTopics(ctx, created[:len(created)/2]...); err != nil {
				t.Fatal(err)
			}
			if tc.name == "budget" {
				if _, err := adm.CreateTopic(ctx, 4, 1, nil, last); err != nil {
					t.Fatalf("create %s after deleting topics: %v\n%s", last, err, p.out)
				}
			}
			pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
			defer pcancel()
			for part := range int32(4) {
				r := &kgo.Record{Topic: last, Partition: part, Value: []byte("after")}
				if err := newKgo(t, p.addr, kgo.RecordPartitioner(kgo.ManualPartitioner())).ProduceSync(pctx, r).FirstErr(); err != nil {
					t.Fatalf("produce to %s[%d] after deleting topics: %v\n%s", last, part, err, p.out)
				}
			}
		})
	}
}

package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// mustStop runs a stop function of startStoppableBroker and fails the test on its error.
func mustStop(t *testing.T, stop func() error) {
	t.Helper()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// dirsWithPrefix lists the entries of dir whose name starts with prefix.
func dirsWithPrefix(t *testing.T, dir, prefix string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestDeleteTopicLongName is the 249-character topic: produced to, deleted (no directory left,
// not even a "-delete" one), created again (its first record gets offset 0), and after a
// restart the old records are still gone. Then a deleted topic whose directory stayed behind (a
// removal that failed: put back by hand here) is not adopted again at the next start: the
// directory is deleted as a stray of a deleted topic.
func TestDeleteTopicLongName(t *testing.T) {
	logDir := t.TempDir()
	b, stop := startStoppableBroker(t, map[string]string{"log.dirs": logDir})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	name := strings.Repeat("a.b_c-", 41) + "xyz" // 249 characters of [a-zA-Z0-9._-]
	if len(name) != 249 {
		t.Fatalf("name of %d characters", len(name))
	}
	produce := func(b *Broker, topic string, n int) int64 {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		var first int64 = -1
		for i := 0; i < n; i++ {
			r, err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v"), Partition: 0}).First()
			if err != nil {
				t.Fatalf("produce to %.20s...: %v", topic, err)
			}
			if first < 0 {
				first = r.Offset
			}
		}
		return first
	}
	adm := kadm.NewClient(newKgo(t, b.Addr()))
	createTopic(t, b.Addr(), name, 2, nil)
	produce(b, name, 10)
	resps, err := adm.DeleteTopics(ctx, name)
	if err != nil || resps[name].Err != nil {
		t.Fatalf("delete: %v %v", err, resps[name].Err)
	}
	if left := dirsWithPrefix(t, logDir, name[:100]); len(left) != 0 {
		t.Fatalf("left after the delete: %v", left)
	}
	createTopic(t, b.Addr(), name, 2, nil)
	if off := produce(b, name, 1); off != 0 {
		t.Fatalf("re-created topic: first record at offset %d, want 0", off)
	}
	mustStop(t, stop)

	b, stop = startStoppableBroker(t, map[string]string{"log.dirs": logDir})
	end, err := kadm.NewClient(newKgo(t, b.Addr())).ListEndOffsets(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := end.Lookup(name, 0); o.Offset != 1 {
		t.Fatalf("after restart: log end %d (err %v), want 1", o.Offset, o.Err)
	}

	// A deleted topic's directory left behind is deleted at the next start, not adopted.
	createTopic(t, b.Addr(), "left-behind", 1, nil)
	produce(b, "left-behind", 3)
	mustStop(t, stop)
	saved := filepath.Join(t.TempDir(), "saved")
	if err := os.CopyFS(saved, os.DirFS(filepath.Join(logDir, "left-behind-0"))); err != nil {
		t.Fatal(err)
	}
	b, stop = startStoppableBroker(t, map[string]string{"log.dirs": logDir})
	resps, err = kadm.NewClient(newKgo(t, b.Addr())).DeleteTopics(ctx, "left-behind")
	if err != nil || resps["left-behind"].Err != nil {
		t.Fatalf("delete left-behind: %v %v", err, resps["left-behind"].Err)
	}
	mustStop(t, stop)
	if err := os.CopyFS(filepath.Join(logDir, "left-behind-0"), os.DirFS(saved)); err != nil {
		t.Fatal(err)
	}
	b, stop = startStoppableBroker(t, map[string]string{"log.dirs": logDir})
	defer mustStop(t, stop)
	if _, ok := b.topics.get("left-behind"); ok {
		t.Fatal("a deleted topic was adopted again from its directory")
	}
	if left := dirsWithPrefix(t, logDir, "left-behind"); len(left) != 0 {
		t.Fatalf("deleted topic's directory kept: %v", left)
	}
	createTopic(t, b.Addr(), "left-behind", 1, nil)
	if off := produce(b, "left-behind", 1); off != 0 {
		t.Fatalf("left-behind re-created: first record at offset %d, want 0", off)
	}
}

// TestClusterDeleteTopicWhileBrokerDown: a 249-character topic replicated on three brokers is
// deleted while one of them is stopped. The two running brokers remove their directories at
// once; the stopped one, on restart, finds its directory's topic id tombstoned and deletes it
// (never adopting or serving it); the topic created again starts at offset 0.
func TestClusterDeleteTopicWhileBrokerDown(t *testing.T) {
	c := startCluster(t, 3, nil)
	adm := kadm.NewClient(c.client())
	topic := strings.Repeat("d", 249)
	createReplicatedTopic(t, adm, topic, 1, 3, nil)
	c.waitISR(adm, topic, 3, 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	prod := c.client(kgo.DefaultProduceTopic(topic), kgo.RecordDeliveryTimeout(20*time.Second))
	for i := 0; i < 5; i++ {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("old")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	c.waitISR(adm, topic, 3, 30*time.Second)
	down := 2
	c.signal(down, syscall.SIGTERM)
	one := kadm.NewClient(c.clientAt(c.nodes[0]))
	waitFor(t, 30*time.Second, "topic deleted", func() (bool, string) {
		rs, err := one.DeleteTopics(ctx, topic)
		if err != nil {
			return false, err.Error()
		}
		err = rs[topic].Err
		return err == nil || errors.Is(err, kerr.UnknownTopicOrPartition), fmt.Sprint(err)
	})
	for i := 0; i < 2; i++ {
		waitFor(t, 10*time.Second, fmt.Sprintf("directory removed on broker %d", c.nodes[i].id), func() (bool, string) {
			left := dirsWithPrefix(t, c.nodes[i].dir, topic[:100])
			return len(left) == 0, fmt.Sprint(left)
		})
	}
	if left := dirsWithPrefix(t, c.nodes[down].dir, topic[:100]); len(left) != 1 {
		t.Fatalf("stopped broker's directories: %v, want its partition directory", left)
	}
	c.restart(down)
	waitFor(t, 10*time.Second, "the restarted broker deleted the stray directory", func() (bool, string) {
		left := dirsWithPrefix(t, c.nodes[down].dir, topic[:100])
		return len(left) == 0, fmt.Sprint(left)
	})
	createReplicatedTopic(t, adm, topic, 1, 3, nil)
	c.waitISR(adm, topic, 3, 30*time.Second)
	var r *kgo.Record
	prod = c.client(kgo.DefaultProduceTopic(topic), kgo.RecordDeliveryTimeout(20*time.Second)) // knows the new topic id
	waitFor(t, 30*time.Second, "produce to the re-created topic", func() (bool, string) {
		var err error
		r, err = prod.ProduceSync(ctx, &kgo.Record{Value: []byte("new")}).First()
		return err == nil, fmt.Sprint(err)
	})
	if r.Offset != 0 {
		t.Fatalf("re-created topic: first record at offset %d, want 0", r.Offset)
	}
}

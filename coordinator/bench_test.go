package coordinator

// Benchmarks of the coordinator alone (an in-memory __consumer_offsets, the wall clock): the
// time a rebalance takes once every member has sent its JoinGroup, offset commits per second
// for one group and for 1,000 groups, and the memory a group costs. The broker package
// measures commits through the real, fdatasync'ing log (BenchmarkGroupCommitDurable).
//
//	go test -run '^$' -bench . -benchmem ./coordinator/

import (
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func benchCoordinator(b *testing.B, initialDelay time.Duration) *Coordinator {
	b.Helper()
	c, err := New(Config{Store: newMemStore(50), MinSessionTimeout: time.Second, RetentionCheckInterval: -1,
		InitialRebalanceDelay: initialDelay, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	c.Start()
	if err := c.WaitLoaded(b.Context()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	return c
}

// syncAll sends every member's SyncGroup (the leader's with an assignment for each).
func syncAll(b *testing.B, c *Coordinator, group string, gen int32, ids []string, leader string) {
	var as []Assignment
	for _, id := range ids {
		as = append(as, Assignment{MemberID: id, Assignment: []byte("assignment-of-" + id)})
	}
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := SyncRequest{Group: group, MemberID: id, Generation: gen}
			if id == leader {
				req.Assignments = as
			}
			if r := c.Sync(req)(nil); r.Err != nil {
				b.Errorf("sync: %v", r.Err)
			}
		}()
	}
	wg.Wait()
}

// rebalance has the leader rejoin (which starts a rebalance), then every other member, then
// everyone sync; it returns the time from the last JoinGroup to the last member holding its
// assignment.
func rebalance(b *testing.B, c *Coordinator, group string, ids []string, leader string) time.Duration {
	var wg sync.WaitGroup
	var gen atomic.Int32
	wait := c.Join(joinReq(group, leader))
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := wait(nil)
		if r.Err != nil {
			b.Errorf("leader join: %v", r.Err)
		}
		gen.Store(r.Generation)
	}()
	var lastJoin atomic.Int64
	for _, id := range ids {
		if id == leader {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := c.Join(joinReq(group, id))
			lastJoin.Store(time.Now().UnixNano())
			if r := w(nil); r.Err != nil {
				b.Errorf("join: %v", r.Err)
			}
		}()
	}
	wg.Wait()
	start := time.Unix(0, lastJoin.Load())
	syncAll(b, c, group, gen.Load(), ids, leader)
	return time.Since(start)
}

func BenchmarkRebalance(b *testing.B) {
	for _, n := range []int{10, 100} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			// Members join within the initial delay: one first generation holds them all.
			c := benchCoordinator(b, 500*time.Millisecond)
			group := "bench"
			results := make([]JoinResult, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := joinReq(group, "")
					r.RequireKnownMemberID = false
					results[i] = c.Join(r)(nil)
				}()
			}
			wg.Wait()
			var ids []string
			for _, r := range results {
				if r.Err != nil || r.Generation != 1 {
					b.Fatalf("first join: %+v", r)
				}
				ids = append(ids, r.MemberID)
			}
			leader := results[0].Leader
			syncAll(b, c, group, 1, ids, leader)
			var total time.Duration
			b.ResetTimer()
			for range b.N {
				total += rebalance(b, c, group, ids, leader)
			}
			b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "ms/rebalance")
		})
	}
}

func BenchmarkCommit(b *testing.B) {
	for _, groups := range []int{1, 1000} {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			c := benchCoordinator(b, 0)
			var next atomic.Int64
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := next.Add(1)
					g := fmt.Sprintf("group-%d", i%int64(groups))
					r := c.Commit(CommitRequest{Group: g, Generation: -1, RetentionMs: -1,
						Partitions: []CommitPartition{{TopicPartition: TopicPartition{"topic", int32(i % 16)}, Offset: i, LeaderEpoch: -1}}})()
					if r.Errors[0] != nil {
						b.Error(r.Errors[0])
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "commits/s")
		})
	}
}

// BenchmarkMemoryPerGroup creates groups each holding one stable member and 8 committed
// offsets, and reports the heap and goroutine stack they take per group.
func BenchmarkMemoryPerGroup(b *testing.B) {
	const groups = 2000
	for range b.N {
		c := benchCoordinator(b, 0)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for i := range groups {
			g := fmt.Sprintf("mem-group-%d", i)
			r := joinReq(g, "")
			r.RequireKnownMemberID = false
			res := c.Join(r)(nil)
			c.Sync(SyncRequest{Group: g, MemberID: res.MemberID, Generation: res.Generation,
				Assignments: []Assignment{{res.MemberID, make([]byte, 64)}}})(nil)
			var ps []CommitPartition
			for p := range 8 {
				ps = append(ps, CommitPartition{TopicPartition: TopicPartition{"topic", int32(p)}, Offset: 1, LeaderEpoch: -1})
			}
			c.Commit(CommitRequest{Group: g, Generation: res.Generation, MemberID: res.MemberID, RetentionMs: -1, Partitions: ps})()
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		heap := float64(after.HeapAlloc-before.HeapAlloc) / groups
		stack := float64(after.StackInuse-before.StackInuse) / groups
		b.ReportMetric(heap, "heapB/group")
		b.ReportMetric(stack, "stackB/group")
		c.Close()
	}
}

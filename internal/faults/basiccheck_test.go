package faults

import (
	"strings"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/faults/history"
)

// hist builds a history from ops, numbering them and spacing their times by 1 ms.
func hist(ops ...history.Op) []history.Op {
	for i := range ops {
		ops[i].Index = int64(i)
		ops[i].Time = int64(i) * int64(time.Millisecond)
	}
	return ops
}

func send(proc int, typ history.Type, p int32, o, v int64) history.Op {
	return history.Op{Process: proc, Type: typ, F: history.FSend, Mops: []history.Mop{{Topic: "q", Partition: p, Offset: o, Value: v}}}
}

func poll(proc int, iso string, mops ...history.Mop) history.Op {
	return history.Op{Process: proc, Type: history.OK, F: history.FPoll, Isolation: iso, Mops: mops}
}

func rec(p int32, o, v int64) history.Mop {
	return history.Mop{Topic: "q", Partition: p, Offset: o, Value: v}
}

func final(proc int, typ history.Type) history.Op {
	return history.Op{Process: proc, Type: typ, F: history.FFinalRead}
}

// TestBasicCheck: a clean history is valid; each anomaly is found by name.
func TestBasicCheck(t *testing.T) {
	clean := hist(
		send(1, history.Invoke, 0, -1, 1), send(1, history.OK, 0, 0, 1),
		send(2, history.Invoke, 1, -1, 2), send(2, history.Info, 1, -1, 2),
		send(3, history.Invoke, 0, -1, 3), send(3, history.OK, 0, 1, 3),
		final(9, history.Invoke), poll(9, "", rec(0, 0, 1), rec(0, 1, 3), rec(1, 0, 2)), final(9, history.OK),
	)
	if ok, summary, _ := BasicCheck(clean); !ok {
		t.Errorf("clean history: %s", summary)
	}
	cases := []struct {
		name string
		ops  []history.Op
		kind string
	}{
		{"lost", hist(send(1, history.Invoke, 0, -1, 1), send(1, history.OK, 0, 0, 1),
			final(9, history.Invoke), poll(9, "", rec(0, 1, 5)), final(9, history.OK)), "lost"},
		{"read elsewhere only", hist(send(1, history.Invoke, 0, -1, 1), send(1, history.OK, 0, 0, 1),
			poll(4, "", rec(0, 0, 1)), final(9, history.Invoke), final(9, history.OK)), "lost"},
		{"two values at one offset", hist(poll(4, "", rec(0, 0, 1)),
			final(9, history.Invoke), poll(9, "", rec(0, 0, 2)), final(9, history.OK)), "offset-conflict"},
		{"acked over another", hist(send(1, history.OK, 0, 0, 1), send(2, history.OK, 0, 0, 2),
			final(9, history.Invoke), poll(9, "", rec(0, 0, 1)), final(9, history.OK)), "offset-conflict"},
		{"duplicate", hist(final(9, history.Invoke), poll(9, "", rec(0, 0, 7), rec(0, 1, 7)), final(9, history.OK)), "duplicate"},
		{"aborted read", hist(
			history.Op{Process: 1, Type: history.Fail, F: history.FTxn, Mops: []history.Mop{rec(0, 0, 4)}},
			poll(4, readCommitted, rec(0, 0, 4)), final(9, history.Invoke), final(9, history.OK)), "aborted-read"},
		{"no final read", hist(send(1, history.OK, 0, 0, 1), final(9, history.Invoke)), "no-final-read"},
	}
	for _, c := range cases {
		ok, summary, v := BasicCheck(c.ops)
		bv := v.(*BasicVerdict)
		if ok || bv.Anomalies[c.kind] == 0 || !strings.Contains(summary, c.kind) {
			t.Errorf("%s: valid %v, %s, anomalies %v; want %s", c.name, ok, summary, bv.Anomalies, c.kind)
		}
	}
}

// TestMaxUnavailable: the longest stretch without an acknowledged write within the writes' span.
func TestMaxUnavailable(t *testing.T) {
	ms := func(n int64) int64 { return n * int64(time.Millisecond) }
	at := func(op history.Op, tm int64) history.Op { op.Time = tm; return op }
	ops := []history.Op{
		at(send(1, history.Invoke, 0, -1, 1), ms(0)), at(send(1, history.OK, 0, 0, 1), ms(10)),
		at(send(1, history.Invoke, 0, -1, 2), ms(20)), at(send(1, history.Info, 0, -1, 2), ms(900)),
		at(send(2, history.Invoke, 0, -1, 3), ms(910)), at(send(2, history.OK, 0, 1, 3), ms(1010)),
		at(send(2, history.Invoke, 0, -1, 4), ms(1020)), at(send(2, history.OK, 0, 2, 4), ms(1030)),
	}
	if got := maxUnavailable(ops); got != 1000*time.Millisecond {
		t.Errorf("max unavailable %v, want 1s", got)
	}
	if got := maxUnavailable(nil); got != 0 {
		t.Errorf("no writes: %v", got)
	}
}

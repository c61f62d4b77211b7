package assignor

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

func tid(name string) TopicID {
	var id TopicID
	copy(id[:], name)
	return id
}

// mkTopics builds a topic map from name=count pairs.
func mkTopics(kv ...any) map[TopicID]Topic {
	out := map[TopicID]Topic{}
	for i := 0; i < len(kv); i += 2 {
		name := kv[i].(string)
		out[tid(name)] = Topic{ID: tid(name), Name: name, Partitions: int32(kv[i+1].(int))}
	}
	return out
}

func mem(id string, topics ...string) Member {
	m := Member{ID: id}
	for _, t := range topics {
		m.Subscribed = append(m.Subscribed, tid(t))
	}
	return m
}

// withCurrent sets each member's Current to what a previous result gave it.
func withCurrent(ms []Member, prev Assignment) []Member {
	out := make([]Member, len(ms))
	for i, m := range ms {
		m.Current = prev[m.ID]
		out[i] = m
	}
	return out
}

// names renders a member's assignment as "name:p,p name:p" (topics by name) for table tests.
func render(topics map[TopicID]Topic, ma map[TopicID][]int32) string {
	var names []string
	for id := range ma {
		if len(ma[id]) > 0 {
			names = append(names, topics[id].Name)
		}
	}
	slices.Sort(names)
	s := ""
	for i, n := range names {
		if i > 0 {
			s += " "
		}
		s += n + ":"
		for j, p := range ma[tid(n)] {
			if j > 0 {
				s += ","
			}
			s += fmt.Sprint(p)
		}
	}
	return s
}

func count(ma map[TopicID][]int32) int {
	n := 0
	for _, ps := range ma {
		n += len(ps)
	}
	return n
}

// checkShape checks what every assignor's result must satisfy and, when exclusive, that every
// subscribed partition has exactly one owner (else at least one).
func checkShape(t *testing.T, members []Member, topics map[TopicID]Topic, a Assignment, exclusive bool) {
	t.Helper()
	if len(a) != len(uniqueIDs(members)) {
		t.Fatalf("assignment has %d entries for %d members", len(a), len(uniqueIDs(members)))
	}
	owners := map[TopicID][]int{}
	subscribed := map[TopicID]bool{}
	for _, m := range members {
		ma, ok := a[m.ID]
		if !ok {
			t.Fatalf("member %s has no entry", m.ID)
		}
		for id, ps := range ma {
			tp, known := topics[id]
			if !known || !slices.Contains(m.Subscribed, id) {
				t.Fatalf("member %s given topic %x it does not subscribe to", m.ID, id)
			}
			if !slices.IsSorted(ps) || len(slices.Compact(slices.Clone(ps))) != len(ps) {
				t.Fatalf("member %s topic %s partitions not sorted/unique: %v", m.ID, tp.Name, ps)
			}
			if owners[id] == nil {
				owners[id] = make([]int, tp.Partitions)
			}
			for _, p := range ps {
				if p < 0 || p >= tp.Partitions {
					t.Fatalf("member %s given %s-%d, out of range", m.ID, tp.Name, p)
				}
				owners[id][p]++
			}
		}
		for _, id := range m.Subscribed {
			if _, ok := topics[id]; ok {
				subscribed[id] = true
			}
		}
	}
	for id := range subscribed {
		tp := topics[id]
		for p := int32(0); p < tp.Partitions; p++ {
			n := 0
			if owners[id] != nil {
				n = owners[id][p]
			}
			if n == 0 || (exclusive && n != 1) {
				t.Fatalf("%s-%d has %d owners", tp.Name, p, n)
			}
		}
	}
}

func uniqueIDs(ms []Member) map[string]bool {
	out := map[string]bool{}
	for _, m := range ms {
		out[m.ID] = true
	}
	return out
}

func TestUniformHomogeneousBalanceAndStickiness(t *testing.T) {
	topics := mkTopics("a", 3, "b", 4)
	ms := []Member{mem("m1", "a", "b"), mem("m2", "a", "b"), mem("m3", "a", "b")}
	a, err := Uniform().Assign(ms, topics)
	if err != nil {
		t.Fatal(err)
	}
	checkShape(t, ms, topics, a, true)
	want := map[string]string{"m1": "a:0,1,2", "m2": "b:0,1", "m3": "b:2,3"}
	for id, w := range want {
		if got := render(topics, a[id]); got != w {
			t.Errorf("%s: got %q want %q", id, got, w)
		}
	}

	// A fourth member joins: 7 partitions over 4 members is 2,2,2,1; m1 keeps two of its
	// three, the others keep all theirs, and m4 takes what m1 gave up.
	ms4 := withCurrent(append(ms, mem("m4", "a", "b")), a)
	b, _ := Uniform().Assign(ms4, topics)
	checkShape(t, ms4, topics, b, true)
	want = map[string]string{"m1": "a:0,1", "m2": "b:0,1", "m3": "b:2,3", "m4": "a:2"}
	for id, w := range want {
		if got := render(topics, b[id]); got != w {
			t.Errorf("after join %s: got %q want %q", id, got, w)
		}
	}

	// m2 leaves: its partitions go to the others, who keep theirs.
	ms3 := withCurrent([]Member{ms4[0], ms4[2], ms4[3]}, b)
	c, _ := Uniform().Assign(ms3, topics)
	checkShape(t, ms3, topics, c, true)
	want = map[string]string{"m1": "a:0,1 b:0", "m3": "b:2,3", "m4": "a:2 b:1"}
	for id, w := range want {
		if got := render(topics, c[id]); got != w {
			t.Errorf("after leave %s: got %q want %q", id, got, w)
		}
	}
}

func TestUniformExtraGoesToHolders(t *testing.T) {
	// 5 partitions over 2 members: one gets 3. m2 holds 3 today, so it keeps them, even though
	// member order would give the extra to m1.
	topics := mkTopics("a", 5)
	ms := []Member{mem("m1", "a"), mem("m2", "a")}
	ms[0].Current = map[TopicID][]int32{tid("a"): {0, 1}}
	ms[1].Current = map[TopicID][]int32{tid("a"): {2, 3, 4}}
	a, _ := Uniform().Assign(ms, topics)
	if got := render(topics, a["m2"]); got != "a:2,3,4" {
		t.Fatalf("m2 got %q", got)
	}
	if got := render(topics, a["m1"]); got != "a:0,1" {
		t.Fatalf("m1 got %q", got)
	}
}

func TestUniformSubscriptionChangeAndGrowth(t *testing.T) {
	topics := mkTopics("a", 4, "b", 4)
	ms := []Member{mem("m1", "a", "b"), mem("m2", "a", "b")}
	a, _ := Uniform().Assign(ms, topics)
	checkShape(t, ms, topics, a, true)

	// m2 drops b: heterogeneous now; m1 must take all of b, m2 keeps what it had of a and
	// the result is balanced (4 each).
	ms2 := withCurrent([]Member{mem("m1", "a", "b"), mem("m2", "a")}, a)
	b, _ := Uniform().Assign(ms2, topics)
	checkShape(t, ms2, topics, b, true)
	if len(b["m2"][tid("b")]) != 0 || count(b["m1"]) != 4 || count(b["m2"]) != 4 {
		t.Fatalf("after unsubscribe: m1 %q m2 %q", render(topics, b["m1"]), render(topics, b["m2"]))
	}

	// Partition count growth: a goes 4 -> 8; every member keeps what it had.
	grown := mkTopics("a", 8, "b", 4)
	ms3 := withCurrent(ms, a)
	c, _ := Uniform().Assign(ms3, grown)
	checkShape(t, ms3, grown, c, true)
	for _, m := range ms3 {
		for id, ps := range a[m.ID] {
			for _, p := range ps {
				if !slices.Contains(c[m.ID][id], p) {
					t.Errorf("%s lost %s-%d after growth", m.ID, grown[id].Name, p)
				}
			}
		}
		if count(c[m.ID]) != 6 {
			t.Errorf("%s has %d partitions, want 6", m.ID, count(c[m.ID]))
		}
	}
}

func TestAssignorsEmptyAndUnknown(t *testing.T) {
	for _, as := range []Assignor{Uniform(), Range(), Simple()} {
		t.Run(as.Name(), func(t *testing.T) {
			a, err := as.Assign(nil, mkTopics("a", 3))
			if err != nil || len(a) != 0 {
				t.Fatalf("no members: %v %v", a, err)
			}
			ms := []Member{mem("m1"), mem("m2", "nosuch"), mem("m3", "a", "nosuch")}
			ms[1].Current = map[TopicID][]int32{tid("nosuch"): {0}, tid("a"): {7, -1}}
			a, err = as.Assign(ms, mkTopics("a", 3))
			if err != nil {
				t.Fatal(err)
			}
			if len(a) != 3 || count(a["m1"]) != 0 || count(a["m2"]) != 0 || count(a["m3"]) != 3 {
				t.Fatalf("got %v", a)
			}
			a, err = as.Assign(ms, nil)
			if err != nil || len(a) != 3 || count(a["m3"]) != 0 {
				t.Fatalf("no topics: %v %v", a, err)
			}
			// A zero-partition topic and a duplicate member id.
			ms = []Member{mem("m1", "z", "a"), mem("m1", "z", "a"), mem("m2", "z")}
			a, err = as.Assign(ms, mkTopics("a", 2, "z", 0))
			if err != nil || len(a) != 2 || count(a["m1"]) != 2 {
				t.Fatalf("zero partitions: %v %v", a, err)
			}
		})
	}
}

func TestUniformHeterogeneous(t *testing.T) {
	topics := mkTopics("a", 3, "b", 6, "c", 2)
	ms := []Member{mem("m1", "a"), mem("m2", "a", "b"), mem("m3", "b", "c"), mem("m4", "c")}
	a, _ := Uniform().Assign(ms, topics)
	checkShape(t, ms, topics, a, true)
	checkKafkaBalanced(t, ms, topics, a)
	// 11 partitions, 4 members: the best is 3,3,3,2 and this input reaches it.
	var counts []int
	for _, m := range ms {
		counts = append(counts, count(a[m.ID]))
	}
	slices.Sort(counts)
	if !reflect.DeepEqual(counts, []int{2, 3, 3, 3}) {
		t.Fatalf("counts %v: %v", counts, a)
	}
}

// checkKafkaBalanced checks Kafka's balance criterion: no partition could move from its owner to
// another subscriber of its topic whose count is at least two lower.
func checkKafkaBalanced(t *testing.T, ms []Member, topics map[TopicID]Topic, a Assignment) {
	t.Helper()
	for _, o := range ms {
		for id, ps := range a[o.ID] {
			if len(ps) == 0 {
				continue
			}
			for _, m := range ms {
				if slices.Contains(m.Subscribed, id) && count(a[m.ID])+1 < count(a[o.ID]) {
					t.Fatalf("%s-%d could move from %s (%d) to %s (%d)", topics[id].Name, ps[0], o.ID, count(a[o.ID]), m.ID, count(a[m.ID]))
				}
			}
		}
	}
}

func TestRangeCoPartitioned(t *testing.T) {
	topics := mkTopics("a", 5, "b", 5)
	ms := []Member{mem("m3", "a", "b"), mem("m1", "a", "b"), mem("m2", "a", "b")}
	a, _ := Range().Assign(ms, topics)
	checkShape(t, ms, topics, a, true)
	want := map[string]string{"m1": "a:0,1 b:0,1", "m2": "a:2,3 b:2,3", "m3": "a:4 b:4"}
	for id, w := range want {
		if got := render(topics, a[id]); got != w {
			t.Errorf("%s: got %q want %q", id, got, w)
		}
	}
	// m4 joins: 5 over 4 is 2,1,1,1; m1 keeps both (it takes the extra slot), m2 keeps its
	// lowest, m3 keeps its one, m4 gets what is left, on both topics alike.
	ms2 := withCurrent(append(ms, mem("m4", "a", "b")), a)
	b, _ := Range().Assign(ms2, topics)
	checkShape(t, ms2, topics, b, true)
	want = map[string]string{"m1": "a:0,1 b:0,1", "m2": "a:2 b:2", "m3": "a:4 b:4", "m4": "a:3 b:3"}
	for id, w := range want {
		if got := render(topics, b[id]); got != w {
			t.Errorf("after join %s: got %q want %q", id, got, w)
		}
	}
	// Heterogeneous: b's subscribers are only m1 and m2.
	ms3 := []Member{mem("m1", "a", "b"), mem("m2", "a", "b"), mem("m3", "a")}
	c, _ := Range().Assign(ms3, topics)
	checkShape(t, ms3, topics, c, true)
	want = map[string]string{"m1": "a:0,1 b:0,1,2", "m2": "a:2,3 b:3,4", "m3": "a:4"}
	for id, w := range want {
		if got := render(topics, c[id]); got != w {
			t.Errorf("heterogeneous %s: got %q want %q", id, got, w)
		}
	}
}

func TestSimpleSharing(t *testing.T) {
	topics := mkTopics("a", 2)
	var ms []Member
	for i := range 5 {
		ms = append(ms, mem(fmt.Sprintf("m%d", i), "a"))
	}
	a, _ := Simple().Assign(ms, topics)
	checkShape(t, ms, topics, a, false)
	// 5 members, 2 partitions: each partition to ceil(5/2)=3 members, 6 assignments in all:
	// 2,1,1,1,1.
	holders := make([]int, 2)
	for i, m := range ms {
		want := 1
		if i == 0 {
			want = 2
		}
		if count(a[m.ID]) != want {
			t.Errorf("%s has %d partitions, want %d", m.ID, count(a[m.ID]), want)
		}
		for _, p := range a[m.ID][tid("a")] {
			holders[p]++
		}
	}
	if holders[0] != 3 || holders[1] != 3 {
		t.Errorf("holders %v, want 3 each", holders)
	}

	// Fewer members than partitions: no sharing, balanced and sticky.
	topics = mkTopics("a", 5)
	ms = []Member{mem("m1", "a"), mem("m2", "a")}
	a, _ = Simple().Assign(ms, topics)
	checkShape(t, ms, topics, a, true)
	if count(a["m1"]) != 3 || count(a["m2"]) != 2 {
		t.Fatalf("got %v", a)
	}
	ms2 := withCurrent(append(ms, mem("m3", "a")), a)
	b, _ := Simple().Assign(ms2, topics)
	checkShape(t, ms2, topics, b, true)
	for _, m := range ms {
		kept := 0
		for _, p := range b[m.ID][tid("a")] {
			if slices.Contains(a[m.ID][tid("a")], p) {
				kept++
			}
		}
		if kept != count(b[m.ID]) {
			t.Errorf("%s moved partitions: before %v after %v", m.ID, a[m.ID], b[m.ID])
		}
	}

	// Heterogeneous: each topic is shared among its own subscribers.
	topics = mkTopics("a", 2, "b", 1)
	ms = []Member{mem("m1", "a"), mem("m2", "a", "b"), mem("m3", "b")}
	c, _ := Simple().Assign(ms, topics)
	checkShape(t, ms, topics, c, false)
	if got := render(topics, c["m1"]); got != "a:0" {
		t.Errorf("m1 %q", got)
	}
	if got := render(topics, c["m2"]); got != "a:1 b:0" {
		t.Errorf("m2 %q", got)
	}
	if got := render(topics, c["m3"]); got != "b:0" {
		t.Errorf("m3 %q", got)
	}
}

// randomGroup makes a random group: up to 12 topics of up to 40 partitions, up to 30 members,
// each subscribing to a random subset (homogeneous when homo), some with unknown topics.
func randomGroup(r *rand.Rand, homo bool) ([]Member, map[TopicID]Topic) {
	topics := map[TopicID]Topic{}
	nt := 1 + r.IntN(12)
	var names []string
	for i := range nt {
		n := fmt.Sprintf("t%02d", i)
		names = append(names, n)
		topics[tid(n)] = Topic{ID: tid(n), Name: n, Partitions: int32(r.IntN(40))}
	}
	nm := 1 + r.IntN(30)
	var common []string
	for _, n := range names {
		if r.IntN(2) == 0 {
			common = append(common, n)
		}
	}
	var ms []Member
	for i := range nm {
		subs := common
		if !homo {
			subs = nil
			for _, n := range names {
				if r.IntN(3) == 0 {
					subs = append(subs, n)
				}
			}
			if r.IntN(10) == 0 {
				subs = append(subs, "unknown")
			}
		}
		ms = append(ms, mem(fmt.Sprintf("member-%03d", i), subs...))
	}
	return ms, topics
}

// churn makes the next generation of a group: members leave and join, partitions grow, and the
// survivors carry their previous assignment as Current.
func churn(r *rand.Rand, ms []Member, topics map[TopicID]Topic, prev Assignment, homo bool) ([]Member, map[TopicID]Topic) {
	next := map[TopicID]Topic{}
	for id, tp := range topics {
		if r.IntN(4) == 0 {
			tp.Partitions += int32(r.IntN(10))
		}
		next[id] = tp
	}
	var out []Member
	for _, m := range ms {
		if r.IntN(4) != 0 {
			m.Current = prev[m.ID]
			out = append(out, m)
		}
	}
	for i := range r.IntN(5) {
		nm := mem(fmt.Sprintf("new-%d-%d", r.Uint64(), i))
		if homo || r.IntN(2) == 0 {
			nm.Subscribed = ms[0].Subscribed
		} else {
			nm.Subscribed = ms[r.IntN(len(ms))].Subscribed
		}
		out = append(out, nm)
	}
	if len(out) == 0 {
		out = append(out, Member{ID: "last", Subscribed: ms[0].Subscribed})
	}
	return out, next
}

func TestAssignorProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := range 400 {
		homo := iter%2 == 0
		ms, topics := randomGroup(r, homo)
		for gen := range 3 {
			for _, as := range []Assignor{Uniform(), Range(), Simple()} {
				name := fmt.Sprintf("%s/iter%d/gen%d/homo=%v", as.Name(), iter, gen, homo)
				a, err := as.Assign(ms, topics)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				again, _ := as.Assign(ms, topics)
				if !reflect.DeepEqual(a, again) {
					t.Fatalf("%s: not deterministic", name)
				}
				t.Run(name, func(t *testing.T) {
					checkShape(t, ms, topics, a, as.Name() != "simple")
					switch as.Name() {
					case "uniform":
						checkKafkaBalanced(t, ms, topics, a)
						if homo {
							checkUniformHomogeneous(t, ms, topics, a)
						}
					case "range":
						checkRangeBalanced(t, ms, topics, a)
					case "simple":
						checkSimple(t, ms, topics, a, homo)
					}
				})
			}
			prev, _ := Uniform().Assign(ms, topics)
			ms, topics = churn(r, ms, topics, prev, homo)
		}
	}
}

// checkUniformHomogeneous: counts differ by at most one, and every member keeps
// min(current, floor(total/members)) of its current partitions.
func checkUniformHomogeneous(t *testing.T, ms []Member, topics map[TopicID]Topic, a Assignment) {
	t.Helper()
	total := 0
	for _, id := range ms[0].Subscribed {
		total += int(topics[id].Partitions)
	}
	lo, hi := total, 0
	for _, m := range ms {
		c := count(a[m.ID])
		lo, hi = min(lo, c), max(hi, c)
	}
	if hi-lo > 1 {
		t.Fatalf("counts from %d to %d", lo, hi)
	}
	fair := total / len(ms)
	claimed := map[[2]any]bool{}
	for _, m := range ms {
		cur, kept := 0, 0
		for id, ps := range m.Current {
			tp, ok := topics[id]
			if !ok || !slices.Contains(m.Subscribed, id) {
				continue
			}
			for _, p := range ps {
				k := [2]any{id, p}
				if p < 0 || p >= tp.Partitions || claimed[k] {
					continue
				}
				claimed[k] = true
				cur++
				if slices.Contains(a[m.ID][id], p) {
					kept++
				}
			}
		}
		if kept < min(cur, fair) {
			t.Fatalf("%s kept %d of %d current partitions, fair share %d", m.ID, kept, cur, fair)
		}
	}
}

// checkRangeBalanced: per topic, subscribers' counts differ by at most one.
func checkRangeBalanced(t *testing.T, ms []Member, topics map[TopicID]Topic, a Assignment) {
	t.Helper()
	for id, tp := range topics {
		lo, hi, n := int(tp.Partitions), 0, 0
		for _, m := range ms {
			if slices.Contains(m.Subscribed, id) {
				c := len(a[m.ID][id])
				lo, hi, n = min(lo, c), max(hi, c), n+1
			}
		}
		if n > 0 && hi-lo > 1 {
			t.Fatalf("topic %s: counts from %d to %d", tp.Name, lo, hi)
		}
	}
}

// checkSimple: no partition has more holders than the desired sharing, and in homogeneous
// groups members' counts differ by at most one when each partition has one holder.
func checkSimple(t *testing.T, ms []Member, topics map[TopicID]Topic, a Assignment, homo bool) {
	t.Helper()
	for id, tp := range topics {
		if tp.Partitions == 0 {
			continue
		}
		subs := 0
		for _, m := range uniqueMembers(ms) {
			if slices.Contains(m.Subscribed, id) {
				subs++
			}
		}
		if subs == 0 {
			continue
		}
		holders := make([]int, tp.Partitions)
		for _, m := range uniqueMembers(ms) {
			for _, p := range a[m.ID][id] {
				holders[p]++
			}
		}
		limit := (subs + int(tp.Partitions) - 1) / int(tp.Partitions)
		if homo {
			total := 0
			for _, sid := range ms[0].Subscribed {
				if st, ok := topics[sid]; ok {
					total += int(st.Partitions)
				}
			}
			limit = (subs + total - 1) / total
		}
		for p, h := range holders {
			if h > limit {
				t.Fatalf("%s-%d has %d holders, limit %d", tp.Name, p, h, limit)
			}
		}
	}
}

func uniqueMembers(ms []Member) []Member {
	seen := map[string]bool{}
	var out []Member
	for _, m := range ms {
		if !seen[m.ID] {
			seen[m.ID] = true
			out = append(out, m)
		}
	}
	return out
}

// benchGroup is 1,000 members over 100 topics of 100 partitions (10,000 partitions); in the
// heterogeneous one member i subscribes to the topics t with (t+i)%4 != 0.
func benchGroup(homo bool) ([]Member, map[TopicID]Topic) {
	topics := map[TopicID]Topic{}
	var names []string
	for i := range 100 {
		n := fmt.Sprintf("topic-%03d", i)
		names = append(names, n)
		topics[tid(n)] = Topic{ID: tid(n), Name: n, Partitions: 100}
	}
	ms := make([]Member, 1000)
	for i := range ms {
		var subs []string
		for ti, n := range names {
			if homo || (ti+i)%4 != 0 {
				subs = append(subs, n)
			}
		}
		ms[i] = mem(fmt.Sprintf("member-%04d", i), subs...)
	}
	return ms, topics
}

func BenchmarkAssign(b *testing.B) {
	for _, as := range []Assignor{Uniform(), Range(), Simple()} {
		for _, homo := range []bool{true, false} {
			kind := "heterogeneous"
			if homo {
				kind = "homogeneous"
			}
			ms, topics := benchGroup(homo)
			b.Run(as.Name()+"/"+kind+"/fresh", func(b *testing.B) {
				for b.Loop() {
					if _, err := as.Assign(ms, topics); err != nil {
						b.Fatal(err)
					}
				}
			})
			// Sticky: the previous assignment as Current, one member gone and one new.
			prev, _ := as.Assign(ms, topics)
			next := withCurrent(ms[1:], prev)
			next = append(next, Member{ID: "member-new", Subscribed: ms[0].Subscribed})
			b.Run(as.Name()+"/"+kind+"/sticky", func(b *testing.B) {
				for b.Loop() {
					if _, err := as.Assign(next, topics); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

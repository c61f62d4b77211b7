package checker

import (
	"fmt"
	"slices"
	"strings"

	"github.com/weir-mq/weir/internal/faults/history"
)

// Node kinds of the happens-before graph (see doc.go, "G1c").
const (
	nLine   uint8 = iota // an invoke or completion line; ref = line position
	nCommit              // a committed txn's commit decision; ref = op
	nRecord              // a committed txn's record; ref = val
)

// graph is a directed graph in compressed sparse row form, built from an edge list.
type graph struct {
	kind []uint8
	ref  []int32
	// src and dst are the edges while building; start and adj the rows after freeze.
	src, dst   []int32
	start, adj []int32
}

func (g *graph) node(kind uint8, ref int32) int32 {
	g.kind = append(g.kind, kind)
	g.ref = append(g.ref, ref)
	return int32(len(g.kind) - 1)
}

func (g *graph) edge(a, b int32) {
	g.src = append(g.src, a)
	g.dst = append(g.dst, b)
}

// freeze turns the edge list into rows.
func (g *graph) freeze() {
	n := len(g.kind)
	g.start = make([]int32, n+1)
	for _, s := range g.src {
		g.start[s+1]++
	}
	for i := 1; i <= n; i++ {
		g.start[i] += g.start[i-1]
	}
	g.adj = make([]int32, len(g.src))
	fill := slices.Clone(g.start[:n])
	for i, s := range g.src {
		g.adj[fill[s]] = g.dst[i]
		fill[s]++
	}
	g.src, g.dst = nil, nil
}

func (g *graph) out(v int32) []int32 { return g.adj[g.start[v]:g.start[v+1]] }

// checkCycles builds the happens-before graph of committed transactions, their records and
// the polls that read them, and reports each strongly connected component as a G1c cycle.
func (c *check) checkCycles() {
	var g graph
	commit := make(map[int32]int32)         // txn op -> its commit node
	lineNode := make([]int32, len(c.lines)) // line position -> node, -1: none
	rec := make([]int32, len(c.vals))       // val -> record node, -1: none
	for i := range lineNode {
		lineNode[i] = -1
	}
	for i := range rec {
		rec[i] = -1
	}
	line := func(pos int32) int32 {
		if n := lineNode[pos]; n >= 0 {
			return n
		}
		n := g.node(nLine, pos)
		lineNode[pos] = n
		return n
	}

	// Records of committed txns, with their txn's invoke, commit and completion.
	for v := range c.vals {
		x := &c.vals[v]
		if x.wkind != wTxn || !c.committed[x.writer] || x.off < 0 {
			continue
		}
		t := x.writer
		cn, ok := commit[t]
		if !ok {
			cn = g.node(nCommit, t)
			commit[t] = cn
			if c.ops[t].typ == history.OK {
				g.edge(cn, line(c.ops[t].comp))
			}
		}
		r := g.node(nRecord, int32(v))
		rec[int32(v)] = r
		g.edge(line(c.ops[t].inv), r)
		g.edge(r, cn)
	}
	if len(commit) == 0 {
		return
	}
	// Log order: consecutive records of committed txns in each partition.
	for _, pt := range c.parts {
		prev := int32(-1)
		for _, e := range pt.log {
			r := rec[e.v]
			if r < 0 || c.vals[e.v].off != e.off {
				continue
			}
			if prev >= 0 {
				g.edge(prev, r)
			}
			prev = r
		}
	}
	// Reads: a read_committed poll ends after the commit of each txn it read; any poll ends after
	// the records it read were appended.
	for i := range c.ops {
		o := int32(i)
		if c.inv(o).F != history.FPoll || c.ops[i].typ != history.OK {
			continue
		}
		rc := c.inv(o).Isolation == readCommitted || c.comp(o).Isolation == readCommitted
		end, lastTxn := int32(-1), int32(-1)
		for _, m := range c.mopsOf(o) {
			v, ok := c.valIDs[pv{c.partIDs[tp{m.Topic, m.Partition}], m.Value}]
			if !ok {
				continue
			}
			r := rec[v]
			if r < 0 {
				continue
			}
			if end < 0 {
				end = line(c.ops[i].comp)
			}
			if !rc {
				g.edge(r, end)
			} else if t := c.vals[v].writer; t != lastTxn {
				g.edge(commit[t], end)
				lastTxn = t
			}
		}
	}
	// Real time: the lines in history order.
	prev := int32(-1)
	for _, n := range lineNode {
		if n >= 0 {
			if prev >= 0 {
				g.edge(prev, n)
			}
			prev = n
		}
	}
	g.freeze()

	inSCC := make([]int32, len(g.kind))
	for i := range inSCC {
		inSCC[i] = -1
	}
	sccs := 0
	tarjan(&g, func(comp []int32) {
		if len(comp) < 2 {
			return
		}
		sccs++
		a := c.res.anomaly(KindG1c)
		a.Count++
		if len(a.Examples) >= maxExamples {
			return
		}
		for _, v := range comp {
			inSCC[v] = int32(sccs)
		}
		start := comp[0]
		for _, v := range comp {
			if g.kind[v] != nLine {
				start = v
				break
			}
		}
		a.Examples = append(a.Examples, c.explainCycle(&g, shortestCycle(&g, start, inSCC, int32(sccs)), len(comp)))
	})
}

// shortestCycle returns the nodes of a shortest cycle through start inside the component
// marked scc, by breadth-first search.
func shortestCycle(g *graph, start int32, inSCC []int32, scc int32) []int32 {
	parent := map[int32]int32{start: -1}
	queue := []int32{start}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		for _, w := range g.out(v) {
			if inSCC[w] != scc {
				continue
			}
			if w == start {
				var cyc []int32
				for u := v; u >= 0; u = parent[u] {
					cyc = append(cyc, u)
				}
				slices.Reverse(cyc)
				return cyc
			}
			if _, seen := parent[w]; !seen {
				parent[w] = v
				queue = append(queue, w)
			}
		}
	}
	return []int32{start}
}

// maxCycleSteps bounds the steps of a cycle an example spells out.
const maxCycleSteps = 16

// explainCycle renders a cycle as an example: the ops involved and each step.
func (c *check) explainCycle(g *graph, cyc []int32, size int) Example {
	ex := Example{Partition: -1, Offset: -1}
	var ops []int32
	addOp := func(o int32) {
		if !slices.Contains(ops, o) {
			ops = append(ops, o)
		}
	}
	var steps []string
	txns, polls := 0, 0
	for i, v := range cyc {
		var s string
		switch g.kind[v] {
		case nLine:
			o := c.lineOp[g.ref[v]]
			addOp(o)
			l := &c.lines[g.ref[v]]
			if l.Type == history.Invoke {
				s = fmt.Sprintf("%s %d invoked", l.F, c.index(o))
			} else {
				s = fmt.Sprintf("%s %d completed", l.F, c.index(o))
			}
			if next := cyc[(i+1)%len(cyc)]; g.kind[next] == nLine {
				s += ", before"
			}
		case nCommit:
			addOp(g.ref[v])
			s = fmt.Sprintf("txn %d committed", c.index(g.ref[v]))
		case nRecord:
			x := &c.vals[g.ref[v]]
			addOp(x.writer)
			pt := c.parts[x.part]
			s = fmt.Sprintf("txn %d appended %d at %s/%d@%d", c.index(x.writer), x.value, pt.topic, pt.partition, x.off)
		}
		steps = append(steps, s)
	}
	if len(steps) > maxCycleSteps {
		steps = append(steps[:maxCycleSteps:maxCycleSteps], fmt.Sprintf("... (%d more steps)", len(steps)-maxCycleSteps))
	}
	for _, o := range ops {
		ex.Ops = append(ex.Ops, c.index(o))
		if c.inv(o).F == history.FTxn {
			txns++
		} else {
			polls++
		}
	}
	slices.Sort(ex.Ops)
	ex.Detail = fmt.Sprintf("cycle of %d txn(s) and %d poll(s) (component of %d events): %s -> back to the start",
		txns, polls, size, strings.Join(steps, " -> "))
	return ex
}

// tarjan calls emit with each strongly connected component of g (Tarjan's algorithm, without
// recursion).
func tarjan(g *graph, emit func([]int32)) {
	n := len(g.kind)
	index := make([]int32, n)
	low := make([]int32, n)
	on := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var stack []int32
	type frame struct{ v, next int32 }
	var call []frame
	next := int32(0)
	for root := int32(0); root < int32(n); root++ {
		if index[root] >= 0 {
			continue
		}
		call = append(call, frame{root, g.start[root]})
		index[root], low[root] = next, next
		next++
		stack = append(stack, root)
		on[root] = true
		for len(call) > 0 {
			f := &call[len(call)-1]
			v := f.v
			if f.next < g.start[v+1] {
				w := g.adj[f.next]
				f.next++
				if index[w] < 0 {
					index[w], low[w] = next, next
					next++
					stack = append(stack, w)
					on[w] = true
					call = append(call, frame{w, g.start[w]})
				} else if on[w] && index[w] < low[v] {
					low[v] = index[w]
				}
				continue
			}
			call = call[:len(call)-1]
			if len(call) > 0 {
				if p := call[len(call)-1].v; low[v] < low[p] {
					low[p] = low[v]
				}
			}
			if low[v] == index[v] {
				k := len(stack) - 1
				for stack[k] != v {
					k--
				}
				comp := stack[k:]
				for _, w := range comp {
					on[w] = false
				}
				emit(comp)
				stack = stack[:k]
			}
		}
	}
}

package coordinator

import (
	"errors"
	"sync"
	"time"

	"github.com/weir-mq/weir/record"
)

// loadedGroup is what a partition's records say about one group (last value per key wins,
// tombstones delete).
type loadedGroup struct {
	meta    *groupValue
	offsets map[TopicPartition]offsetValue
	// txn: pending transactional offsets per producer id (no end marker read yet).
	txn map[int64]*txnOffsets
	// cg and sg are a KIP-848 consumer group's and a KIP-932 share group's records (nil when
	// none were read): consumer_load.go and share_load.go.
	cg *loadedConsumerGroup
	sg *loadedShareGroup
}

// loaded is what loading one partition found: its groups, and the offset after the last batch
// read (end markers from CompleteTxn at or past it were not replayed).
type loaded struct {
	groups map[string]*loadedGroup
	end    int64
}

// loadAll loads every existing partition of __consumer_offsets, LoadThreads at a time.
func (c *Coordinator) loadAll() {
	defer close(c.loaded)
	sem := make(chan struct{}, c.cfg.LoadThreads)
	var wg sync.WaitGroup
	for p := int32(0); p < c.parts; p++ {
		l, ok := c.cfg.Store.Existing(p)
		if !ok {
			c.setPartState(p, partLoaded)
			continue
		}
		select {
		case <-c.quit:
			wg.Wait()
			return
		case sem <- struct{}{}:
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			start := time.Now()
			ld, err := c.loadPartition(p, l)
			if err != nil {
				c.log.Error("loading __consumer_offsets partition failed; its groups are unavailable", "partition", p, "err", err)
				c.setPartState(p, partFailed)
				return
			}
			c.installGroups(p, l, ld)
			if len(ld.groups) > 0 {
				c.log.Info("loaded __consumer_offsets partition", "partition", p, "groups", len(ld.groups), "took", time.Since(start))
			}
		}()
	}
	wg.Wait()
}

func (c *Coordinator) setPartState(p int32, s int8) {
	c.mu.Lock()
	c.pstate[p] = s
	c.mu.Unlock()
}

// loadPartition replays partition p. It reads the log again (a few times at most) when more end
// markers arrived meanwhile than CompleteTxn keeps.
func (c *Coordinator) loadPartition(p int32, l OffsetsLog) (*loaded, error) {
	for attempt := 0; ; attempt++ {
		ld, err := c.replayPartition(l)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		again := c.reloadAfter[p]
		c.reloadAfter[p] = false
		c.mu.Unlock()
		if !again {
			return ld, nil
		}
		if attempt == 3 {
			return nil, errors.New("transaction markers keep arriving faster than the partition loads")
		}
	}
}

// replayPartition replays one partition: the last value per key wins, tombstones delete (the
// committed offset and every pending one of the partition, as Kafka's replay), a transactional
// batch's offsets are pending under its producer id until that producer's end marker (a COMMIT
// makes them committed where their record is later than the committed one's, an ABORT drops
// them), and a transaction with no marker yet stays pending.
func (c *Coordinator) replayPartition(l OffsetsLog) (*loaded, error) {
	groups := map[string]*loadedGroup{}
	// open names the groups holding pending offsets of each producer id.
	open := map[int64]map[string]struct{}{}
	get := func(id string) *loadedGroup {
		lg := groups[id]
		if lg == nil {
			lg = &loadedGroup{offsets: map[TopicPartition]offsetValue{}, txn: map[int64]*txnOffsets{}}
			groups[id] = lg
		}
		return lg
	}
	drop := func(id string, lg *loadedGroup) {
		if lg.meta == nil && lg.cg == nil && lg.sg == nil && len(lg.offsets) == 0 && len(lg.txn) == 0 {
			delete(groups, id)
		}
	}
	onMarker := func(h *record.Header, typ int16) error {
		if typ != controlAbort && typ != controlCommit {
			return nil // a raft control record: not a transaction's end
		}
		for id := range open[h.ProducerID] {
			if lg := groups[id]; lg != nil {
				endTxn(lg.offsets, lg.txn, h.ProducerID, typ == controlCommit, h.BaseOffset)
				drop(id, lg)
			}
		}
		delete(open, h.ProducerID)
		return nil
	}
	skipped := 0
	var end int64
	err := l.ReadBatches(func(batch []byte) error {
		err := readBatch(batch, onMarker, func(h *record.Header, offset int64, key, value []byte) error {
			k, err := parseKey(key)
			if err != nil {
				if errors.Is(err, errUnknownKeyVersion) && c.replayGroupRecord(get, key, value) {
					return nil
				}
				skipped++ // another coordinator's record type, or garbage: not ours
				return nil
			}
			if k.IsOffset {
				tp := TopicPartition{k.Topic, k.Partition}
				if value == nil {
					if lg := groups[k.Group]; lg != nil {
						delete(lg.offsets, tp)
						dropPending(lg.txn, tp)
						drop(k.Group, lg)
					}
					return nil
				}
				v, err := parseOffsetValue(value)
				if err != nil {
					skipped++
					return nil
				}
				v.recordOffset = offset
				lg := get(k.Group)
				if !h.IsTransactional() || h.ProducerID < 0 {
					lg.offsets[tp] = v
					return nil
				}
				t := lg.txn[h.ProducerID]
				if t == nil {
					t = &txnOffsets{offsets: map[TopicPartition]offsetValue{}}
					lg.txn[h.ProducerID] = t
				}
				t.epoch = h.ProducerEpoch
				t.offsets[tp] = v
				gs := open[h.ProducerID]
				if gs == nil {
					gs = map[string]struct{}{}
					open[h.ProducerID] = gs
				}
				gs[k.Group] = struct{}{}
				return nil
			}
			if value == nil {
				if lg := groups[k.Group]; lg != nil {
					// A group tombstone: Kafka writes offset tombstones with it; drop the
					// metadata (offsets committed later stay).
					lg.meta = nil
					drop(k.Group, lg)
				}
				return nil
			}
			v, err := parseGroupValue(value)
			if err != nil {
				skipped++
				return nil
			}
			get(k.Group).meta = v
			return nil
		})
		if h, herr := record.ParseHeader(batch); herr == nil && h.NextOffset() > end {
			end = h.NextOffset()
		}
		if errors.Is(err, errUnreadable) {
			skipped++
			return nil
		}
		return err
	})
	if skipped > 0 {
		c.log.Warn("skipped __consumer_offsets records weir does not understand", "records", skipped)
	}
	for id, lg := range groups {
		drop(id, lg)
	}
	return &loaded{groups: groups, end: end}, err
}

// installGroups creates the loaded groups and marks the partition loaded. Members of a loaded
// stable group must heartbeat within their session timeout, as after a coordinator failover.
func (c *Coordinator) installGroups(p int32, l OffsetsLog, ld *loaded) {
	c.installGroupsGen(p, l, ld, 0)
}

// installGroupsGen is installGroups for an Elect of ownership generation gen (0: any).
func (c *Coordinator) installGroupsGen(p int32, l OffsetsLog, ld *loaded, gen uint64) {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || gen != 0 && c.pgen[p] != gen {
		return
	}
	groups := ld.groups
	// End markers written while the partition loaded and not read by the load.
	if len(c.deferred[p]) > 0 {
		byProducer := map[int64][]*loadedGroup{}
		for _, lg := range groups {
			for pid := range lg.txn {
				byProducer[pid] = append(byProducer[pid], lg)
			}
		}
		for _, m := range c.deferred[p] {
			if m.offset < ld.end {
				continue
			}
			for _, lg := range byProducer[m.producerID] {
				endTxn(lg.offsets, lg.txn, m.producerID, m.commit, m.offset)
			}
		}
	}
	c.deferred[p] = nil
	c.txnOpen[p] = nil
	for id, lg := range groups {
		if PartitionFor(id, c.parts) != p {
			continue // written under another partition count: not reachable here
		}
		g := newGroup(c, id, p)
		g.olog = l
		g.offsets = lg.offsets
		if len(lg.txn) > 0 {
			g.txn = lg.txn
		}
		c.installGroupRecords(g, lg, now)
		for pid := range g.txn {
			c.txnIndexAddLocked(p, pid, id)
		}
		if m := lg.meta; m != nil {
			g.protocolType = m.ProtocolType
			g.generation = m.Generation
			if m.Protocol != nil {
				g.protocol = *m.Protocol
			}
			if m.CurrentStateTimestamp >= 0 {
				g.stateSince = time.UnixMilli(m.CurrentStateTimestamp)
			}
			for _, mv := range m.Members {
				rt := mv.RebalanceTimeout
				if rt <= 0 {
					rt = mv.SessionTimeout
				}
				mem := &member{
					id: mv.MemberID, instanceID: mv.InstanceID, clientID: mv.ClientID, clientHost: mv.ClientHost,
					sessionTimeoutMs: mv.SessionTimeout, rebalanceTimeoutMs: rt,
					protocols:  []Protocol{{Name: g.protocol, Metadata: mv.Subscription}},
					assignment: mv.Assignment, seq: g.nextSeq,
				}
				g.nextSeq++
				mem.deadline = now.Add(mem.sessionTimeout())
				g.members[mem.id] = mem
				if mem.instanceID != nil {
					g.static[*mem.instanceID] = mem.id
				}
			}
			if len(g.members) > 0 {
				g.state = Stable
				if m.Leader != nil && g.members[*m.Leader] != nil {
					g.leader = *m.Leader
				} else {
					g.leader = g.membersInOrder()[0].id
				}
				g.subscribed = g.computeSubscribed()
			}
		}
		c.groups[id] = g
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			g.run()
		}()
		g.post(func() {
			if max := c.cfg.MaxGroupSize; max > 0 && len(g.members) > max {
				g.prepareRebalance() // over capacity after a config change: let members rejoin
			}
			g.rearm()
		})
	}
	c.pstate[p] = partLoaded
}

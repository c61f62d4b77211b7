package coordinator

import (
	"errors"
	"sync"
	"time"
)

// loadedGroup is what a partition's records say about one group (last value per key wins,
// tombstones delete).
type loadedGroup struct {
	meta    *groupValue
	offsets map[TopicPartition]offsetValue
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
			groups, err := c.loadPartition(l)
			if err != nil {
				c.log.Error("loading __consumer_offsets partition failed; its groups are unavailable", "partition", p, "err", err)
				c.setPartState(p, partFailed)
				return
			}
			c.installGroups(p, l, groups)
			if len(groups) > 0 {
				c.log.Info("loaded __consumer_offsets partition", "partition", p, "groups", len(groups), "took", time.Since(start))
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

// loadPartition replays one partition.
func (c *Coordinator) loadPartition(l OffsetsLog) (map[string]*loadedGroup, error) {
	groups := map[string]*loadedGroup{}
	get := func(id string) *loadedGroup {
		lg := groups[id]
		if lg == nil {
			lg = &loadedGroup{offsets: map[TopicPartition]offsetValue{}}
			groups[id] = lg
		}
		return lg
	}
	skipped := 0
	err := l.ReadBatches(func(batch []byte) error {
		err := eachRecord(batch, func(key, value []byte) error {
			k, err := parseKey(key)
			if err != nil {
				skipped++ // another coordinator's record type, or garbage: not ours
				return nil
			}
			if k.IsOffset {
				tp := TopicPartition{k.Topic, k.Partition}
				if value == nil {
					if lg := groups[k.Group]; lg != nil {
						delete(lg.offsets, tp)
					}
					return nil
				}
				v, err := parseOffsetValue(value)
				if err != nil {
					skipped++
					return nil
				}
				get(k.Group).offsets[tp] = v
				return nil
			}
			if value == nil {
				if lg := groups[k.Group]; lg != nil {
					// A group tombstone: Kafka writes offset tombstones with it; drop the
					// metadata (offsets committed later stay).
					lg.meta = nil
					if len(lg.offsets) == 0 {
						delete(groups, k.Group)
					}
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
		if lg.meta == nil && len(lg.offsets) == 0 {
			delete(groups, id)
		}
	}
	return groups, err
}

// installGroups creates the loaded groups and marks the partition loaded. Members of a loaded
// stable group must heartbeat within their session timeout, as after a coordinator failover.
func (c *Coordinator) installGroups(p int32, l OffsetsLog, groups map[string]*loadedGroup) {
	c.installGroupsGen(p, l, groups, 0)
}

// installGroupsGen is installGroups for an Elect of ownership generation gen (0: any).
func (c *Coordinator) installGroupsGen(p int32, l OffsetsLog, groups map[string]*loadedGroup, gen uint64) {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || gen != 0 && c.pgen[p] != gen {
		return
	}
	for id, lg := range groups {
		if PartitionFor(id, c.parts) != p {
			continue // written under another partition count: not reachable here
		}
		g := newGroup(c, id, p)
		g.olog = l
		g.offsets = lg.offsets
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

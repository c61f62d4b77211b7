package controller

// Rack-aware replica placement (issue 14, racks): where the replicas of new partitions go when
// some usable broker has a rack (broker.rack). It places as Kafka 4's controller does
// (StripedReplicaPlacer): the usable brokers are grouped by rack, brokers without a rack forming
// one group of their own (Kafka 4 places them so, where the old ZooKeeper-era placement refused a
// mix); the racks are sorted by name ("no rack" first) and each rack's brokers by id. Every
// partition takes its first replica (the preferred leader) from the rack at a moving offset, and
// its other replicas from the following racks in turn, one broker per rack per pass, so the
// replicas of a partition are on as many racks as the replication factor allows. Within a rack
// the brokers are taken in turn from an offset that moves by one for every partition. Once as
// many partitions as there are brokers have been placed, the rack order and each rack's broker
// order are shuffled so the same assignments do not repeat.
//
// The starting offsets are random for a new topic; when partitions are added, the rack after the
// last partition's leader's rack and, in each rack, the broker after the last one used there
// come next, as Kafka continues a topic. Only unfenced brokers are usable (weir never places a
// replica on a fenced broker). Without any rack, placement is place (placement.go), unchanged.
// The placement is decided by the raft leader and carried in the command.

import (
	mrand "math/rand/v2"
	"slices"
)

// placeNew returns the replicas of count new partitions, numbered from first, over brokers (the
// sorted unfenced ids): rack-aware when one of them has a rack, else place from start. existing
// are the topic's current partitions (nil for a new topic).
func placeNew(img *Image, brokers []int32, existing []PartitionInfo, start, first, count, rf int) [][]int32 {
	if !anyRack(img, brokers) {
		return place(brokers, start, first, count, rf)
	}
	rng := mrand.New(mrand.NewPCG(mrand.Uint64(), mrand.Uint64()))
	return placeRackAware(img, brokers, existing, count, rf, rng)
}

func anyRack(img *Image, brokers []int32) bool {
	for _, id := range brokers {
		if img.Brokers[id].Rack != "" {
			return true
		}
	}
	return false
}

// placeRackAware places count partitions of rf replicas over brokers grouped by their racks.
// Requires 1 <= rf <= len(brokers).
func placeRackAware(img *Image, brokers []int32, existing []PartitionInfo, count, rf int, rng *mrand.Rand) [][]int32 {
	rl := newRackList(img, brokers, existing, rng)
	out := make([][]int32, count)
	for i := range out {
		out[i] = rl.place(rf)
	}
	return out
}

// rackBrokers is one rack's brokers, taken in turn: at most once each per iteration epoch,
// starting one further at each new epoch.
type rackBrokers struct {
	ids []int32
	// index counts the brokers taken in the current epoch; offset is added to it (mod len).
	index, offset int
	epoch         int
}

// next returns the next broker of the rack in epoch, or -1 when each was taken in epoch.
func (r *rackBrokers) next(epoch int) int32 {
	if len(r.ids) == 0 {
		return -1
	}
	if r.epoch != epoch {
		r.epoch, r.index = epoch, 0
		r.offset = (r.offset + 1) % len(r.ids)
	}
	if r.index >= len(r.ids) {
		return -1
	}
	id := r.ids[(r.index+r.offset)%len(r.ids)]
	r.index++
	return id
}

// rackList is the racks of the usable brokers and the placement's position among them.
type rackList struct {
	rng   *mrand.Rand
	names []string // sorted ("" = no rack, first) until the first shuffle
	racks map[string]*rackBrokers
	n     int // brokers
	// epoch counts partitions placed since the last shuffle; offset is the rack of the next
	// partition's first replica.
	epoch, offset int
}

func newRackList(img *Image, brokers []int32, existing []PartitionInfo, rng *mrand.Rand) *rackList {
	rl := &rackList{rng: rng, racks: map[string]*rackBrokers{}, n: len(brokers)}
	rackOf := make(map[int32]string, len(brokers))
	for _, id := range brokers {
		name := img.Brokers[id].Rack
		rackOf[id] = name
		r := rl.racks[name]
		if r == nil {
			r = &rackBrokers{}
			rl.racks[name] = r
			rl.names = append(rl.names, name)
		}
		r.ids = append(r.ids, id)
	}
	slices.Sort(rl.names)
	for _, name := range rl.names {
		r := rl.racks[name]
		slices.Sort(r.ids)
		if prev := previousInRack(rackOf, existing, name, r.ids); prev >= 0 {
			r.offset = (prev + 1) % len(r.ids)
		} else {
			r.offset = rng.IntN(len(r.ids))
		}
	}
	rl.offset = rng.IntN(len(rl.names))
	if k := len(existing); k > 0 && len(existing[k-1].Replicas) > 0 {
		if name, ok := rackOf[existing[k-1].Replicas[0]]; ok {
			rl.offset = (slices.Index(rl.names, name) + 1) % len(rl.names)
		}
	}
	return rl
}

// previousInRack returns the index in ids of the broker of rack name that the topic's existing
// partitions used last (the last partition first, its replicas in order), or -1.
func previousInRack(rackOf map[int32]string, existing []PartitionInfo, name string, ids []int32) int {
	for i := len(existing) - 1; i >= 0; i-- {
		for _, id := range existing[i].Replicas {
			r, ok := rackOf[id]
			if !ok || r != name {
				continue
			}
			return slices.Index(ids, id)
		}
	}
	return -1
}

// place returns the replicas of the next partition: the first from the rack at offset (or the
// next rack with a broker left in this epoch), the others from the racks after it in turn.
// Requires 1 <= rf <= rl.n.
func (rl *rackList) place(rf int) []int32 {
	if rl.epoch == rl.n && rl.n > 1 {
		rl.shuffle()
		rl.epoch = 0
	}
	if rl.offset == len(rl.names) {
		rl.offset = 0
	}
	out := make([]int32, 0, rf)
	first := rl.offset
	for {
		if id := rl.racks[rl.names[first]].next(rl.epoch); id >= 0 {
			out = append(out, id)
			break
		}
		first = (first + 1) % len(rl.names)
	}
	idx := rl.offset
	for len(out) < rf {
		id := int32(-1)
		for id < 0 {
			if idx == first {
				first = -1 // the first replica's rack gives no second one in this pass
			} else {
				id = rl.racks[rl.names[idx]].next(rl.epoch)
			}
			idx = (idx + 1) % len(rl.names)
		}
		out = append(out, id)
	}
	rl.epoch++
	rl.offset++
	return out
}

func (rl *rackList) shuffle() {
	rl.rng.Shuffle(len(rl.names), func(i, j int) { rl.names[i], rl.names[j] = rl.names[j], rl.names[i] })
	for _, r := range rl.racks {
		rl.rng.Shuffle(len(r.ids), func(i, j int) { r.ids[i], r.ids[j] = r.ids[j], r.ids[i] })
	}
}

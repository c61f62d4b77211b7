package sharepart

import (
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Share sessions (KIP-932): a share consumer's ShareFetch and ShareAcknowledge requests to one
// broker form a session keyed by (group, member). Epoch 0 opens a session (replacing the
// member's old one) with the request's partitions; each later request carries the session's
// next epoch (1, 2, ..., wrapping to 1) and may add partitions (Topics) or remove them
// (ForgottenTopicsData); -1 closes it. An unknown session is SHARE_SESSION_NOT_FOUND, a wrong
// epoch INVALID_SHARE_SESSION_EPOCH, a full cache SHARE_SESSION_LIMIT_REACHED.

// SessionKey names a share session.
type SessionKey struct{ Group, Member string }

// TopicPartition names a partition of a session by topic id.
type TopicPartition struct {
	TopicID   [16]byte
	Partition int32
}

// Epochs of ShareFetch/ShareAcknowledge requests.
const (
	InitialEpoch int32 = 0
	FinalEpoch   int32 = -1
)

// maxSessionPartitions bounds the partitions of one session.
const maxSessionPartitions = 1 << 16

// session is one share session.
type session struct {
	epoch int32 // the epoch the next request must carry
	parts []TopicPartition
	set   map[TopicPartition]struct{}
	// conn is the connection that last used the session (ConnInfo.ID) and closed reports
	// whether that connection is gone: a full cache drops such sessions first.
	conn   uint64
	closed func() bool
}

// Sessions is the broker's share session cache, bounded by max sessions.
type Sessions struct {
	mu  sync.Mutex // guards m
	max int
	m   map[SessionKey]*session
}

// NewSessions returns a cache of at most max sessions.
func NewSessions(max int) *Sessions {
	return &Sessions{max: max, m: map[SessionKey]*session{}}
}

// SetMax changes the bound (existing sessions stay).
func (c *Sessions) SetMax(max int) {
	c.mu.Lock()
	c.max = max
	c.mu.Unlock()
}

// Len returns the number of sessions.
func (c *Sessions) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// SessionUpdate is what a request does to its session.
type SessionUpdate struct {
	Key   SessionKey
	Epoch int32
	// Add are the request's partitions (ShareFetch Topics; ShareAcknowledge adds none),
	// Forget its ForgottenTopicsData.
	Add, Forget []TopicPartition
	// Conn is the request's connection id and Closed reports whether it is gone.
	Conn   uint64
	Closed func() bool
	// Ack: a ShareAcknowledge (epoch 0 cannot open a session).
	Ack bool
}

// SessionResult is a request's view of its session.
type SessionResult struct {
	// Full: a session was opened (epoch 0) or is closing (-1): every partition is answered.
	Full bool
	// Closing: epoch -1, the session is removed (Close it once the request's acknowledgements
	// are applied).
	Closing bool
	// Parts are the session's partitions after the update (the partitions to fetch); nil for a
	// closing session.
	Parts []TopicPartition
	// Replaced is the member's previous session's partitions when epoch 0 replaced one (their
	// records held by the member are released).
	Replaced []TopicPartition
	// Evicted are sessions dropped because their connection closed, to make room.
	Evicted []EvictedSession
}

// EvictedSession is a session dropped from the cache.
type EvictedSession struct {
	Key   SessionKey
	Parts []TopicPartition
}

// Update applies a request to its session; dst receives the partitions (reused between
// requests).
func (c *Sessions) Update(u SessionUpdate, dst []TopicPartition) (SessionResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.m[u.Key]
	var res SessionResult
	switch u.Epoch {
	case InitialEpoch:
		if u.Ack {
			return res, fmt.Errorf("ShareAcknowledge cannot open a share session: %w", kerr.InvalidShareSessionEpoch)
		}
		if s != nil {
			res.Replaced = s.parts
			delete(c.m, u.Key)
		}
		if len(c.m) >= c.max {
			res.Evicted = c.evictClosedLocked()
			if len(c.m) >= c.max {
				return res, fmt.Errorf("%d share sessions: %w", len(c.m), kerr.ShareSessionLimitReached)
			}
		}
		s = &session{epoch: 1, set: map[TopicPartition]struct{}{}}
		if err := s.add(u.Add); err != nil {
			return res, err
		}
		s.conn, s.closed = u.Conn, u.Closed
		c.m[u.Key] = s
		res.Full = true
		res.Parts = append(dst[:0], s.parts...)
		return res, nil
	case FinalEpoch:
		if s == nil {
			return res, fmt.Errorf("share session of member %s of group %s: %w", u.Key.Member, u.Key.Group, kerr.ShareSessionNotFound)
		}
		delete(c.m, u.Key)
		res.Full, res.Closing = true, true
		res.Replaced = s.parts
		return res, nil
	}
	if s == nil {
		return res, fmt.Errorf("share session of member %s of group %s: %w", u.Key.Member, u.Key.Group, kerr.ShareSessionNotFound)
	}
	if u.Epoch != s.epoch {
		return res, fmt.Errorf("share session epoch %d, expected %d: %w", u.Epoch, s.epoch, kerr.InvalidShareSessionEpoch)
	}
	if err := s.add(u.Add); err != nil {
		return res, err
	}
	s.forget(u.Forget)
	s.epoch++
	if s.epoch < 1 {
		s.epoch = 1
	}
	s.conn, s.closed = u.Conn, u.Closed
	res.Parts = append(dst[:0], s.parts...)
	return res, nil
}

// Remove drops a session (its member left the group) and returns its partitions.
func (c *Sessions) Remove(k SessionKey) []TopicPartition {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.m[k]
	if s == nil {
		return nil
	}
	delete(c.m, k)
	return s.parts
}

// DropClosed removes the sessions whose connection is gone and returns them (a sweep releases
// their records, as Kafka does when a share consumer's connection closes).
func (c *Sessions) DropClosed() []EvictedSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.evictClosedLocked()
}

func (c *Sessions) evictClosedLocked() []EvictedSession {
	var out []EvictedSession
	for k, s := range c.m {
		if s.closed != nil && s.closed() {
			delete(c.m, k)
			out = append(out, EvictedSession{Key: k, Parts: s.parts})
		}
	}
	return out
}

func (s *session) add(tps []TopicPartition) error {
	for _, tp := range tps {
		if _, ok := s.set[tp]; ok {
			continue
		}
		if len(s.parts) >= maxSessionPartitions {
			return fmt.Errorf("share session with more than %d partitions: %w", maxSessionPartitions, kerr.InvalidRequest)
		}
		s.set[tp] = struct{}{}
		s.parts = append(s.parts, tp)
	}
	return nil
}

func (s *session) forget(tps []TopicPartition) {
	if len(tps) == 0 {
		return
	}
	for _, tp := range tps {
		delete(s.set, tp)
	}
	kept := s.parts[:0]
	for _, tp := range s.parts {
		if _, ok := s.set[tp]; ok {
			kept = append(kept, tp)
		}
	}
	// A new slice: results handed out earlier (Replaced, Evicted) may alias the old one.
	s.parts = append([]TopicPartition(nil), kept...)
}

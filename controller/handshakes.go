package controller

import (
	"net"
	"sync"
)

// handshakeSlots bounds the connections of a secured controller port that are still in the
// security handshake (TLS and the hello), over the whole port and per client address.
//
// A full table does not refuse the newcomer: it closes the oldest handshake instead (of the
// newcomer's address when that address is at its own bound, else of the whole port). A peer
// completes its handshake within a round trip or two of connecting, so an attacker that holds
// silent connections open (each allowed handshakeTimeout) can no longer fill the table and lock
// the brokers out: a broker's connection is closed only if maxHandshakes newer connections (or
// maxHandshakesPerIP from its own address) arrive while it is in its handshake.
type handshakeSlots struct {
	max, maxPerIP int

	mu      sync.Mutex // guards pending and perIP
	pending []*handshakeSlot
	perIP   map[string]int
}

// handshakeSlot is one connection in the handshake. evicted is set (under the table's mutex)
// when the table closed it to admit a newer one.
type handshakeSlot struct {
	conn    net.Conn
	ip      string
	evicted bool
}

func newHandshakeSlots(max, maxPerIP int) *handshakeSlots {
	return &handshakeSlots{max: max, maxPerIP: maxPerIP, perIP: map[string]int{}}
}

// enter admits c to the handshake, closing the connection it displaces (if any) after the
// table's mutex is released. displaced reports whether one was.
func (h *handshakeSlots) enter(c net.Conn) (s *handshakeSlot, displaced bool) {
	ip := c.RemoteAddr().String()
	if host, _, err := net.SplitHostPort(ip); err == nil {
		ip = host
	}
	s = &handshakeSlot{conn: c, ip: ip}
	var victim *handshakeSlot
	h.mu.Lock()
	if h.perIP[ip] >= h.maxPerIP {
		for _, p := range h.pending {
			if p.ip == ip {
				victim = p
				break
			}
		}
	} else if len(h.pending) >= h.max {
		victim = h.pending[0]
	}
	if victim != nil {
		h.removeLocked(victim)
		victim.evicted = true
	}
	h.pending = append(h.pending, s)
	h.perIP[ip]++
	h.mu.Unlock()
	if victim != nil {
		victim.conn.Close()
	}
	return s, victim != nil
}

// leave ends s's handshake (done or failed). It reports whether s had been displaced (its
// connection is closed).
func (h *handshakeSlots) leave(s *handshakeSlot) (evicted bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.evicted {
		return true
	}
	h.removeLocked(s)
	return false
}

func (h *handshakeSlots) removeLocked(s *handshakeSlot) {
	for i, p := range h.pending {
		if p == s {
			h.pending = append(h.pending[:i], h.pending[i+1:]...)
			break
		}
	}
	if h.perIP[s.ip]--; h.perIP[s.ip] <= 0 {
		delete(h.perIP, s.ip)
	}
}

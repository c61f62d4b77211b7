package broker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/weir-mq/weir/internal/faultctl"
	"github.com/weir-mq/weir/vfs"
)

// producerIDs hands out idempotent producer ids that are never reused, across restarts too: ids
// are reserved in blocks whose end is made durable before any id of the block is given out.
type producerIDs struct {
	path string
	// mu guards next and end, and is held while a new block is reserved (the file written
	// and synced, or the controller asked): ids are handed out in order and never twice.
	mu   sync.Mutex
	next int64
	end  int64 // exclusive end of the reserved block
	// alloc, when set (clusters), reserves a block of n ids through the controller instead of
	// the local file, so no two brokers hand out the same id.
	alloc func(n int64) (int64, error)
}

const producerIDBlock = 1000

func openProducerIDs(dir string) (*producerIDs, error) {
	p := &producerIDs{path: filepath.Join(dir, "weir-producer-ids")}
	data, err := os.ReadFile(p.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("read producer ids: %w", err)
	default:
		n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("read producer ids %s: bad content %q", p.path, data)
		}
		p.next, p.end = n, n
	}
	return p, nil
}

// allocate returns a fresh producer id.
func (p *producerIDs) allocate() (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next >= p.end && p.alloc != nil {
		first, err := p.alloc(producerIDBlock)
		if err != nil {
			return -1, err
		}
		p.next, p.end = first, first+producerIDBlock
	}
	if p.next >= p.end {
		end := p.next + producerIDBlock
		if err := vfs.WriteFileAtomic(faultctl.FS(vfs.OS), p.path, []byte(strconv.FormatInt(end, 10)+"\n")); err != nil {
			return -1, err
		}
		p.end = end
	}
	id := p.next
	p.next++
	return id, nil
}

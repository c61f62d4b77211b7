package broker

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/vfs"
)

// Topic is a topic's metadata.
type Topic struct {
	Name       string            `json:"name"`
	ID         [16]byte          `json:"id"`
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
	Internal   bool              `json:"internal,omitempty"`
}

// topicStore holds the topics of a single broker, persisted atomically as JSON in the first log
// dir (weir-topics.json). The replicated controller will replace it for clusters.
type topicStore struct {
	path string
	fsys vfs.FS

	mu     sync.RWMutex
	byName map[string]*Topic
	byID   map[[16]byte]*Topic
}

const topicsFile = "weir-topics.json"

func openTopicStore(dir string) (*topicStore, error) {
	s := &topicStore{path: filepath.Join(dir, topicsFile), fsys: vfs.OS, byName: map[string]*Topic{}, byID: map[[16]byte]*Topic{}}
	data, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read topics: %w", err)
	}
	var topics []*Topic
	if err := json.Unmarshal(data, &topics); err != nil {
		return nil, fmt.Errorf("read topics %s: %w", s.path, err)
	}
	for _, t := range topics {
		s.byName[t.Name] = t
		s.byID[t.ID] = t
	}
	return s, nil
}

// saveLocked writes every topic. Requires s.mu.
func (s *topicStore) saveLocked() error {
	topics := make([]*Topic, 0, len(s.byName))
	for _, t := range s.byName {
		topics = append(topics, t)
	}
	sort.Slice(topics, func(i, j int) bool { return topics[i].Name < topics[j].Name })
	data, err := json.MarshalIndent(topics, "", "  ")
	if err != nil {
		return err
	}
	return vfs.WriteFileAtomic(s.fsys, s.path, data)
}

func (s *topicStore) get(name string) (Topic, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, ok := s.byName[name]
	if !ok {
		return Topic{}, false
	}
	return t.clone(), true
}

func (s *topicStore) getByID(id [16]byte) (Topic, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, ok := s.byID[id]
	if !ok {
		return Topic{}, false
	}
	return t.clone(), true
}

func (s *topicStore) all() []Topic {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]Topic, 0, len(s.byName))
	for _, t := range s.byName {
		out = append(out, t.clone())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (t *Topic) clone() Topic {
	c := *t
	c.Configs = make(map[string]string, len(t.Configs))
	for k, v := range t.Configs {
		c.Configs[k] = v
	}
	return c
}

// put stores t (new or updated).
func (s *topicStore) put(t Topic) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := t.clone()
	s.byName[t.Name] = &c
	s.byID[t.ID] = &c
	return s.saveLocked()
}

func (s *topicStore) remove(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.byName[name]
	if !ok {
		return nil
	}
	delete(s.byName, name)
	delete(s.byID, t.ID)
	return s.saveLocked()
}

func newTopicID() [16]byte {
	var id [16]byte
	for {
		_, _ = rand.Read(id[:])
		if id != ([16]byte{}) {
			return id
		}
	}
}

// validTopicName applies Kafka's rules: 1-249 characters of [a-zA-Z0-9._-], not "." or "..".
func validTopicName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 249 {
		return fmt.Errorf("topic name %q is not legal: %w", name, kerr.InvalidTopicException)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("topic name %q contains %q: %w", name, r, kerr.InvalidTopicException)
		}
	}
	return nil
}

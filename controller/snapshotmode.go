package controller

import (
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
)

// Modes of the metadata store's files. The snapshots hold the metadata image, SCRAM credentials
// included, so only the broker's user may read them. raft-boltdb creates raft.db 0600 itself;
// hashicorp/raft's FileSnapshotStore creates its directories 0755 and files with the umask's
// default, so the controller tightens them: the store's directory is made 0700 before any
// snapshot is written (so nothing inside is reachable by others even for a moment), and every
// snapshot's directory and files are chmodded 0700/0600 when the snapshot is complete.
const (
	metaFileMode os.FileMode = 0o600
	metaDirMode  os.FileMode = 0o700
)

// privateSnapshotStore wraps a FileSnapshotStore rooted at dir/snapshots.
type privateSnapshotStore struct {
	raft.SnapshotStore
	dir string // the snapshots directory
}

func newPrivateSnapshotStore(inner raft.SnapshotStore, dir string) (*privateSnapshotStore, error) {
	s := &privateSnapshotStore{SnapshotStore: inner, dir: filepath.Join(dir, "snapshots")}
	return s, s.tighten()
}

// tighten chmods the snapshots directory and everything under it.
func (s *privateSnapshotStore) tighten() error {
	return filepath.WalkDir(s.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil // removed meanwhile (a reaped snapshot)
			}
			return err
		}
		mode := metaFileMode
		if d.IsDir() {
			mode = metaDirMode
		}
		if err := os.Chmod(p, mode); err != nil && !os.IsNotExist(err) {
			return err
		}
		return nil
	})
}

func (s *privateSnapshotStore) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.SnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		return nil, err
	}
	return &privateSnapshotSink{SnapshotSink: sink, store: s}, nil
}

type privateSnapshotSink struct {
	raft.SnapshotSink
	store *privateSnapshotStore
}

// Close completes the snapshot (the store renames it into place) and then tightens its modes.
func (k *privateSnapshotSink) Close() error {
	if err := k.SnapshotSink.Close(); err != nil {
		return err
	}
	return k.store.tighten()
}

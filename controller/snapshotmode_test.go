package controller

import (
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// The metadata store (raft log and snapshots, which hold SCRAM credentials) is private to the
// broker's user whatever the umask.
func TestMetadataStoreFileModes(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := t.TempDir()
	c := startSingle(t, dir)
	ctx := ctxT(t, 20*time.Second)
	if _, err := c.CreateTopic(ctx, CreateTopicRequest{Name: "t", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if err := c.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	snapshots := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700 | fs.ModeDir
		}
		if info.Mode() != want {
			t.Errorf("%s: mode %v, want %v", p, info.Mode(), want)
		}
		if d.Name() == "state.bin" {
			snapshots++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if snapshots == 0 {
		t.Fatal("no snapshot written")
	}
}

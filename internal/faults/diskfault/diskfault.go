// Package diskfault damages the files of a stopped replica, for the fault suite: a bit flipped or
// the tail cut off a partition's .log, .index or .timeindex, a log dir's checkpoint file, or a
// producer-state snapshot, as a disk that returns a flipped bit or a torn write would leave them.
// The live faults (failing fsyncs, a full disk, stalls, power loss) are internal/faultctl's
// /faults/disk; this package works on files while no process has them open.
//
// Files are named as the broker names them (Kafka's layout, DESIGN.md "On-disk format"):
// <data dir>/<topic>-<partition>/<base offset %020d>.log|.index|.timeindex|.snapshot, and the log
// dir's checkpoint files beside the partition directories. Newest picks a partition's file of one
// kind with the greatest base offset: the active segment, the latest snapshot.
//
// Nothing here is safe against a running broker that has the file open: stop (or SIGKILL) the node
// first. The package imports no testing code so the fault runner can link it.
package diskfault

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/weir-mq/weir/engine"
)

// File suffixes of a partition directory.
const (
	LogSuffix       = ".log"
	IndexSuffix     = ".index"
	TimeIndexSuffix = ".timeindex"
	SnapshotSuffix  = ".snapshot"
)

// Checkpoint files of a log dir.
const (
	RecoveryPointCheckpoint   = engine.RecoveryPointCheckpointFile
	LogStartCheckpoint        = engine.LogStartOffsetCheckpointFile
	ReplicationCheckpoint     = "replication-offset-checkpoint"
	LeaderEpochCheckpointFile = "leader-epoch-checkpoint" // per partition directory
)

// PartitionDir is the directory of topic's partition in the log dir dataDir.
func PartitionDir(dataDir, topic string, partition int32) string {
	return filepath.Join(dataDir, topic+"-"+strconv.Itoa(int(partition)))
}

// Newest is the file of the partition directory dir with the given suffix (LogSuffix, ...) whose
// base offset (the 20-digit name) is the greatest.
func Newest(dir, suffix string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("newest %s in %s: %w", suffix, dir, err)
	}
	var names []string
	for _, e := range entries {
		n := e.Name()
		if !strings.HasSuffix(n, suffix) {
			continue
		}
		if _, err := strconv.ParseInt(strings.TrimSuffix(n, suffix), 10, 64); err != nil {
			continue
		}
		names = append(names, n)
	}
	if len(names) == 0 {
		return "", fmt.Errorf("newest %s in %s: none", suffix, dir)
	}
	sort.Strings(names) // zero-padded: name order is offset order
	return filepath.Join(dir, names[len(names)-1]), nil
}

// Damage says what was done to a file.
type Damage struct {
	Path string
	// SizeBefore and SizeAfter are the file's sizes.
	SizeBefore, SizeAfter int64
	// Position is the byte flipped (FlipBit) or the new end (Truncate).
	Position int64
	Bit      uint
}

func (d Damage) String() string {
	if d.SizeAfter < d.SizeBefore {
		return fmt.Sprintf("%s: cut from %d to %d bytes", d.Path, d.SizeBefore, d.SizeAfter)
	}
	return fmt.Sprintf("%s: bit %d of byte %d flipped (of %d)", d.Path, d.Bit, d.Position, d.SizeBefore)
}

// FlipBit flips bit (0-7) of the byte back bytes before the end of path (back 0: the last byte).
func FlipBit(path string, back int64, bit uint) (Damage, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return Damage{}, fmt.Errorf("flip bit: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Damage{}, fmt.Errorf("flip bit: %w", err)
	}
	pos := st.Size() - 1 - back
	if pos < 0 || bit > 7 {
		return Damage{}, fmt.Errorf("flip bit %d of byte %d from the end of %s: the file has %d bytes", bit, back, path, st.Size())
	}
	var b [1]byte
	if _, err := f.ReadAt(b[:], pos); err != nil {
		return Damage{}, fmt.Errorf("flip bit: %w", err)
	}
	b[0] ^= 1 << bit
	if _, err := f.WriteAt(b[:], pos); err != nil {
		return Damage{}, fmt.Errorf("flip bit: %w", err)
	}
	if err := f.Sync(); err != nil {
		return Damage{}, fmt.Errorf("flip bit: %w", err)
	}
	return Damage{Path: path, SizeBefore: st.Size(), SizeAfter: st.Size(), Position: pos, Bit: bit}, nil
}

// Truncate cuts n bytes off the end of path (a torn write).
func Truncate(path string, n int64) (Damage, error) {
	st, err := os.Stat(path)
	if err != nil {
		return Damage{}, fmt.Errorf("truncate: %w", err)
	}
	if n < 0 || n > st.Size() {
		return Damage{}, fmt.Errorf("truncate %d bytes of %s: the file has %d", n, path, st.Size())
	}
	if err := os.Truncate(path, st.Size()-n); err != nil {
		return Damage{}, fmt.Errorf("truncate: %w", err)
	}
	return Damage{Path: path, SizeBefore: st.Size(), SizeAfter: st.Size() - n, Position: st.Size() - n}, nil
}

// Batch is one RecordBatch's place in a .log file.
type Batch struct {
	BaseOffset, LastOffset int64
	Position, Size         int64
}

// batchHeaderBytes is how much of a RecordBatch v2 header LastBatch reads: baseOffset int64,
// batchLength int32, partitionLeaderEpoch int32, magic int8, crc uint32, attributes int16,
// lastOffsetDelta int32.
const batchHeaderBytes = 8 + 4 + 4 + 1 + 4 + 2 + 4

// ErrNoBatch is LastBatch's error for a .log without a whole batch.
var ErrNoBatch = errors.New("no whole batch")

// LastBatch is the last whole batch of the .log file path (walking the batch lengths from the
// start; a torn end is ignored).
func LastBatch(path string) (Batch, error) {
	f, err := os.Open(path)
	if err != nil {
		return Batch{}, fmt.Errorf("last batch: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Batch{}, fmt.Errorf("last batch: %w", err)
	}
	var last Batch
	found := false
	var h [batchHeaderBytes]byte
	for pos := int64(0); pos+batchHeaderBytes <= st.Size(); {
		if _, err := f.ReadAt(h[:], pos); err != nil {
			return Batch{}, fmt.Errorf("last batch of %s at %d: %w", path, pos, err)
		}
		length := int64(int32(binary.BigEndian.Uint32(h[8:12])))
		size := 12 + length
		if length <= 0 || pos+size > st.Size() {
			break
		}
		base := int64(binary.BigEndian.Uint64(h[0:8]))
		last = Batch{BaseOffset: base, LastOffset: base + int64(int32(binary.BigEndian.Uint32(h[23:27]))), Position: pos, Size: size}
		found = true
		pos += size
	}
	if !found {
		return Batch{}, fmt.Errorf("last batch of %s: %w", path, ErrNoBatch)
	}
	return last, nil
}

// RecoveryPoint is topic's partition's entry in the recovery-point checkpoint of dataDir (ok
// false when it has none): after an unclean shutdown the broker checks batches from there on
// by CRC, and those below only by their headers.
func RecoveryPoint(dataDir, topic string, partition int32) (offset int64, ok bool, err error) {
	m, err := engine.ReadCheckpoint(filepath.Join(dataDir, RecoveryPointCheckpoint))
	if err != nil {
		return 0, false, err
	}
	offset, ok = m[engine.TopicPartition{Topic: topic, Partition: partition}]
	return offset, ok, nil
}

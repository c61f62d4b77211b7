package engine

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/weir-mq/weir/vfs"
)

// Kafka's log-dir file names.
const (
	RecoveryPointCheckpointFile  = "recovery-point-offset-checkpoint"
	LogStartOffsetCheckpointFile = "log-start-offset-checkpoint"
	CleanShutdownFile            = ".kafka_cleanshutdown"
	PartitionMetadataFile        = "partition.metadata"
)

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return tp.Topic + "-" + strconv.Itoa(int(tp.Partition)) }

// ParsePartitionDir parses a partition directory name, <topic>-<partition>.
func ParsePartitionDir(name string) (TopicPartition, bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || i == len(name)-1 {
		return TopicPartition{}, false
	}
	p, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || p < 0 || strconv.FormatInt(p, 10) != name[i+1:] {
		return TopicPartition{}, false // only the canonical form ("t-1", not "t-01" or "t-+1")
	}
	return TopicPartition{Topic: name[:i], Partition: int32(p)}, true
}

// WriteCheckpoint writes Kafka's offset checkpoint text format atomically (temp file, fsync,
// rename, directory fsync):
//
//	0
//	<entries>
//	<topic> <partition> <offset>
func WriteCheckpoint(fsys vfs.FS, path string, offsets map[TopicPartition]int64) error {
	tps := make([]TopicPartition, 0, len(offsets))
	for tp := range offsets {
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(tps))
	for _, tp := range tps {
		fmt.Fprintf(&b, "%s %d %d\n", tp.Topic, tp.Partition, offsets[tp])
	}
	return writeFileAtomic(fsys, path, b.Bytes())
}

// ReadCheckpoint reads a checkpoint file; a missing file is an empty checkpoint.
func ReadCheckpoint(path string) (map[TopicPartition]int64, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[TopicPartition]int64{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoint %s: %w", path, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	line := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		return strings.TrimSpace(sc.Text()), true
	}
	v, ok := line()
	if !ok || v != "0" {
		return nil, fmt.Errorf("read checkpoint %s: unsupported version %q", path, v)
	}
	c, ok := line()
	n, err := strconv.Atoi(c)
	if !ok || err != nil || n < 0 {
		return nil, fmt.Errorf("read checkpoint %s: bad entry count %q", path, c)
	}
	out := make(map[TopicPartition]int64, n)
	for i := 0; i < n; i++ {
		l, ok := line()
		f := strings.Fields(l)
		if !ok || len(f) != 3 {
			return nil, fmt.Errorf("read checkpoint %s: malformed entry %d: %q", path, i, l)
		}
		p, err1 := strconv.ParseInt(f[1], 10, 32)
		o, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("read checkpoint %s: malformed entry %d: %q", path, i, l)
		}
		out[TopicPartition{Topic: f[0], Partition: int32(p)}] = o
	}
	return out, nil
}

// WritePartitionMetadata writes partition.metadata as Kafka does:
//
//	version: 0
//	topic_id: <topic id, URL-safe base64 without padding>
func WritePartitionMetadata(fsys vfs.FS, dir string, topicID [16]byte) error {
	s := fmt.Sprintf("version: 0\ntopic_id: %s\n", base64.RawURLEncoding.EncodeToString(topicID[:]))
	return writeFileAtomic(fsys, filepath.Join(dir, PartitionMetadataFile), []byte(s))
}

// ReadPartitionMetadata reads the topic id from partition.metadata; ok is false if absent.
func ReadPartitionMetadata(dir string) (id [16]byte, ok bool, err error) {
	data, err := os.ReadFile(filepath.Join(dir, PartitionMetadataFile))
	if errors.Is(err, fs.ErrNotExist) {
		return id, false, nil
	}
	if err != nil {
		return id, false, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, found := strings.Cut(line, ":")
		if !found || strings.TrimSpace(k) != "topic_id" {
			continue
		}
		raw, err := base64.RawURLEncoding.DecodeString(strings.TrimSpace(v))
		if err != nil || len(raw) != 16 {
			return id, false, fmt.Errorf("partition.metadata in %s: bad topic_id %q", dir, v)
		}
		copy(id[:], raw)
		return id, true, nil
	}
	return id, false, fmt.Errorf("partition.metadata in %s: no topic_id", dir)
}

func writeFileAtomic(fsys vfs.FS, path string, data []byte) error {
	return vfs.WriteFileAtomic(fsys, path, data)
}

//go:build !faults

package faultctl

import "github.com/weir-mq/weir/vfs"

// FS is the filesystem the broker writes its log dirs through: base itself in a release build
// (no wrapper, no extra indirection). With `-tags faults` it is the process-wide vfs.FaultFS that
// /faults/disk controls (disk_faults.go).
func FS(base vfs.FS) vfs.FS { return base }

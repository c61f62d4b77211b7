//go:build faults

package faultctl

// Disk faults of a live broker: /faults/disk controls one process-wide vfs.FaultFS that wraps
// vfs.OS, through which the broker writes everything of its log dirs (segments, checkpoints,
// producer snapshots, leader-epoch checkpoints, meta.properties, the producer-id block file):
// FS(vfs.OS) returns it.
//
//	POST /faults/disk  op=sync-eio      every fdatasync and directory fsync fails with EIO
//	                   op=enospc-append every write fails with ENOSPC
//	                   op=enospc-roll   creating a file (a segment roll, a checkpoint's temporary
//	                                    file) or growing one fails with ENOSPC
//	                   op=stall&for=5s  every write and sync started in the next 5 s waits until
//	                                    they have passed, then proceeds (what=write|sync|both,
//	                                    default both)
//	                   op=crash         power loss: every byte not fdatasync'd is dropped, files
//	                                    created since their directory's last fsync vanish, and every
//	                                    later change through the FS fails with vfs.ErrCrashed. The
//	                                    process cannot go on: the caller SIGKILLs it at once and
//	                                    restarts it.
//	                   op=clear         ends every fault above but crash
//	                   match=S          (optional) limits a fault to paths containing S: a
//	                                    partition ("/orders-3/"), a log dir, a file kind (".log")
//	GET  /faults/disk  the active faults
//
// Both answer the active faults as JSON; op=crash adds "crash": what it dropped (files removed,
// files cut, bytes lost). The faults are those of vfs.FaultFS (vfs/doc.go): a
// failed write or sync takes the log dir offline (KAFKA_STORAGE_ERROR), as a real one does.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"syscall"
	"time"

	"github.com/weir-mq/weir/vfs"
)

// disk is the process-wide fault layer over the real filesystem.
var disk = vfs.NewFaultFS(vfs.OS)

// FS returns the process-wide FaultFS for vfs.OS, and any other base unchanged (in-process
// tests bring their own FaultFS).
func FS(base vfs.FS) vfs.FS {
	if base == vfs.OS {
		return disk
	}
	return base
}

func init() { register("/faults/disk", http.HandlerFunc(serveDisk)) }

// diskState is the JSON answer of /faults/disk.
type diskState struct {
	SyncErr     string `json:"sync_err,omitempty"`
	SyncMatch   string `json:"sync_match,omitempty"`
	WriteErr    string `json:"write_err,omitempty"`
	WriteMatch  string `json:"write_match,omitempty"`
	CreateErr   string `json:"create_err,omitempty"`
	CreateMatch string `json:"create_match,omitempty"`
	StallUntil  string `json:"stall_until,omitempty"`
	StallMatch  string `json:"stall_match,omitempty"`
	StallWrites bool   `json:"stall_writes,omitempty"`
	StallSyncs  bool   `json:"stall_syncs,omitempty"`
	PoweredOff  bool   `json:"powered_off,omitempty"`
	// Crash is what op=crash dropped (in its answer only).
	Crash *vfs.CrashStats `json:"crash,omitempty"`
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func activeDisk() diskState {
	a := disk.Active()
	s := diskState{
		SyncErr: errText(a.SyncErr), SyncMatch: a.SyncMatch,
		WriteErr: errText(a.WriteErr), WriteMatch: a.WriteMatch,
		CreateErr: errText(a.CreateErr), CreateMatch: a.CreateMatch,
		StallMatch: a.StallMatch, StallWrites: a.StallWrites, StallSyncs: a.StallSyncs,
		PoweredOff: a.PoweredOff,
	}
	if !a.StallUntil.IsZero() {
		s.StallUntil = a.StallUntil.UTC().Format(time.RFC3339Nano)
	}
	return s
}

// applyDisk applies one POSTed operation; op=crash says what it dropped.
func applyDisk(op, match, forStr, what string) (*vfs.CrashStats, error) {
	switch op {
	case "sync-eio":
		disk.FailSyncs(syscall.EIO, match)
	case "enospc-append":
		disk.FailWrites(syscall.ENOSPC, match)
	case "enospc-roll":
		disk.FailCreates(syscall.ENOSPC, match)
	case "stall":
		d, err := time.ParseDuration(forStr)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("stall: for=%q: want a positive duration such as 5s", forStr)
		}
		writes, syncs := true, true
		switch what {
		case "", "both":
		case "write":
			syncs = false
		case "sync":
			writes = false
		default:
			return nil, fmt.Errorf("stall: what=%q: want write, sync or both", what)
		}
		disk.Stall(d, match, writes, syncs)
	case "crash":
		cs, err := disk.PowerOff()
		if err != nil {
			return nil, fmt.Errorf("crash: %w", err)
		}
		return &cs, nil
	case "clear":
		disk.ClearFaults()
	default:
		return nil, fmt.Errorf("op=%q: want sync-eio, enospc-append, enospc-roll, stall, crash or clear", op)
	}
	return nil, nil
}

func serveDisk(w http.ResponseWriter, r *http.Request) {
	var crash *vfs.CrashStats
	switch r.Method {
	case http.MethodGet:
	case http.MethodPost:
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var err error
		crash, err = applyDisk(r.Form.Get("op"), r.Form.Get("match"), r.Form.Get("for"), r.Form.Get("what"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "GET or POST", http.StatusMethodNotAllowed)
		return
	}
	state := activeDisk()
	state.Crash = crash
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(state)
}

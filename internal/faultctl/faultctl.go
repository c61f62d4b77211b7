// Package faultctl is the fault-injection control of a `weir serve` process built for the fault
// suite (internal/faults): with the build tag `faults`, files of this package register HTTP
// handlers (clock steps, disk faults) that the broker mounts on its admin listener
// (metrics.listener) under /faults/. Without the tag the package registers nothing: Handlers
// returns an empty map, Enabled is false, and a release binary has no fault control at all.
//
// FS is the seam of the disk faults: the broker opens its log manager and writes its meta files
// through FS(vfs.OS). In a release build FS returns its argument (fs.go), so the engine runs on
// vfs.OS exactly as without this package and the binary links no fault code; with the tag it
// returns one process-wide vfs.FaultFS that /faults/disk controls (disk_faults.go).
//
// The control changes the broker's state without authentication. It exists only in binaries
// built with `-tags faults`, which the fault suite builds for its own test clusters whose admin
// listeners are on loopback or inside network namespaces the suite created; never ship one.
//
// Goroutines: none. Handlers is safe for concurrent use after package initialisation (handlers
// register in init functions only).
package faultctl

import (
	"net/http"
	"sort"
)

// handlers are the registered endpoints by path; written only by init functions.
var handlers = map[string]http.Handler{}

// register mounts h at path (under /faults/); called from init functions of tagged files.
func register(path string, h http.Handler) { handlers[path] = h }

// Enabled says whether this binary was built with the fault control (`-tags faults`).
func Enabled() bool { return len(handlers) > 0 }

// Handlers are the fault-control endpoints by path (empty without the build tag).
func Handlers() map[string]http.Handler { return handlers }

// Paths are the registered paths, sorted.
func Paths() []string {
	out := make([]string, 0, len(handlers))
	for p := range handlers {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

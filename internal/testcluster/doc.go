// Package testcluster starts clusters of `weir serve` child processes on 127.0.0.1 for tests,
// `weir dev-cluster` and `weir bench cluster`: one place that picks ports, lays out node
// directories, builds each node's command line, waits for readiness and signals nodes.
//
// Readiness is each node's /readyz on its admin listener (metrics.listener), never a log line: a
// node is started when /readyz answers 200 (log dirs recovered, listeners serving, a controller
// known, the broker registered and unfenced). Every node therefore always has an admin listener
// on its host; a configuration that turns it off is refused.
//
// A node's host is 127.0.0.1 unless Config.Host gives it another address, for example one inside
// a network namespace (internal/faults/netns): then Config.Wrap runs the node in its namespace
// and Config.DialContext makes the harness's own connections (the busy-port probe, /readyz) from
// where that address is reachable. The package itself knows nothing of namespaces.
//
// Another broker (Apache Kafka, for the fault suite's comparison runs) runs through two hooks:
// Config.Command gives each node's command line instead of `weir serve --set ...`, and
// Config.Ready its readiness probe instead of /readyz (the admin port is then still reserved,
// but nothing need listen on it). Ports, directories, Wrap, signals and output are the same.
//
// Decisions:
//   - Process mode only. The package imports neither broker nor testing: the broker package's own
//     tests (package broker) can use it without an import cycle, and the weir binary can link it
//     without linking testing. Tests wire clean-up and log printing through the tiny subpackage
//     testcluster/tbcluster, which takes a testing.TB.
//   - Ports are fixed (a base port per kind, node i at base+i-1) or, with a zero base, free
//     loopback ports found by binding port 0 (held until all are chosen, so no two coincide). A
//     node does not start while something already listens on one of its ports: a busy admin
//     port would otherwise pass another process's /readyz off as the node's. A port taken in the
//     instant between that check and the node's bind shows as a node that exited at start.
//   - Node output goes to memory (tests) or is appended to DIR/node-i/weir.log (dev-cluster);
//     Output returns only the current run's part.
//
// Goroutines: one per running node process waits for it (cmd.Wait) and closes the node's exited
// channel; nothing else runs in the background. A Cluster's methods may be called from several
// goroutines; each Node's mutex guards its process state.
package testcluster

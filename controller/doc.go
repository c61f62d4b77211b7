// Package controller owns clustering's control plane: the metadata log on an established Raft
// library (hashicorp/raft), the metadata image, broker registration and fencing, placement
// and the controller RPC.
//
// The controller port (rpc.go) carries raft and the controller RPC, one routing byte per
// connection. With Config.Security (portsec.go) a connection must pass TLS and/or SASL PLAIN
// and its principal must be allowed before that byte is read; every RPC frame is bounded by
// its operation and decoded strictly (rpcvalidate.go); and a broker id belongs to the principal
// that registered it (controller.go). The mux owns one goroutine per accepted connection until
// raft takes a raft connection over; connections in the security handshake are bounded.
//
// The controller's store under its directory (raft.db from raft-boltdb, snapshots from hashicorp/
// raft's FileSnapshotStore, which hold SCRAM credentials) is private to the broker's user: the
// directory is 0700 and snapshot directories and files are chmodded 0700/0600 as each snapshot
// completes (snapshotmode.go).
package controller

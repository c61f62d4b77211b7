// Package controller is clustering's control plane: the metadata log on an established Raft
// library (hashicorp/raft), the metadata image built from it, broker registration, liveness and
// fencing, leader election from the ISR, replica placement, and the controller port that
// carries raft and the controller RPC. It imports neither package replication (the data plane)
// nor package broker; the broker reads images and calls the Controller's methods.
//
// What it owns:
//   - The metadata log and its store under Config.Dir: raft.db (raft-boltdb) and the snapshots
//     of hashicorp/raft's FileSnapshotStore, which hold SCRAM credentials. The directory is 0700
//     and snapshot directories and files are chmodded 0700/0600 as each snapshot completes
//     (snapshotmode.go).
//   - The metadata image (image.go): brokers, topics and topic ids, partition assignments,
//     leaders, leader and partition epochs, ISRs, the producer id blocks, and keyed records other
//     packages keep in the log (ACL bindings, SCRAM credentials) with a version per kind
//     (Image.RecordsIndex). raftlog.go is the raft FSM that applies commands to images.
//   - The controller port (rpc.go): one listener carrying raft and the controller RPC, one
//     routing byte per connection. With Config.Security (portsec.go) a connection must pass TLS
//     and/or SASL PLAIN and its principal must be allowed before that byte is read; every RPC
//     frame is bounded by its operation and decoded strictly (rpcvalidate.go); connections in
//     the security handshake are bounded (handshakes.go).
//
// Files by concern: controller.go (types, the read side: Image, Changed, ActiveID, WaitReady),
// lifecycle.go (Start, ControlledShutdown, Close), requests.go (the operations, their routing to
// the raft leader and their execution there), liveness.go (registration, heartbeats, takeover,
// fencing), placement.go (where new partitions go), elect.go (ElectLeaders, leader balance and
// unclean election once it is allowed, run by leaderLoop on the active controller), logdirs.go
// (a broker's replicas in a failed log dir leave their ISRs and leaderships), quorum.go
// (the quorum as DescribeQuorum shows it, from the log ends brokers report in heartbeats;
// adding and removing voters).
//
// Goroutines: hashicorp/raft's own; three per Controller started by Start and stopped by Close
// (heartbeatLoop registers and heartbeats this broker to the active controller; leaderLoop takes
// over as active controller after an election, fences brokers whose session ended and moves
// leaderships back to preferred replicas (elect.go);
// watchPeers records which voters raft cannot reach); on a multi-node quorum the port's accept
// loop, one goroutine per accepted connection until raft's transport takes a raft connection
// over or the RPC connection closes, and one per RPC in flight that cancels it on Close. An
// apply or leadership transfer waits on raft's future in a short-lived goroutine so a context
// can end the wait.
//
// Invariants:
//   - The raft leader is the only writer. Every state change is a command appended to the raft
//     log; other nodes forward their requests to the leader over the controller RPC. Decisions
//     that are not deterministic (placement, topic ids, who is alive) are taken by the leader
//     and carried in the command; applying a command to an image is deterministic.
//   - Images are immutable: each applied command that changes anything produces a new Image
//     (copy-on-write) published with an atomic pointer, and the channel returned by Changed is
//     closed at the same moment. To observe changes without missing one, call Changed before
//     Image.
//   - Broker liveness lives only in memory on the raft leader. A newly elected leader gives
//     every broker a fresh session; a broker that does not heartbeat within the session timeout
//     (or whose raft port refuses connections and misses heartbeats) is fenced, which elects new
//     leaders for its partitions from their ISRs (unclean election only where configured), and a
//     heartbeat from a fenced broker unfences it.
//   - On a secured port a broker id belongs to its principal in PortSecurity.BrokerPrincipals,
//     always, and a listed principal acts for no other id; an id not listed belongs to the
//     principal that registered it. A new incarnation takes an id over only once the old one is
//     fenced or its session is over (and, for a listed id, only as its principal).
//   - Replica placement (placement.go): partition i's replica j is on broker (start + i + j)
//     mod n over the sorted unfenced brokers, start chosen at random per topic.
//     When a broker has a rack (Config.Rack, BrokerInfo.Rack), placement is Kafka's striped
//     rack-aware placement instead (racks.go).
package controller

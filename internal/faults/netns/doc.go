// Package netns puts the nodes of a test cluster in Linux network namespaces joined by a bridge,
// so that the fault suite can cut the network between real `weir serve` processes: isolate a
// node, split the cluster, bridge two halves through one node, drop one direction. It needs root
// and iproute2's ip and tc; Available says whether they are here, and tests skip with its message
// where they are not.
//
// # Topology and addresses
//
// Create(name, n) makes n+1 namespaces:
//
//	<name>-br   br0, a Linux bridge, with the clients' address 10.231.X.254/24 (ClientAddr);
//	            p1..pn, the bridge ports (one end of each node's veth pair);
//	            sink0/sink1, a veth pair that swallows dropped packets (below)
//	<name>-i    eth0 with node i's address 10.231.X.i/24 (Addr(i)), the other end of the veth
//	            pair to port pi; lo up
//
// X is a hash of name. The /24 exists only inside these namespaces: nothing routes to or from
// the host's own namespace, so two sets that happen to share X do not meet, and no test traffic
// leaves the machine. Only IPv4 is cut; use Addr's addresses.
//
// Nodes run in their namespace through Exec (`ip netns exec <ns> argv...`, which execs argv in
// place: the process started is the broker itself, and signals reach it); with
// internal/testcluster that is Config.Wrap, with Config.Host = Addr. Clients are the test's own Go
// code, in the bridge namespace: DialContext makes a socket there (for kgo.Dialer,
// http.Transport.DialContext and testcluster's Config.DialContext). Only the socket's creation
// needs the namespace, so the rest of the program keeps running in the host's.
//
// # Faults at the packet level
//
// A cut is a directed pair "packets from A to B are dropped", A and B nodes or the clients. Each
// fault adds cuts to the set; none removes one; Heal removes them all. Faults are therefore
// idempotent (a cut already made is not made again) and compose (the union of their cuts):
//
//	Isolate(i)          i->j and j->i for every other node j, and i<->clients
//	Split(g1, g2, ...)  i<->j for i and j in different groups; a node in no group, and the
//	                    clients, keep reaching everyone (Jepsen's partitions are between servers)
//	Bridge(a, b, mid)   Split(a, b): mid, on neither side, reaches and is reached by both
//	OneWay(from, to)    from->to only; to's packets to from are delivered
//	Heal()              every filter removed
//
// So that a node split from its peers can still be reached by clients, use Split([]int{i},
// others); Isolate is the unplugged cable. A TCP connection needs both directions, so a one-way
// cut stalls connections opened from either side; a datagram shows the direction alone.
//
// Method says how cuts are made: in the bridge namespace, a clsact qdisc on every port pi and one
// tc u32 filter per cut. Packets node i sends enter the bridge on pi's ingress, where a filter
// matching the IPv4 destination takes them; packets from the clients leave the bridge on the
// destination node's port's egress, where a filter matching the clients' source address takes
// them. The filter's action is mirred: redirect into sink0, whose peer sink1 discards frames
// addressed to others. The drop is silent, as a partition is: no ICMP error, no RST, no error to
// the sender's send call (the packet is lost after the sender's own stack forwarded it), so
// connects time out and established connections stall and retransmit; ARP still passes, so
// after Heal traffic resumes at once. (Neither sch_prio nor the gact "drop" action exists in the
// kernels we run on; mirred into a sink is the drop that does. Userspace nftables would also
// work, but it is not installed where the suite runs.)
//
// # Cleanup
//
// Close deletes every namespace of the set; deleting the bridge namespace deletes every veth
// pair and every filter with it. A node process still running in its namespace keeps that
// namespace alive, cut off from everything, until it exits: kill the cluster first (in tests,
// register Close before the cluster, so that t.Cleanup runs it after). br0's alias records the
// owning process ("weir-netns pid=N"): Create over a set of the same name whose owner has exited
// (a crashed run) removes it first; one whose owner runs fails with ErrInUse.
//
// # Goroutines and concurrency
//
// A Net's methods may be called from several goroutines. The package starts no background
// goroutine. DialContext runs the dial on a goroutine of its own, locked to its OS thread, which
// joins the bridge namespace (setns) for the dial and leaves it before unlocking the thread; if
// leaving fails, the thread stays locked and the runtime discards it when that goroutine ends, so
// no other goroutine ever runs in the wrong namespace. Fault methods hold a mutex while tc runs,
// so the recorded cuts match the installed filters; a tc run that fails midway leaves some of its
// filters installed (Cuts says "partial"), and Heal removes them all whatever is recorded. Close
// waits for dials in flight.
package netns

// Package netio owns the Kafka wire protocol transport: listeners, size-prefixed framing,
// request-header parsing, the registry of APIs and their version ranges, pipelined in-order
// responses, and the zero-copy response writer.
//
// Per connection, one reader goroutine reads frames (bounded by MaxRequestBytes: a larger, zero or
// negative size is logged and the connection closed), parses the request header, decodes the body
// with franz-go's kmsg, and calls the API's handler, which does the synchronous part of the work
// (for a produce: the appends) and returns a Reply. Frames are read through a 4 KiB read-ahead
// (one read(2) for a size prefix and a small request; the rest of a large frame goes straight
// into its buffer). A reply that needs no waiting, with no earlier reply still queued, is written
// by the reader itself (no goroutine hand-off per request; the next request is read once it is
// out, as Kafka's processor does); other replies go, in request order, to one writer goroutine
// through a queue. A Reply may be deferred (a produce waiting for fdatasync, a fetch
// parked on a long poll): the writer runs its Deferred function, which may block, before writing
// it. So a client's
// pipelined requests are processed in order and answered in order, while the disk waits of
// several requests overlap.
//
// Memory and connection bounds (budget.go, framepool.go). A request frame counts from its size
// prefix (before its body is read) until its buffer is released: after its reply is written, or
// as soon as its handler returned when the Reply is NoAlias (a produce: its records are in the
// log). Before reading a body the reader waits, reading nothing more from the socket (the
// connection is muted), until the frame fits: the connection's MaxConnectionBytes and
// MaxInFlight (requests read and not yet answered), then the broker-wide MaxQueuedBytes
// (queued.max.request.bytes, with a reserve for frames of at most 64 KiB so the small
// requests that complete other replies are still read; larger frames wait for it in arrival
// order). A frame always fits when nothing else
// is held, so a request of MaxRequestBytes is always served. After reading, a request is charged
// what it decodes into beyond its frame (Config.DecodeCost) against the same broker budget,
// waiting (muted) until the charge fits or no other charge is counted, and released with its
// reply: a request of many tiny entries costs what it decodes into, not its bytes. Then it takes
// one of MaxQueuedRequests slots (queued.max.requests) until its handler returns. Only readers wait;
// writers only release, so every wait ends once the replies ahead of it are written, and those
// wait for bounded things only (fdatasync, a long poll's max wait, acks=all's timeout). Idle
// frame buffers above 1 MiB are kept in a pool bounded to 64 MiB (or a quarter of
// MaxQueuedBytes); smaller ones in one sync.Pool per power-of-two size (framepool.go). Stats reports bytes, decode charges and requests held, muted
// connections and refused connections.
//
// Quota throttling (Reply.Throttle, KIP-219): a reply with a throttle is written at once, and
// the connection is muted for that long from when it is written: the reader reads no new
// request before the time is over, and a request whose frame was already being read is not
// handled before it (Stats.QuotaMutes counts these waits).
//
// Connections: at MaxConnections open (or a Listener's own MaxConnections) the listener's
// accept loop waits until one closes, as Kafka's acceptor does: new connections wait in the
// kernel's backlog; an InterBroker listener does not wait for the broker-wide limit. A new
// connection from an address that already has MaxConnectionsPerIP (or its
// ConnectionsPerIPOverrides entry) is closed at once, as Kafka does. MaxConnectionCreationRate
// (and a Listener's own) spaces accepts after a burst of one second's worth (rate.go).
//
// A response is a queue of parts: encoded bytes and file slices. Bytes go out with writev
// (net.Buffers), file slices with positional sendfile(2) from the segment file to the socket, so
// record bytes never pass through user space. A slice shorter on disk than promised (a
// truncation raced the send) closes the connection: the frame cannot be completed.
//
// A listener may carry a TLS configuration (SSL, SASL_SSL): its connections run the TLS
// handshake first (bounded by 10 s; a client certificate becomes the principal "User:<subject
// DN>"), and replies then go through the copying writer instead: file slices are read with
// pread into a pooled 256 KiB buffer, with the encoded bytes around them, and written to the
// TLS connection a buffer at a time (sendfile cannot encrypt). A listener may require
// authentication (SASL_PLAINTEXT, SASL_SSL): until a handler calls ConnInfo.SetAuthenticated,
// a frame larger than MaxUnauthenticatedBytes closes the connection on its size prefix, and a
// request of any API but PreAuthKeys (ApiVersions, SaslHandshake, SaslAuthenticate) closes it
// before it is decoded, so no other handler ever runs for an unauthenticated client.
//
// Kafka's rules on bad input: an unknown API key, a version outside the registered range (except
// ApiVersions, answered with UNSUPPORTED_VERSION at v0 as KIP-511 says), an unparsable header or
// body close the connection without a response. A panic in a handler is recovered, logged, and
// closes only that connection. Request buffers return to their pool once the response is written
// (decoded requests may alias them), or once the handler returned for a NoAlias reply.
package netio

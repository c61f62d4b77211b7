// Package netio owns the Kafka wire protocol transport: listeners, size-prefixed framing,
// request-header parsing, the registry of APIs and their version ranges, pipelined in-order
// responses, and the zero-copy response writer.
//
// Per connection, one reader goroutine reads frames (bounded by MaxRequestBytes: a larger, zero or
// negative size is logged and the connection closed), parses the request header, decodes the body
// with franz-go's kmsg, and calls the API's handler, which does the synchronous part of the work
// (for a produce: the appends) and returns a Reply. Replies go, in request order, to one writer
// goroutine through a bounded queue (backpressure: at most MaxInFlight requests per connection are
// outstanding). A Reply may be deferred (a produce waiting for fdatasync, a fetch parked on a long
// poll): the writer runs its Deferred function, which may block, before writing it. So a client's
// pipelined requests are processed in order and answered in order, while the disk waits of
// several requests overlap.
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
// closes only that connection. Request buffers come from bytebufferpool and return to it once the
// response is written (decoded requests may alias them).
package netio

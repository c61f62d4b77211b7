// Package netio will own the Kafka wire protocol: listeners, size-prefixed framing, pipelined
// in-order responses, pooled buffers, the per-API handler registry (codec from franz-go's kmsg)
// and the zero-copy fetch writer (writev for headers, sendfile(2) for segment file slices).
package netio

// Package benchmarks holds the go test -bench suites that span packages and the load-generation
// and latency-histogram code used by `weir bench`.
package benchmarks

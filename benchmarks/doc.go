// Package benchmarks is the load-generation, disk-baseline and latency-histogram library that
// `weir bench` links (load.go, loadgen.go, txnload.go, e2e.go, disk.go, rawdevice.go, hist.go,
// latency.go), and, in its _test.go files, the go test -bench suites that span packages.
// RunLoad and RunTxnLoad run their producers on one goroutine each (franz-go calls the promises
// on its own goroutines); the histograms they share are guarded by lockedHist's mutex.
//
// The non-test files do not import the testing package: the helpers that benchmarks in other
// packages call with a *testing.B (Dir, ReportLatency) take the small interfaces TB and
// MetricReporter instead, which every *testing.B and *testing.T satisfies. The weir binary
// therefore links no testing code through this package.
package benchmarks

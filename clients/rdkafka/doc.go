// Package rdkafka holds weir's tests with librdkafka, the C client behind confluent-kafka-go,
// confluent-kafka-python, node-rdkafka and most non-JVM clients: a plain produce/consume smoke
// test, and transactional producers (InitTransactions, BeginTransaction,
// SendOffsetsToTransaction, CommitTransaction, AbortTransaction) read back by read_committed
// consumers, against one in-process broker and an in-process 3-broker cluster.
//
// The package has no code of its own: only its test binary links confluent-kafka-go, whose
// bundled static librdkafka needs cgo and a C toolchain (CGO_ENABLED=1, gcc). Without cgo the
// tests are not built (their files carry the cgo build constraint) and the package is empty.
//
// Goroutines and ownership: each test owns its brokers (internal/testcluster/inproc, shut down
// when the test ends) and its librdkafka handles (closed by the test); librdkafka runs its own
// threads inside each handle.
package rdkafka

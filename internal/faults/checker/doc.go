// Package checker checks a fault run's history (internal/faults/history) against Kafka's
// semantics, after Jepsen's Kafka workload checker.
package checker

// Package replication owns clustering's data plane: the partition leader's state (ISR, high
// watermark, acks=all waiting) and the follower fetchers with the Kafka client connection they
// use. The control plane (metadata log, image, placement) is package controller.
package replication

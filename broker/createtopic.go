package broker

// maxPartitions bounds a topic's partition count (Kafka has no hard limit; this guards against
// a request that would create millions of directories).
const maxPartitions = 100000

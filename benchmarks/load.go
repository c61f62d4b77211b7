package benchmarks

import (
	"math/rand/v2"

	"github.com/weir-mq/weir/record"
)

// Size is a record value size with the name benchmark grids give it ("100B", "1KiB", "16KiB").
type Size struct {
	Name  string
	Bytes int
}

// RecordSizes are the record value sizes of the append grids.
var RecordSizes = []Size{{"100B", 100}, {"1KiB", 1 << 10}, {"16KiB", 16 << 10}}

// Batch builds one uncompressed RecordBatch v2 of records records, each with a null key and a value
// of valueBytes pseudo-random bytes (fixed seed: every run writes the same bytes). The producer
// fields are those of a non-idempotent producer. The log assigns offsets in place, so the same
// batch can be appended again and again.
func Batch(records, valueBytes int) []byte {
	rng := rand.New(rand.NewPCG(uint64(records), uint64(valueBytes)))
	recs := make([]record.Record, records)
	for i := range recs {
		v := make([]byte, valueBytes)
		for j := range v {
			v[j] = byte(rng.Uint32())
		}
		recs[i] = record.Record{Value: v}
	}
	return record.Build(nil, record.BuildOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
}

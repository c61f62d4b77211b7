package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/record"
)

// TestProduceManyPartitionsOneRequest sends Produce requests that carry two topics with many
// partitions each (by name, v9, and by topic id, v13), some partitions refused (out of range, an
// empty record set), and checks every partition's answer, the offsets assigned, and the
// per-topic produce series (bytes, records and batches, added once per topic of a request):
// they count exactly the batches appended, whatever the mix.
func TestProduceManyPartitionsOneRequest(t *testing.T) {
	b := startBroker(t, map[string]string{"log.flush.interval.messages": "9223372036854775807"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	const parts = 16
	topics := []string{"many-a", "many-b"}
	for _, tp := range topics {
		if _, err := adm.CreateTopic(ctx, parts, 1, nil, tp); err != nil {
			t.Fatal(err)
		}
	}
	tds, err := adm.ListTopics(ctx, topics...)
	if err != nil {
		t.Fatal(err)
	}
	seed := cl.Broker(int(b.nodeID))
	before := scrape(t, b)

	value := []byte("0123456789abcdef0123456789abcdef")
	want := map[string][3]int{} // topic -> bytes, records, batches appended
	next := map[string]int64{}  // "topic/partition" -> next offset
	for round, version := range []int16{9, 13, 13} {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = version, 1, 5000
		for ti, name := range topics {
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic, rt.TopicID = name, tds[name].ID
			for p := int32(0); p < parts+1; p++ { // partition `parts` does not exist
				rp := kmsg.NewProduceRequestTopicPartition()
				rp.Partition = p
				records := 1 + int(p)%4 + round
				if p == 5 && ti == 1 {
					records = 0 // an empty record set: INVALID_RECORD
				}
				if records > 0 {
					recs := make([]record.Record, records)
					for i := range recs {
						recs[i] = record.Record{Value: value}
					}
					rp.Records = record.Build(nil, record.BuildOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		kresp, err := seed.Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		resp := kresp.(*kmsg.ProduceResponse)
		if len(resp.Topics) != len(topics) {
			t.Fatalf("v%d: %d topics answered, want %d", version, len(resp.Topics), len(topics))
		}
		for ti, st := range resp.Topics {
			name := topics[ti]
			if len(st.Partitions) != parts+1 {
				t.Fatalf("v%d %s: %d partitions answered", version, name, len(st.Partitions))
			}
			for j, sp := range st.Partitions {
				rp := req.Topics[ti].Partitions[j]
				key := fmt.Sprintf("%s/%d", name, sp.Partition)
				switch {
				case sp.Partition == parts:
					if sp.ErrorCode == 0 {
						t.Errorf("v%d %s: a partition out of range was accepted", version, key)
					}
				case len(rp.Records) == 0:
					if sp.ErrorCode == 0 {
						t.Errorf("v%d %s: an empty record set was accepted", version, key)
					}
				default:
					if sp.ErrorCode != 0 || sp.BaseOffset != next[key] {
						t.Errorf("v%d %s: error %d base offset %d, want 0 and %d", version, key, sp.ErrorCode, sp.BaseOffset, next[key])
					}
					h, err := record.ParseHeader(rp.Records)
					if err != nil {
						t.Fatal(err)
					}
					next[key] += int64(h.RecordCount)
					w := want[name]
					w[0] += len(rp.Records)
					w[1] += int(h.RecordCount)
					w[2]++
					want[name] = w
				}
			}
		}
	}
	after := scrape(t, b)
	for _, name := range topics {
		for i, series := range []string{"weir_topic_bytes_in_total", "weir_topic_messages_in_total", "weir_topic_produced_batches_total"} {
			b0, _ := before.sum(series, "topic", name)
			if got := after.must(t, series, "topic", name) - b0; got != float64(want[name][i]) {
				t.Errorf("%s{topic=%s} grew by %v, want %d", series, name, got, want[name][i])
			}
		}
	}
}

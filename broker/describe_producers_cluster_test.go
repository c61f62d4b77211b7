package broker

// DescribeProducers answered by every replica, followers too (as Kafka, from the replica's own
// log): kafka-transactions.sh find-hanging --broker-id N asks broker N about every partition it
// holds a replica of.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestClusterDescribeProducersFollower(t *testing.T) {
	c := startCluster(t, 3, nil)
	const topic = "dp-follower"
	adm := kadm.NewClient(c.client())
	createReplicatedTopic(t, adm, topic, 1, 3, nil)
	c.waitISR(adm, topic, 3, 30*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := c.client(kgo.DefaultProduceTopic(topic)) // idempotent, acks=all
	for i := 0; i < 5; i++ {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint("v", i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	// Each broker, asked directly, reports the producer with its last sequence 4 (a follower
	// once it has copied the batches).
	for _, n := range c.nodes {
		waitFor(t, 20*time.Second, fmt.Sprintf("broker %d reporting the producer", n.id), func() (bool, string) {
			req := kmsg.NewPtrDescribeProducersRequest()
			rt := kmsg.NewDescribeProducersRequestTopic()
			rt.Topic, rt.Partitions = topic, []int32{0}
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl.Broker(int(n.id)))
			if err != nil {
				return false, err.Error()
			}
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				return false, fmt.Sprintf("response %+v", resp)
			}
			p := resp.Topics[0].Partitions[0]
			if p.ErrorCode != 0 {
				return false, fmt.Sprintf("error code %d", p.ErrorCode)
			}
			if len(p.ActiveProducers) != 1 || p.ActiveProducers[0].LastSequence != 4 {
				return false, fmt.Sprintf("producers %+v", p.ActiveProducers)
			}
			return true, ""
		})
	}
}

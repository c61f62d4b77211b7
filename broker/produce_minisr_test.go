package broker

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/engine"
)

// TestProduceMinISROnSingleReplica: acks=all to a partition of one replica whose
// min.insync.replicas is 2 is appended: the effective min.insync.replicas is capped at the
// replica count, as in Kafka 3.7+ (KAFKA-15583, Partition.effectiveMinIsr).
func TestProduceMinISROnSingleReplica(t *testing.T) {
	b := startBroker(t, nil)
	cl := v9Client(t, b)
	two := "2"
	createTestTopic(t, cl, "strict", map[string]*string{"min.insync.replicas": &two})
	if p := rawProduce(t, cl, "strict", wireBatch("kept")); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("acks=all on 1 replica with min.insync.replicas=2: error %v, base offset %d; want offset 0",
			kerr.ErrorForCode(p.ErrorCode), p.BaseOffset)
	}
}

// TestProduceEffectiveMinISR: on 2 in-process brokers, a partition of 2 replicas with
// min.insync.replicas=3 takes acks=all while both replicas are in sync (the effective minimum is
// 2, Kafka's effectiveMinIsr), and refuses it with NOT_ENOUGH_REPLICAS before the append once the
// follower left the ISR (controlled shutdown); acks=1 is still appended then.
func TestProduceEffectiveMinISR(t *testing.T) {
	brokers := startInprocCluster(t, 2, nil)
	cl := v9Client(t, brokers[0])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "wide", -1, -1
	a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	a.Replicas = []int32{1, 2} // broker 1 leads
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	c := kmsg.NewCreateTopicsRequestTopicConfig()
	c.Name, c.Value = "min.insync.replicas", kmsg.StringPtr("3")
	rt.Configs = append(rt.Configs, c)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %v %v", err, resp)
	}
	isr := func() []int32 {
		md := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr("wide")
		md.Topics = append(md.Topics, mt)
		r, err := md.RequestWith(ctx, cl)
		if err != nil || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
			return nil
		}
		return r.Topics[0].Partitions[0].ISR
	}
	waitISR := func(want []int32) {
		t.Helper()
		for !slices.Equal(isr(), want) {
			select {
			case <-ctx.Done():
				t.Fatalf("ISR %v, want %v", isr(), want)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	waitISR([]int32{1, 2})
	leading := func() bool {
		r := brokers[0].rm.get(engine.TopicPartition{Topic: "wide"})
		if r == nil {
			return false
		}
		_, ok := r.leaderEpoch()
		return ok
	}
	for !leading() { // broker 1 applies the new topic's image
		select {
		case <-ctx.Done():
			t.Fatal("broker 1 never led wide-0")
		case <-time.After(10 * time.Millisecond):
		}
	}
	p := rawProduce(t, cl, "wide", wireBatch("both in sync"))
	for (p.ErrorCode == kerr.UnknownTopicOrPartition.Code || p.ErrorCode == kerr.NotLeaderForPartition.Code) && ctx.Err() == nil {
		// The broker the client asked (from its metadata) has not applied the topic yet.
		time.Sleep(20 * time.Millisecond)
		p = rawProduce(t, cl, "wide", wireBatch("both in sync"))
	}
	if p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("acks=all, ISR 2 of 2 replicas, min.insync.replicas=3: error %v, base offset %d; want offset 0",
			kerr.ErrorForCode(p.ErrorCode), p.BaseOffset)
	}

	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	if err := brokers[1].Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	waitISR([]int32{1})
	if p := rawProduce(t, cl, "wide", wireBatch("refused")); p.ErrorCode != kerr.NotEnoughReplicas.Code {
		t.Fatalf("acks=all, ISR 1 of 2 replicas: error %v, base offset %d; want NOT_ENOUGH_REPLICAS", kerr.ErrorForCode(p.ErrorCode), p.BaseOffset)
	}
	// The refused batch was never appended: the next one (acks=1) takes offset 1.
	leaderAcks := v9Client(t, brokers[0], kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	preq := kmsg.NewPtrProduceRequest()
	preq.SetVersion(9)
	preq.Acks, preq.TimeoutMillis = 1, 10000
	prt := kmsg.NewProduceRequestTopic()
	prt.Topic = "wide"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = wireBatch("leader only")
	prt.Partitions = append(prt.Partitions, rp)
	preq.Topics = append(preq.Topics, prt)
	presp, err := preq.RequestWith(ctx, leaderAcks)
	if err != nil {
		t.Fatal(err)
	}
	if p := presp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != 1 {
		t.Fatalf("acks=1 after the refusal: error %v, base offset %d; want offset 1", kerr.ErrorForCode(p.ErrorCode), p.BaseOffset)
	}
}

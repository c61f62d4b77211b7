package broker

// ListPartitionReassignments (key 46), v0 (flexible), as Kafka 4.4 serves it. Authorization:
// DESCRIBE on CLUSTER (CLUSTER_AUTHORIZATION_FAILED at the top level without it). Topics null
// lists every partition in reassignment; otherwise the named partitions that are in
// reassignment (unknown or idle ones are left out, as Kafka does). Each carries the replicas
// (the target followed by the ones being removed), adding_replicas and removing_replicas, from
// this broker's metadata image.

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/controller"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 46, min: 0, max: 0, handle: handleListPartitionReassignments})
}

func handleListPartitionReassignments(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	resp.SetVersion(r.Version)
	if e := b.authorizeCluster(r, acl.OpDescribe); e != nil { // ACL: DESCRIBE on the cluster
		resp.ErrorCode = e.Code
		msg := e.Message
		resp.ErrorMessage = &msg
		return netio.Reply{Response: resp}
	}
	img := b.ctl.Image()
	add := func(t *controller.TopicInfo, parts []int32) {
		st := kmsg.NewListPartitionReassignmentsResponseTopic()
		st.Topic = t.Name
		for _, i := range parts {
			if i < 0 || int(i) >= len(t.Partitions) {
				continue
			}
			p := &t.Partitions[i]
			if !p.Reassigning() {
				continue
			}
			sp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
			sp.Partition = i
			sp.Replicas = append([]int32(nil), p.Replicas...)
			sp.AddingReplicas = append([]int32{}, p.AddingReplicas...)
			sp.RemovingReplicas = append([]int32{}, p.RemovingReplicas...)
			st.Partitions = append(st.Partitions, sp)
		}
		if len(st.Partitions) > 0 {
			resp.Topics = append(resp.Topics, st)
		}
	}
	if req.Topics == nil {
		names := make([]string, 0, len(img.Topics))
		for n := range img.Topics {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			t := img.Topics[n]
			parts := make([]int32, len(t.Partitions))
			for i := range parts {
				parts[i] = int32(i)
			}
			add(t, parts)
		}
		return netio.Reply{Response: resp}
	}
	for _, rt := range req.Topics {
		if t, ok := img.Topics[rt.Topic]; ok {
			add(t, rt.Partitions)
		}
	}
	return netio.Reply{Response: resp}
}

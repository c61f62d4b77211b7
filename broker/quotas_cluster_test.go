package broker

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterQuotasReachEveryBrokerAndSurviveRestart: a quota set through one broker of a
// 3-broker cluster is described by every broker (it is in the metadata log), and still after
// every broker was stopped and started again.
func TestClusterQuotasReachEveryBrokerAndSurviveRestart(t *testing.T) {
	c := startCluster(t, 3, nil)
	c1, alice := "c1", "alice"
	one := kadm.NewClient(c.clientAt(c.nodes[0]))
	setQuota(t, one, kadm.ClientQuotaEntity{{Type: "user", Name: &alice}, {Type: "client-id", Name: &c1}}, "producer_byte_rate", 1048576)
	setQuota(t, one, kadm.ClientQuotaEntity{{Type: "client-id"}}, "consumer_byte_rate", 2048)
	want := "client-id=<default>:consumer_byte_rate=2048;user=alice,client-id=c1:producer_byte_rate=1.048576e+06;"
	// describeAt asks broker n itself (its seed connection, not a broker kgo picks).
	describeAt := func(n *clusterNode) string {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cl := c.clientAt(n)
		defer cl.Close()
		resp, err := cl.SeedBrokers()[0].Request(ctx, kmsg.NewPtrDescribeClientQuotasRequest())
		if err != nil {
			return err.Error()
		}
		s := ""
		for _, q := range resp.(*kmsg.DescribeClientQuotasResponse).Entries {
			for i, e := range q.Entity {
				if i > 0 {
					s += ","
				}
				name := "<default>"
				if e.Name != nil {
					name = *e.Name
				}
				s += e.Type + "=" + name
			}
			s += ":"
			for _, v := range q.Values {
				s += fmt.Sprintf("%s=%v", v.Key, v.Value)
			}
			s += ";"
		}
		return s
	}
	check := func(when string) {
		for _, n := range c.nodes {
			waitFor(t, 20*time.Second, fmt.Sprintf("%s: quotas on broker %d", when, n.id), func() (bool, string) {
				got := describeAt(n)
				return got == want, got
			})
		}
	}
	check("after alter")
	for i := range c.nodes {
		c.signal(i, syscall.SIGTERM)
	}
	for i := range c.nodes {
		i := i
		go c.nodes[i].node.Restart(context.Background()) //nolint:errcheck // waited for by check
	}
	check("after restarting every broker")
}

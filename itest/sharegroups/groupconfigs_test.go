package sharegroups

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/testcluster/inproc"
)

// sgAlterGroupConfigs sends one IncrementalAlterConfigs SET of kvs on group's GROUP resource.
func sgAlterGroupConfigs(t *testing.T, cl *kgo.Client, group string, kvs ...string) (*kerr.Error, string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for i := 0; i+1 < len(kvs); i += 2 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = kvs[i], kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(kvs[i+1])
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(sgCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	r := resp.Resources[0]
	msg := ""
	if r.ErrorMessage != nil {
		msg = *r.ErrorMessage
	}
	if r.ErrorCode == 0 {
		return nil, msg
	}
	return kerr.ErrorForCode(r.ErrorCode).(*kerr.Error), msg
}

// sgDescribeGroupConfigs returns group's configs: value and source per name.
func sgDescribeGroupConfigs(t *testing.T, cl *kgo.Client, group string) map[string]kmsg.DescribeConfigsResponseResourceConfig {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(sgCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if e := kerr.ErrorForCode(resp.Resources[0].ErrorCode); e != nil {
		t.Fatalf("describe group configs: %v", e)
	}
	out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range resp.Resources[0].Configs {
		out[c.Name] = c
	}
	return out
}

// TestShareGroupConfigs: group configs are set, validated as Kafka's GroupConfig, described
// with their sources, survive a restart, and share.heartbeat.interval.ms reaches the members.
func TestShareGroupConfigs(t *testing.T) {
	dir := t.TempDir()
	b, stop := inproc.StartStoppable(t, map[string]string{"log.dirs": dir})
	cl, adm := sgClient(t, b.Addr())
	sgCreateTopic(t, adm, "sg-cfg", 1)

	d := sgDescribeGroupConfigs(t, cl, "cfg-group")
	if c := d["share.auto.offset.reset"]; c.Value == nil || *c.Value != "latest" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("default share.auto.offset.reset: %+v", c)
	}
	if c := d["share.session.timeout.ms"]; c.Value == nil || *c.Value != "45000" {
		t.Fatalf("default share.session.timeout.ms: %+v", c)
	}
	for _, c := range []struct {
		kvs  []string
		want *kerr.Error
		msg  string
	}{
		{[]string{"share.auto.offset.reset", "earliest", "share.heartbeat.interval.ms", "6000"}, nil, ""},
		{[]string{"share.auto.offset.reset", "by_duration:PT1H30M"}, nil, ""},
		{[]string{"share.auto.offset.reset", "sometimes"}, kerr.InvalidConfig, "share.auto.offset.reset"},
		{[]string{"share.auto.offset.reset", "by_duration:-PT1H"}, kerr.InvalidConfig, "share.auto.offset.reset"},
		{[]string{"share.isolation.level", "read_committed"}, nil, ""},
		{[]string{"share.isolation.level", "dirty"}, kerr.InvalidConfig, "share.isolation.level"},
		{[]string{"share.session.timeout.ms", "1000"}, kerr.InvalidConfig, "group.share.min.session.timeout.ms"},
		{[]string{"share.heartbeat.interval.ms", "20000"}, kerr.InvalidConfig, "group.share.max.heartbeat.interval.ms"},
		{[]string{"share.record.lock.duration.ms", "999"}, kerr.InvalidConfig, "share.record.lock.duration.ms"},
		{[]string{"no.such.config", "1"}, kerr.InvalidConfig, "no.such.config"},
		{[]string{"streams.session.timeout.ms", "45000"}, kerr.InvalidConfig, "streams.session.timeout.ms"},
	} {
		err, msg := sgAlterGroupConfigs(t, cl, "cfg-group", c.kvs...)
		if err != c.want || !strings.Contains(msg, c.msg) {
			t.Errorf("set %v: %v %q, want %v mentioning %q", c.kvs, err, msg, c.want, c.msg)
		}
	}
	if err, _ := sgAlterGroupConfigs(t, cl, "", "share.auto.offset.reset", "earliest"); err != kerr.InvalidRequest {
		t.Errorf("empty group name: %v", err)
	}
	d = sgDescribeGroupConfigs(t, cl, "cfg-group")
	if c := d["share.auto.offset.reset"]; c.Value == nil || *c.Value != "by_duration:PT1H30M" || c.Source != kmsg.ConfigSourceGroupConfig {
		t.Fatalf("share.auto.offset.reset after set: %+v", c)
	}
	if r := sgHeartbeat(t, cl, "cfg-group", "m", 0, "sg-cfg"); r.ErrorCode != 0 || r.HeartbeatIntervalMillis != 6000 {
		t.Fatalf("heartbeat interval from the group config: %+v", r)
	}
	cl.Close()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	b2, _ := inproc.StartStoppable(t, map[string]string{"log.dirs": dir})
	cl2, _ := sgClient(t, b2.Addr())
	d = sgDescribeGroupConfigs(t, cl2, "cfg-group")
	if c := d["share.isolation.level"]; c.Value == nil || *c.Value != "read_committed" {
		t.Fatalf("share.isolation.level after restart: %+v", c)
	}
	// A DELETE returns a key to its default.
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "cfg-group"
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op = "share.isolation.level", kmsg.IncrementalAlterConfigOpDelete
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	if resp, err := req.RequestWith(sgCtx(t), cl2); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("delete: %v %+v", err, resp)
	}
	if c := sgDescribeGroupConfigs(t, cl2, "cfg-group")["share.isolation.level"]; *c.Value != "read_uncommitted" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("after delete: %+v", c)
	}
}

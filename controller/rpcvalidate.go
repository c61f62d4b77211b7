package controller

// Validation of controller RPC requests before anything executes them:
//
//   - The operation is read from the start of the frame ({"op":"<name>", as this package's
//     client encodes every request) before the rest is read, and the frame length is bounded
//     by what that operation needs (opFrameLimit): a heartbeat is small, a create_topic with an
//     explicit assignment of many partitions is large. An unknown operation or a frame over its
//     bound closes the connection without allocating the frame.
//   - The JSON must decode strictly: no unknown fields, nothing after the object.
//   - Each operation may carry only its own fields, each bounded in length and count
//     (validateRequest), and put_records only the record kinds brokers write (acl, scram).
//
// Who may ask for what (a broker only for its own id) is checked by the controller at execution
// (authorizeRequest in controller.go), since it needs the image.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Record kinds that put_records may carry: what brokers write (ACL bindings, SCRAM
// credentials, the cluster's SASL secret that derives unknown users' salts, tombstones of
// deleted topic ids; broker/authz.go, broker/scram.go, broker/cluster.go).
const (
	RecordKindACL          = "acl"
	RecordKindSCRAM        = "scram"
	RecordKindSASLSecret   = "sasl"
	RecordKindDeletedTopic = "deleted-topic"
	// Client quotas (issue 14): one record per quota entity (broker/quotas.go).
	RecordKindClientQuota = "client-quota"
	// Dynamic broker configs and finalized feature levels (broker/brokerconfigs.go,
	// broker/features.go).
	RecordKindBrokerConfig = "broker_config"
	RecordKindFeature      = "feature"
	// Group configs (KIP-848, KIP-932; broker/groupconfigs.go): key "<config>/<group id>".
	RecordKindGroupConfig = "group_config"
)

var allowedRecordKinds = []string{RecordKindACL, RecordKindSCRAM, RecordKindSASLSecret, RecordKindDeletedTopic,
	RecordKindClientQuota, RecordKindBrokerConfig, RecordKindFeature, RecordKindGroupConfig}

// opFrameLimit is the largest frame each operation may arrive in.
var opFrameLimit = map[string]int{
	reqHeartbeat:        64 << 10,
	reqControlledStop:   4 << 10,
	reqSync:             4 << 10,
	reqAllocPIDs:        4 << 10,
	reqDeleteTopic:      4 << 10,
	reqAlterPartition:   64 << 10,
	reqAlterConfigs:     1 << 20,
	reqPutRecords:       maxFrame,
	reqCreateTopic:      maxFrame,
	reqCreatePartitions: maxFrame,
	reqElectLeaders:     maxFrame,
	reqLogDirsOffline:   512 << 10, // jbod (logdirs.go)
	reqReassign:         64 << 10,
	reqDescribeQuorum:   4 << 10,
	reqAddVoter:         4 << 10,
	reqRemoveVoter:      4 << 10,
}

// Bounds of request fields.
const (
	maxEndpoints     = 64
	maxNameLen       = 255
	maxAddrLen       = 300
	maxConfigs       = 1000
	maxConfigLen     = 64 << 10
	maxReplicas      = 64
	maxRecordChanges = 100000
	maxRecordKeyLen  = 64 << 10
	opPrefix         = `{"op":"`
	opPeek           = 32 // {"op":" and the longest operation name, with its quote
)

// readRequest reads one request frame from r, bounded by its operation, and decodes and
// validates it.
func readRequest(r io.Reader) (*request, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(hdr[:]))
	if n <= 0 || n > maxFrame {
		return nil, fmt.Errorf("controller rpc: frame length %d out of range", n)
	}
	head := make([]byte, min(n, opPeek))
	if _, err := io.ReadFull(r, head); err != nil {
		return nil, err
	}
	op, err := peekOp(head)
	if err != nil {
		return nil, err
	}
	if limit := opFrameLimit[op]; n > limit {
		return nil, fmt.Errorf("controller rpc: %s frame of %d bytes, at most %d", op, n, limit)
	}
	data := head
	if n > len(head) {
		data = make([]byte, n)
		copy(data, head)
		if _, err := io.ReadFull(r, data[len(head):]); err != nil {
			return nil, err
		}
	}
	return decodeRequest(data)
}

// peekOp returns the operation named at the start of a frame.
func peekOp(head []byte) (string, error) {
	if !bytes.HasPrefix(head, []byte(opPrefix)) {
		return "", errors.New(`controller rpc: a request must start with {"op":"`)
	}
	rest := head[len(opPrefix):]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return "", errors.New("controller rpc: operation name too long")
	}
	op := string(rest[:end])
	if _, ok := opFrameLimit[op]; !ok {
		return "", fmt.Errorf("controller rpc: unknown operation %q", op)
	}
	return op, nil
}

// decodeRequest decodes a frame strictly and validates it.
func decodeRequest(data []byte) (*request, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var req request
	if err := dec.Decode(&req); err != nil {
		return nil, fmt.Errorf("controller rpc: decode: %w", err)
	}
	if dec.More() {
		return nil, errors.New("controller rpc: data after the request")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("controller rpc: data after the request")
	}
	if err := validateRequest(&req); err != nil {
		return nil, err
	}
	return &req, nil
}

// validateRequest checks that req carries only its operation's fields, each within bounds.
// Its errors wrap kerr.InvalidRequest.
func validateRequest(req *request) error {
	bad := func(format string, args ...any) error {
		return kerrf(kerr.InvalidRequest, "controller rpc %s: "+format, append([]any{req.Op}, args...)...)
	}
	// Which optional fields each operation may set.
	type fields struct{ broker, endpoints, addr, register, create, name, total, assignment, configs, alter, n, kind, puts, deletes, incarnation, rack, elect, reassign, lastIndex bool }
	var f fields
	switch req.Op {
	case reqHeartbeat:
		f = fields{broker: true, endpoints: true, addr: true, register: true, incarnation: true, rack: true, lastIndex: true}
	case reqControlledStop:
		f = fields{broker: true}
	case reqCreateTopic:
		f = fields{create: true}
	case reqDeleteTopic:
		f = fields{name: true}
	case reqCreatePartitions:
		f = fields{name: true, total: true, assignment: true}
	case reqAlterConfigs:
		f = fields{name: true, configs: true}
	case reqAlterPartition:
		f = fields{alter: true}
	case reqAllocPIDs:
		f = fields{n: true}
	case reqPutRecords:
		f = fields{kind: true, puts: true, deletes: true}
	case reqReassign:
		f = fields{reassign: true}
		if err := validateReassignShape(req.Reassign); err != nil {
			return bad("%v", err)
		}
	case reqSync, reqDescribeQuorum:
	case reqElectLeaders:
		f = fields{elect: true}
	case reqLogDirsOffline: // jbod (logdirs.go)
		f = fields{broker: true}
		if err := validateOfflineReplicas(req.OfflineReplicas); err != nil {
			return err
		}
	case reqAddVoter:
		f = fields{broker: true, addr: true}
	case reqRemoveVoter:
		f = fields{broker: true}
	default:
		return kerrf(kerr.InvalidRequest, "unknown controller request %q", req.Op)
	}
	if req.Op != reqLogDirsOffline && req.OfflineReplicas != nil {
		return bad("field not used by this operation")
	}
	switch {
	case !f.broker && req.BrokerID != 0:
		return bad("unexpected broker id")
	case !f.endpoints && req.Endpoints != nil, !f.addr && req.Addr != "", !f.register && req.Register,
		!f.create && req.CreateTopic != nil, !f.name && req.Name != "", !f.total && req.Total != 0,
		!f.assignment && req.Assignment != nil, !f.configs && req.Configs != nil, !f.alter && req.AlterPartition != nil,
		!f.n && req.N != 0, !f.kind && req.Kind != "", !f.puts && req.Puts != nil, !f.deletes && req.Deletes != nil,
		!f.incarnation && req.Incarnation != "", !f.rack && req.Rack != "", !f.elect && req.Elect != nil,
		!f.reassign && req.Reassign != nil, !f.lastIndex && req.LastIndex != 0:
		return bad("field not used by this operation")
	}
	if req.TimeoutMs < 0 {
		return bad("negative timeout")
	}
	if f.broker && req.BrokerID < 0 {
		return bad("broker id %d", req.BrokerID)
	}
	if len(req.Endpoints) > maxEndpoints {
		return bad("%d endpoints, at most %d", len(req.Endpoints), maxEndpoints)
	}
	for _, e := range req.Endpoints {
		if len(e.Name) > maxNameLen || len(e.Host) > maxNameLen || e.Port < 0 || e.Port > 65535 {
			return bad("bad endpoint")
		}
	}
	if len(req.Addr) > maxAddrLen || len(req.Incarnation) > maxNameLen || len(req.Rack) > maxNameLen {
		return bad("address or incarnation too long")
	}
	if len(req.Name) > maxNameLen {
		return bad("name too long")
	}
	if err := validateAssignmentShape(req.Assignment); err != nil {
		return bad("%v", err)
	}
	if err := validateConfigs(req.Configs); err != nil {
		return bad("%v", err)
	}
	if ct := req.CreateTopic; ct != nil {
		if len(ct.Name) > maxNameLen {
			return bad("topic name too long")
		}
		if err := validateAssignmentShape(ct.Assignment); err != nil {
			return bad("%v", err)
		}
		if err := validateConfigs(ct.Configs); err != nil {
			return bad("%v", err)
		}
	}
	if ap := req.AlterPartition; ap != nil {
		if len(ap.Topic) > maxNameLen || len(ap.ISR) > maxReplicas || ap.Partition < 0 {
			return bad("bad alter_partition")
		}
	}
	if f.elect {
		if err := validateElect(req.Elect); err != nil {
			return bad("%v", err)
		}
	}
	if f.n && (req.N <= 0 || req.N > 1<<30) {
		return bad("cannot allocate %d producer ids", req.N)
	}
	if f.kind {
		ok := false
		for _, k := range allowedRecordKinds {
			ok = ok || req.Kind == k
		}
		if !ok {
			return bad("record kind %q is not one brokers write (acl, scram, sasl, deleted-topic, client-quota, broker_config, feature, group_config)", req.Kind)
		}
		if len(req.Puts)+len(req.Deletes) > maxRecordChanges {
			return bad("%d record changes, at most %d", len(req.Puts)+len(req.Deletes), maxRecordChanges)
		}
		for k := range req.Puts {
			if len(k) > maxRecordKeyLen {
				return bad("record key too long")
			}
		}
		for _, k := range req.Deletes {
			if len(k) > maxRecordKeyLen {
				return bad("record key too long")
			}
		}
	}
	return nil
}

func validateAssignmentShape(a [][]int32) error {
	if len(a) > maxPartitionsPerRequest {
		return fmt.Errorf("%d partitions, at most %d", len(a), maxPartitionsPerRequest)
	}
	for _, reps := range a {
		if len(reps) > maxReplicas {
			return fmt.Errorf("%d replicas, at most %d", len(reps), maxReplicas)
		}
	}
	return nil
}

func validateConfigs(m map[string]string) error {
	if len(m) > maxConfigs {
		return fmt.Errorf("%d configs, at most %d", len(m), maxConfigs)
	}
	for k, v := range m {
		if len(k) > maxNameLen || len(v) > maxConfigLen {
			return errors.New("config name or value too long")
		}
	}
	return nil
}

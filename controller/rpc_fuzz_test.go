package controller

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
)

// FuzzControllerRPC feeds arbitrary bytes to the controller RPC's frame reader, strict decoder
// and validation, and what passes to the per-operation authorization of a secured port: none
// may panic, and what is accepted must encode and decode to an accepted request again. The seed
// corpus (testdata/fuzz/FuzzControllerRPC) runs with go test.
func FuzzControllerRPC(f *testing.F) {
	for _, body := range []string{
		`{"op":"heartbeat","broker":1,"endpoints":[{"Name":"PLAINTEXT","Host":"127.0.0.1","Port":9092}],"addr":"127.0.0.1:9093","register":true,"incarnation":"abc"}`,
		`{"op":"create_topic","broker":0,"create_topic":{"Name":"t","Partitions":1,"ReplicationFactor":1,"Assignment":[[1,2]],"Configs":{"a":"b"}}}`,
		`{"op":"alter_partition","broker":0,"alter_partition":{"Topic":"t","Partition":0,"LeaderID":2,"LeaderEpoch":1,"PartitionEpoch":1,"ISR":[2]}}`,
		`{"op":"put_records","broker":0,"kind":"scram","puts":{"u":"c"},"deletes":["x"]}`,
		`{"op":"controlled_shutdown","broker":3}`,
		`{"op":"sync","broker":0}`,
		`{"op":"delete_topic","broker":0,"name":"t"}`,
	} {
		f.Add(binary.BigEndian.AppendUint32(nil, uint32(len(body))), []byte(body))
	}
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, []byte(`{"op":"heartbeat"`))
	c := &Controller{cfg: Config{Security: &PortSecurity{}}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	img := &Image{Brokers: map[int32]BrokerInfo{1: {ID: 1, Principal: "User:a"}, 2: {ID: 2, Principal: "User:b"}}}
	f.Fuzz(func(t *testing.T, hdr, body []byte) {
		req, err := readRequest(io.MultiReader(bytes.NewReader(hdr), bytes.NewReader(body)))
		if err != nil {
			return
		}
		_ = c.authorizeRequest(img, req, "User:b")
		data, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("encode an accepted request: %v", err)
		}
		if _, err := decodeRequest(data); err != nil {
			t.Fatalf("an accepted request does not round-trip: %v\n%s", err, data)
		}
	})
}

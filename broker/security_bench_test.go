package broker

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/weir-mq/weir/netio/testcert"
)

// BenchmarkSecurity measures what TLS costs produce and fetch throughput (franz-go, 16 KiB
// incompressible records, no compression, page-cache acknowledgement so the network path dominates), and the rate of new
// authenticated connections (connect + ApiVersions + SASL + Metadata) per mechanism:
//
//	go test -run '^$' -bench BenchmarkSecurity -benchtime 2000x ./broker/
//
// docs/security.md records the results.
func BenchmarkSecurity(b *testing.B) {
	ca := testcert.NewCA(b)
	caFile, certFile, keyFile := ca.Files(b, b.TempDir(), ca.Server(b))
	br := startBroker(b, map[string]string{
		"listeners":                   "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
		"ssl.ca.location":             caFile,
		"ssl.certificate.location":    certFile,
		"ssl.key.location":            keyFile,
		"log.flush.interval.messages": "9223372036854775807",
	})
	createUser(b, br.Addr(), "bench", "bench-secret", kadm.ScramSha256, kadm.ScramSha512)
	tc := &tls.Config{RootCAs: ca.Pool}
	const valueSize = 16 << 10
	value := make([]byte, valueSize) // incompressible
	_, _ = rand.Read(value)
	listeners := []struct {
		name string
		opts []kgo.Opt
	}{{"PLAINTEXT", nil}, {"SSL", []kgo.Opt{kgo.DialTLSConfig(tc)}}}
	noCompression := kgo.ProducerBatchCompression(kgo.NoCompression())
	for _, l := range listeners {
		addr := listenerAddr(b, br, l.name)
		topic := "bench-" + l.name
		createTopic(b, br.Addr(), topic, 1, nil)
		b.Run("produce/"+l.name, func(b *testing.B) {
			cl := newKgo(b, addr, append([]kgo.Opt{kgo.DefaultProduceTopic(topic), noCompression, kgo.ProducerLinger(time.Millisecond),
				kgo.ProducerBatchMaxBytes(1 << 20), kgo.MaxBufferedRecords(4096)}, l.opts...)...)
			ctx := context.Background()
			b.SetBytes(valueSize)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
					if err != nil {
						b.Error(err)
					}
				})
			}
			if err := cl.Flush(ctx); err != nil {
				b.Fatal(err)
			}
		})
		fetchTopic := "bench-fetch-" + l.name
		createTopic(b, br.Addr(), fetchTopic, 1, nil)
		// fetchSet records (64 MiB) are produced once; a fetch benchmark reads them from the
		// start again, with a new consumer, as often as b.N asks.
		const fetchSet = 4096
		prod := newKgo(b, addr, append([]kgo.Opt{kgo.DefaultProduceTopic(fetchTopic), noCompression}, l.opts...)...)
		for i := 0; i < fetchSet; i++ {
			prod.Produce(context.Background(), &kgo.Record{Value: value}, nil)
		}
		if err := prod.Flush(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.Run("fetch/"+l.name, func(b *testing.B) {
			ctx := context.Background()
			consumer := func() *kgo.Client {
				cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumeTopics(fetchTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
					kgo.FetchMaxBytes(16 << 20), kgo.FetchMaxPartitionBytes(8 << 20)}, l.opts...)...)
				if err != nil {
					b.Fatal(err)
				}
				return cl
			}
			b.SetBytes(valueSize)
			b.ResetTimer()
			cl, read := consumer(), 0
			for n := 0; n < b.N; {
				if read >= fetchSet {
					cl.Close()
					cl, read = consumer(), 0
				}
				fs := cl.PollFetches(ctx)
				if err := fs.Err0(); err != nil {
					b.Fatal(err)
				}
				n += fs.NumRecords()
				read += fs.NumRecords()
			}
			cl.Close()
		})
	}
	auths := []struct {
		name, listener string
		opts           []kgo.Opt
	}{
		{"PLAINTEXT", "PLAINTEXT", nil},
		{"SSL", "SSL", []kgo.Opt{kgo.DialTLSConfig(tc)}},
		{"SASL_PLAINTEXT-PLAIN", "SASL_PLAINTEXT", []kgo.Opt{kgo.SASL(plain.Auth{User: "bench", Pass: "bench-secret"}.AsMechanism())}},
		{"SASL_PLAINTEXT-SCRAM-SHA-256", "SASL_PLAINTEXT", []kgo.Opt{kgo.SASL(scram.Auth{User: "bench", Pass: "bench-secret"}.AsSha256Mechanism())}},
		{"SASL_PLAINTEXT-SCRAM-SHA-512", "SASL_PLAINTEXT", []kgo.Opt{kgo.SASL(scram.Auth{User: "bench", Pass: "bench-secret"}.AsSha512Mechanism())}},
		{"SASL_SSL-SCRAM-SHA-512", "SASL_SSL", []kgo.Opt{kgo.DialTLSConfig(tc), kgo.SASL(scram.Auth{User: "bench", Pass: "bench-secret"}.AsSha512Mechanism())}},
	}
	for _, a := range auths {
		addr := listenerAddr(b, br, a.listener)
		b.Run("connect/"+a.name, func(b *testing.B) {
			ctx := context.Background()
			for i := 0; i < b.N; i++ {
				cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, a.opts...)...)
				if err != nil {
					b.Fatal(err)
				}
				if err := cl.Ping(ctx); err != nil {
					b.Fatal(fmt.Errorf("connection %d: %w", i, err))
				}
				cl.Close()
			}
		})
	}
}

package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// maxLineBytes bounds one input line (one record).
const maxLineBytes = 64 << 20

// produceCmd runs `weir produce`: every line of stdin becomes a record of --topic (with
// --key-separator, the text before the first separator is the key). Records are sent in order
// and the command returns once every one is acknowledged, or with the first failure.
func produceCmd(ctx context.Context, args []string, stdin io.Reader, stderr io.Writer) error {
	fs := flag.NewFlagSet("produce", flag.ContinueOnError)
	var cf clientFlags
	cf.register(fs)
	topic := fs.String("topic", "", "topic to produce to (required)")
	sep := fs.String("key-separator", "", "split each line into key and value at the first occurrence of this separator")
	acks := fs.String("acks", "all", "acknowledgement: all (durable on every in-sync replica), 1 (leader) or 0 (none)")
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("produce: unexpected arguments %q", rest)
	}
	if *topic == "" {
		return errors.New("produce: --topic is required")
	}
	opts := []kgo.Opt{kgo.DefaultProduceTopic(*topic), kgo.AllowAutoTopicCreation()}
	switch *acks {
	case "all", "-1":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	default:
		return fmt.Errorf("produce: --acks must be all, 1 or 0, not %q", *acks)
	}
	cl, err := cf.client(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()

	var mu sync.Mutex
	var firstErr error
	var acked int
	done := func(_ *kgo.Record, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil && firstErr == nil {
			firstErr = err
		} else if err == nil {
			acked++
		}
	}
	sc := bufio.NewScanner(stdin)
	sc.Buffer(make([]byte, 64<<10), maxLineBytes)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		r := &kgo.Record{}
		if *sep != "" {
			k, v, ok := strings.Cut(text, *sep)
			if !ok {
				// Like Kafka's console producer, stop; the lines before are still sent.
				_ = cl.Flush(ctx)
				return fmt.Errorf("produce: line %d has no key separator %q", line, *sep)
			}
			r.Key = []byte(k)
			text = v
		}
		r.Value = []byte(text)
		cl.Produce(ctx, r, done)
		mu.Lock()
		err := firstErr
		mu.Unlock()
		if err != nil {
			break
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("produce: reading input: %w", err)
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		return fmt.Errorf("produce to %s: %w", *topic, firstErr)
	}
	fmt.Fprintf(stderr, "produced %d records to %s\n", acked, *topic)
	return nil
}

package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

const defaultConsumeFormat = `%v\n`

// consumeCmd runs `weir consume`: it reads every partition of --topic from --from, without a
// consumer group, and prints each record with --format until --max records were printed or ctx
// ends (Ctrl-C), which is not an error.
func consumeCmd(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("consume", flag.ContinueOnError)
	var cf clientFlags
	cf.register(fs)
	topic := fs.String("topic", "", "topic to consume (required)")
	from := fs.String("from", "end", "where to start in every partition: beginning, end or an offset")
	maxRecords := fs.Int("max", 0, "stop after this many records (0: never)")
	format := fs.String("format", defaultConsumeFormat,
		`output per record: %t topic, %p partition, %o offset, %k key, %v value, %T timestamp (ms), %% a percent sign; \n \t \r \\ escapes`)
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("consume: unexpected arguments %q", rest)
	}
	if *topic == "" {
		return errors.New("consume: --topic is required")
	}
	pieces, err := parseRecordFormat(*format)
	if err != nil {
		return err
	}
	var start kgo.Offset
	switch *from {
	case "beginning", "earliest", "start":
		start = kgo.NewOffset().AtStart()
	case "end", "latest":
		start = kgo.NewOffset().AtEnd()
	default:
		n, err := strconv.ParseInt(*from, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("consume: --from must be beginning, end or an offset >= 0, not %q", *from)
		}
		start = kgo.NewOffset().At(n)
	}
	cl, err := cf.client(kgo.ConsumeTopics(*topic), kgo.ConsumeResetOffset(start))
	if err != nil {
		return err
	}
	defer cl.Close()

	out := bufio.NewWriter(stdout)
	defer out.Flush()
	var line []byte
	printed := 0
	for *maxRecords <= 0 || printed < *maxRecords {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var fetchErr error
		fetches.EachError(func(t string, p int32, err error) {
			if fetchErr == nil && !errors.Is(err, context.Canceled) {
				fetchErr = fmt.Errorf("consume %s partition %d: %w", t, p, err)
			}
		})
		if fetchErr != nil {
			return fetchErr
		}
		for it := fetches.RecordIter(); !it.Done() && (*maxRecords <= 0 || printed < *maxRecords); {
			line = appendRecord(line[:0], pieces, it.Next())
			if _, err := out.Write(line); err != nil {
				return err
			}
			printed++
		}
		if err := out.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// formatPiece is literal text (verb 0) or one record field.
type formatPiece struct {
	verb    byte
	literal string
}

// parseRecordFormat splits a --format string into literal text and %-verbs, expanding the
// backslash escapes a shell leaves in single quotes.
func parseRecordFormat(f string) ([]formatPiece, error) {
	var pieces []formatPiece
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			pieces = append(pieces, formatPiece{literal: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(f); i++ {
		c := f[i]
		switch {
		case c == '\\' && i+1 < len(f):
			i++
			switch f[i] {
			case 'n':
				lit.WriteByte('\n')
			case 't':
				lit.WriteByte('\t')
			case 'r':
				lit.WriteByte('\r')
			case '\\':
				lit.WriteByte('\\')
			default:
				lit.WriteByte('\\')
				lit.WriteByte(f[i])
			}
		case c == '%':
			if i+1 >= len(f) {
				return nil, errors.New("--format ends with a lone %")
			}
			i++
			switch v := f[i]; v {
			case '%':
				lit.WriteByte('%')
			case 't', 'p', 'o', 'k', 'v', 'T':
				flush()
				pieces = append(pieces, formatPiece{verb: v})
			default:
				return nil, fmt.Errorf("--format: unknown verb %%%c (use %%t %%p %%o %%k %%v %%T %%%%)", v)
			}
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	return pieces, nil
}

// appendRecord appends r formatted by pieces to b.
func appendRecord(b []byte, pieces []formatPiece, r *kgo.Record) []byte {
	for _, p := range pieces {
		switch p.verb {
		case 0:
			b = append(b, p.literal...)
		case 't':
			b = append(b, r.Topic...)
		case 'p':
			b = strconv.AppendInt(b, int64(r.Partition), 10)
		case 'o':
			b = strconv.AppendInt(b, r.Offset, 10)
		case 'k':
			b = append(b, r.Key...)
		case 'v':
			b = append(b, r.Value...)
		case 'T':
			b = strconv.AppendInt(b, r.Timestamp.UnixMilli(), 10)
		}
	}
	return b
}

package engine

import (
	"io"

	"github.com/weir-mq/weir/record"
)

// records returns the records of the batch b concatenated (each with its length prefix),
// read with a record.Reader; tests only (the broker never holds a batch's records whole).
func (c *batchCodec) records(b []byte, h *record.Header, limit int) ([]byte, error) {
	rd := record.GetReader()
	defer rd.Release()
	if err := rd.Reset(b[:h.Size()], limit); err != nil {
		return nil, err
	}
	var out []byte
	for {
		r, err := rd.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, r.Encoded...)
	}
}

package record

// VarintForTest exposes varint to the external tests.
var VarintForTest = varint

// Buffer exposes the recompressor's output buffer (its capacity is what the bound limits).
func (rc *Recompressor) Buffer() []byte { return rc.out.b }

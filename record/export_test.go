package record

// VarintForTest exposes varint to the external tests.
var VarintForTest = varint

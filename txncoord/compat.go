package txncoord

import "github.com/twmb/franz-go/pkg/kerr"

// API keys whose older versions predate PRODUCER_FENCED (KIP-588).
const (
	apiAddPartitionsToTxn = 24
	apiAddOffsetsToTxn    = 25
	apiEndTxn             = 26
	apiInitProducerID     = 22
)

// ResponseError is the error a response of API apiKey at version carries for err: clients older
// than KIP-588 (InitProducerId < v4, AddPartitionsToTxn < v2, AddOffsetsToTxn < v2, EndTxn < v2)
// do not know PRODUCER_FENCED and get INVALID_PRODUCER_EPOCH instead, as Kafka's KafkaApis
// answers them.
func ResponseError(err *kerr.Error, apiKey, version int16) *kerr.Error {
	if err != kerr.ProducerFenced {
		return err
	}
	switch {
	case apiKey == apiInitProducerID && version < 4,
		apiKey == apiAddPartitionsToTxn && version < 2,
		apiKey == apiAddOffsetsToTxn && version < 2,
		apiKey == apiEndTxn && version < 2:
		return kerr.InvalidProducerEpoch
	}
	return err
}

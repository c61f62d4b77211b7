package broker

// ApiVersions (key 18), v0-v4. Built from the registry: exactly the APIs and versions served.
// An unknown ApiVersions version is answered by netio at v0 with UNSUPPORTED_VERSION (KIP-511).
// ApiVersions responses use response header v0 at every version.
// Features (v3+, features.go): every feature Kafka 4.4 knows, with the levels weir supports
// (metadata.version 33, kraft.version 0-1, transaction.version 0-2, the others 0 only), and the
// finalized levels: metadata.version 33, kraft.version 1, transaction.version as UpdateFeatures
// set it in the metadata log (else internal.transaction.version, 2 by default, as Kafka 4
// finalizes it on a new cluster); a level of 0 is not listed as finalized, as Kafka omits it.
// The finalized-features epoch is the raft index of the metadata image this broker has applied
// (Kafka's metadata offset): it only grows, so a client (the Java client keeps the features of
// the highest epoch it saw) takes a level changed by UpdateFeatures or a broker restart.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/controller"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 18, min: 0, max: 4, handle: handleApiVersions})
}

// transactionVersionFeature is Kafka's transaction.version feature (KIP-890, KIP-1022).
const (
	transactionVersionFeature = "transaction.version"
	maxTransactionVersion     = 2
)

func handleApiVersions(b *Broker, r *netio.Request) netio.Reply {
	resp := r.Body.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.SetVersion(r.Version)
	resp.ApiKeys = b.registry.ApiVersions()
	resp.FinalizedFeaturesEpoch = -1
	if r.Version >= 3 {
		resp.FinalizedFeaturesEpoch = 0
		var img *controller.Image
		if b.ctl != nil {
			img = b.ctl.Image()
		}
		if img != nil {
			resp.FinalizedFeaturesEpoch = int64(img.Index)
		}
		for _, f := range weirFeatures {
			sf := kmsg.NewApiVersionsResponseSupportedFeature()
			sf.Name, sf.MinVersion, sf.MaxVersion = f.name, f.min, f.max
			resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
			lv := b.finalizedLevel(img, f.name)
			if f.name == transactionVersionFeature {
				lv = int16(b.txns.version.Load()) // as the coordinator applies it
			}
			if lv > 0 {
				ff := kmsg.NewApiVersionsResponseFinalizedFeature()
				ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = f.name, lv, lv
				resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
			}
		}
	}
	return netio.Reply{Response: resp}
}

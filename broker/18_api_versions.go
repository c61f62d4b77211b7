package broker

// ApiVersions (key 18), v0-v4. Built from the registry: exactly the APIs and versions served.
// An unknown ApiVersions version is answered by netio at v0 with UNSUPPORTED_VERSION (KIP-511).
// ApiVersions responses use response header v0 at every version.
// Features (v3+): transaction.version is supported at levels 0-2 and finalized at
// internal.transaction.version (2 by default, as Kafka 4 finalizes it on a new cluster; a level
// of 0 is not listed as finalized, as Kafka omits it). The finalized-features epoch is the raft
// index of the metadata image this broker has applied (Kafka's metadata offset): it only grows,
// so a client (the Java client keeps the features of the highest epoch it saw) takes a level
// changed by a broker restart. Other Kafka features (metadata.version, group.version, ...) are
// not advertised: no client behaviour of weir depends on them.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

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
		sf := kmsg.NewApiVersionsResponseSupportedFeature()
		sf.Name, sf.MinVersion, sf.MaxVersion = transactionVersionFeature, 0, maxTransactionVersion
		resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
		resp.FinalizedFeaturesEpoch = 0
		if b.ctl != nil {
			if img := b.ctl.Image(); img != nil {
				resp.FinalizedFeaturesEpoch = int64(img.Index)
			}
		}
		if lv := b.txns.version; lv > 0 {
			ff := kmsg.NewApiVersionsResponseFinalizedFeature()
			ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = transactionVersionFeature, lv, lv
			resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
		}
	}
	return netio.Reply{Response: resp}
}

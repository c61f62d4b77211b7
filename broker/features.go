package broker

// Kafka's feature flags (KIP-584) as weir serves them: the supported ranges and finalized levels
// ApiVersions (v3+) reports, and the finalized levels UpdateFeatures (57_update_features.go)
// stores in the metadata log (Image.Records kind featureKind, key the feature name, value the
// level), so they are cluster-wide and survive restarts.
//
// weir advertises as supported only levels whose behaviour it has; a level above 0 of a
// feature whose protocol weir lacks is not advertised (supported range 0-0), so a client never
// takes a path weir cannot serve:
//   - metadata.version 33 (4.4-IV2), the level Kafka 4.4.0 finalizes on a new cluster; the only
//     level supported, since weir serves the API versions of Kafka 4.4. It does not change
//     weir's metadata log (hashicorp/raft, not KRaft records).
//   - transaction.version 0-2, finalized at the stored level, else internal.transaction.version
//     (2 by default, as Kafka 4.4 finalizes it). Changing it takes effect at once: the
//     transaction coordinator writes its records and bumps epochs as the new level says, and
//     clients that (re)start producers read the new level from ApiVersions.
//   - kraft.version 0-1, finalized at 1: the controller quorum's voters can be added and
//     removed at run time (AddRaftVoter / RemoveRaftVoter, KIP-853's meaning of level 1).
//     It cannot be changed by UpdateFeatures (Kafka refuses it there too).
//   - group.version 0-1, finalized at 1 as Kafka 4.4 does: level 1 serves KIP-848 consumer
//     groups (ConsumerGroupHeartbeat answers UNSUPPORTED_VERSION at 0).
//   - share.version 0-1, finalized at 1: KIP-932 share groups (ShareGroupHeartbeat v1,
//     ShareGroupDescribe, ShareFetch, ShareAcknowledge, the share group offsets admin APIs),
//     Kafka 4.1's level. weir always serves share groups, so UpdateFeatures cannot change it
//     (INVALID_UPDATE_VERSION), where Kafka lets level 0 turn them off.
//   - eligible.leader.replicas.version, streams.version: 0 only (weir has no eligible leader
//     replicas or streams groups), where Kafka 4.4 finalizes 1 and 1. A level of 0 is not
//     listed as finalized, as Kafka omits it.

import (
	"strconv"

	"github.com/weir-mq/weir/controller"
)

const (
	// featureKind is the Image.Records kind of finalized feature levels set by UpdateFeatures.
	featureKind = "feature"

	metadataVersionFeature = "metadata.version"
	shareVersionFeature    = "share.version"
	kraftVersionFeature    = "kraft.version"
	// groupVersionFeature level 1 enables KIP-848 consumer groups (ConsumerGroupHeartbeat).
	groupVersionFeature = "group.version"
	// metadataVersion44IV2 is metadata.version 4.4-IV2, Kafka 4.4.0's level on a new cluster.
	metadataVersion44IV2 = 33
)

// featureDef is one feature: the levels weir supports and the level finalized when the
// metadata log holds none.
type featureDef struct {
	name     string
	min, max int16
	// fixed: UpdateFeatures cannot change it (kraft.version).
	fixed bool
}

// weirFeatures are the features ApiVersions lists, sorted by name.
var weirFeatures = []featureDef{
	{name: "eligible.leader.replicas.version"},
	{name: groupVersionFeature, max: 1},
	{name: kraftVersionFeature, max: 1, fixed: true},
	{name: metadataVersionFeature, min: metadataVersion44IV2, max: metadataVersion44IV2},
	{name: shareVersionFeature, max: 1, fixed: true},
	{name: "streams.version"},
	{name: transactionVersionFeature, max: maxTransactionVersion},
}

func featureByName(name string) (featureDef, bool) {
	for _, f := range weirFeatures {
		if f.name == name {
			return f, true
		}
	}
	return featureDef{}, false
}

// finalizedLevel is a feature's finalized level in img: the one UpdateFeatures stored, else the
// default.
func (b *Broker) finalizedLevel(img *controller.Image, name string) int16 {
	if img != nil {
		if v, ok := img.Records[featureKind][name]; ok {
			if n, err := strconv.ParseInt(v, 10, 16); err == nil {
				if f, ok := featureByName(name); ok && int16(n) >= f.min && int16(n) <= f.max {
					return int16(n)
				}
			}
		}
	}
	switch name {
	case metadataVersionFeature:
		return metadataVersion44IV2
	case kraftVersionFeature:
		return 1
	case groupVersionFeature, shareVersionFeature:
		return 1
	case transactionVersionFeature:
		return int16(keyTxnVersion.Get(b.cfg))
	}
	return 0
}

// featuresImageChanged applies the finalized transaction.version of img.
func (b *Broker) featuresImageChanged(img *controller.Image) {
	tv := b.finalizedLevel(img, transactionVersionFeature)
	if b.txns.version.Swap(int32(tv)) != int32(tv) && b.txns.coord != nil {
		b.txns.coord.SetTransactionVersion(tv)
	}
}

// adminImageChanged applies what the admin APIs keep in the metadata image: dynamic broker
// configs (brokerconfigs.go) and finalized features. The replica manager calls it after
// every image it reconciles.
func (b *Broker) adminImageChanged(img *controller.Image) {
	b.brokerConfigsImageChanged(img)
	b.featuresImageChanged(img)
}

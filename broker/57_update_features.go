package broker

// UpdateFeatures (key 57), v0-v2 (v1 adds validate_only and upgrade_type, replacing
// allow_downgrade; v2 answers with the top-level error only). Authorization: ALTER on CLUSTER
// (CLUSTER_AUTHORIZATION_FAILED for every update otherwise). The updates apply all or none, as
// Kafka's controller applies them: the first refused update's error (INVALID_UPDATE_VERSION
// with Kafka's message) answers every one. A feature named twice is INVALID_REQUEST. Refused:
// a feature weir does not know, a level outside weir's supported range (features.go), a
// downgrade with upgrade_type UPGRADE (v0: allow_downgrade false), an unknown upgrade_type,
// and kraft.version (Kafka changes it only through its own tool). Accepted levels are stored in
// the metadata log (PutRecords, kind featureKind) and applied by every broker at once
// (featuresImageChanged); validate_only checks without storing.

import (
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 57, min: 0, max: 2, handle: handleUpdateFeatures})
}

// Kafka's FeatureUpdate.UpgradeType.
const (
	upgradeTypeUnknown        = 0
	upgradeTypeUpgrade        = 1
	upgradeTypeSafeDowngrade  = 2
	upgradeTypeUnsafeDowngrad = 3
	maxFeatureUpdates         = 64
)

func handleUpdateFeatures(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.UpdateFeaturesRequest)
	resp := req.ResponseKind().(*kmsg.UpdateFeaturesResponse)
	resp.SetVersion(r.Version)
	code, msg := int16(0), (*string)(nil)
	if e := b.authorizeCluster(r, acl.OpAlter); e != nil { // ACL: ALTER on CLUSTER
		code = e.Code
	} else if err := b.updateFeatures(req, r.Version); err != nil {
		code = errorCode(err)
		m := err.Error()
		msg = &m
	}
	resp.ErrorCode, resp.ErrorMessage = code, msg
	if r.Version < 2 {
		for _, u := range req.FeatureUpdates {
			res := kmsg.NewUpdateFeaturesResponseResult()
			res.Feature, res.ErrorCode, res.ErrorMessage = u.Feature, code, msg
			resp.Results = append(resp.Results, res)
		}
	}
	return netio.Reply{Response: resp}
}

// updateFeatures checks every update and stores them all, or none.
func (b *Broker) updateFeatures(req *kmsg.UpdateFeaturesRequest, version int16) error {
	if len(req.FeatureUpdates) > maxFeatureUpdates {
		return fmt.Errorf("%d feature updates, at most %d: %w", len(req.FeatureUpdates), maxFeatureUpdates, kerr.InvalidRequest)
	}
	img := b.ctl.Image()
	puts := map[string]string{}
	seen := map[string]bool{}
	for _, u := range req.FeatureUpdates {
		if seen[u.Feature] {
			return fmt.Errorf("Feature %s appears more than once in the request: %w", u.Feature, kerr.InvalidRequest)
		}
		seen[u.Feature] = true
		upgrade := u.UpgradeType
		if version == 0 {
			upgrade = upgradeTypeUpgrade
			if u.AllowDowngrade {
				upgrade = upgradeTypeSafeDowngrade
			}
		}
		invalid := func(why string) error {
			return fmt.Errorf("Invalid update version %d for feature %s. %s: %w", u.MaxVersionLevel, u.Feature, why, kerr.InvalidUpdateVersion)
		}
		f, ok := featureByName(u.Feature)
		switch {
		case upgrade <= upgradeTypeUnknown || upgrade > upgradeTypeUnsafeDowngrad:
			return invalid("The controller does not support the given upgrade type.")
		case !ok:
			return invalid("The controller does not support the given feature.")
		case u.MaxVersionLevel < 0:
			return invalid("A feature version cannot be less than 0.")
		case f.fixed:
			return invalid("Feature " + f.name + " cannot be changed with UpdateFeatures.")
		case u.MaxVersionLevel < f.min || u.MaxVersionLevel > f.max:
			return invalid(fmt.Sprintf("Local controller %d only supports versions %d-%d", b.ctl.ActiveID(), f.min, f.max))
		case u.MaxVersionLevel < b.finalizedLevel(img, f.name) && upgrade == upgradeTypeUpgrade:
			return invalid("Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade.")
		}
		puts[f.name] = strconv.Itoa(int(u.MaxVersionLevel))
	}
	if req.ValidateOnly || len(puts) == 0 {
		return nil
	}
	ctx, cancel := b.requestCtx()
	defer cancel()
	if err := b.ctl.PutRecords(ctx, featureKind, puts, nil); err != nil {
		return fmt.Errorf("storing finalized features: %w", err)
	}
	b.featuresImageChanged(b.ctl.Image())
	return nil
}

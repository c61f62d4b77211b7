package broker

// ApiVersions (key 18), v0-v4. Built from the registry: exactly the APIs and versions served.
// An unknown ApiVersions version is answered by netio at v0 with UNSUPPORTED_VERSION (KIP-511).
// ApiVersions responses use response header v0 at every version.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 18, min: 0, max: 4, handle: handleApiVersions})
}

func handleApiVersions(b *Broker, r *netio.Request) netio.Reply {
	resp := r.Body.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.SetVersion(r.Version)
	resp.ApiKeys = b.registry.ApiVersions()
	resp.FinalizedFeaturesEpoch = -1
	return netio.Reply{Response: resp}
}

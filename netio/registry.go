package netio

import (
	"fmt"
	"sort"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// HandlerFunc serves one decoded request. It must not retain req.Body's byte slices past the
// Reply (they alias the pooled request buffer) unless the Reply is deferred: the buffer is
// released after the reply is written. A Reply marked NoAlias must not refer to them at all:
// its buffer is released as soon as the handler returns.
type HandlerFunc func(req *Request) Reply

// API is one Kafka API served: its key, the versions served and its handler.
type API struct {
	Key        int16
	MinVersion int16
	MaxVersion int16
	Handle     HandlerFunc
	// AdvertisedMin, if set below MinVersion, is the lowest version advertised in ApiVersions
	// even though it is refused on use (Kafka 4 advertises Produce v0 for old librdkafka).
	AdvertisedMin *int16
}

// Registry maps API keys to APIs. It is filled at init time and read-only afterwards.
type Registry struct {
	mu   sync.RWMutex
	apis map[int16]API
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{apis: map[int16]API{}} }

// Register adds api; registering a key twice panics (a programming error found at init).
func (r *Registry) Register(api API) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.apis[api.Key]; dup {
		panic(fmt.Sprintf("netio: API key %d registered twice", api.Key))
	}
	if api.MinVersion > api.MaxVersion || api.Handle == nil {
		panic(fmt.Sprintf("netio: API key %d: bad registration", api.Key))
	}
	if req := kmsg.RequestForKey(api.Key); req == nil || req.MaxVersion() < api.MaxVersion {
		panic(fmt.Sprintf("netio: API key %d: codec cannot decode version %d", api.Key, api.MaxVersion))
	}
	r.apis[api.Key] = api
}

// Lookup returns the API registered for key.
func (r *Registry) Lookup(key int16) (API, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	a, ok := r.apis[key]
	return a, ok
}

// ApiVersions returns the advertised version ranges, sorted by key: exactly what is served.
func (r *Registry) ApiVersions() []kmsg.ApiVersionsResponseApiKey {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]kmsg.ApiVersionsResponseApiKey, 0, len(r.apis))
	for _, a := range r.apis {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = a.Key, a.MinVersion, a.MaxVersion
		if a.AdvertisedMin != nil {
			k.MinVersion = *a.AdvertisedMin
		}
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ApiKey < out[j].ApiKey })
	return out
}

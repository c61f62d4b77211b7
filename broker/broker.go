package broker

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/weir-mq/weir/controller"
	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/internal/clock"
	"github.com/weir-mq/weir/internal/faultctl"
	"github.com/weir-mq/weir/netio"
	"github.com/weir-mq/weir/replication"
	"github.com/weir-mq/weir/vfs"
)

// Version is weir's version string, reported at start-up.
const Version = "0.1.0"

// Broker is one weir broker: the log manager, the topic metadata, and the Kafka API handlers
// served by netio.
type Broker struct {
	cfg       *Config
	nodeID    int32
	clusterID string
	// faultDir is WEIR_TEST_FAULT_DIR, read once in New: empty (always, outside crash tests),
	// every test crash point is inert (faultpoints.go).
	faultDir string

	logs      *engine.Manager
	ctl       *controller.Controller // the metadata log (cluster.go)
	rm        *replicaManager        // local replicas and their roles (replicas.go)
	topics    *topicStore
	producers *producerIDs
	groups    groupsState // the group coordinator (groups.go)
	txns      txnState    // the transaction coordinator (txnstate.go)
	// shareCoord is the share coordinator over __share_group_state (sharecoord.go).
	shareCoord shareCoordState

	registry *netio.Registry
	server   *netio.Server

	// mu guards bound and advertised: New appends to them while binding the listeners;
	// Addr, ListenerAddr, advertisedFor and closeListeners read them from other goroutines.
	// Nothing else is under it, and no I/O is done while holding it (closeListeners closes
	// sockets, which does not block).
	mu         sync.Mutex
	bound      []netio.Listener
	advertised []ListenerSpec
	// topicMu serializes topic creation and deletion.
	topicMu sync.Mutex

	// internalRFWarn rate-limits the log of internal topics waiting for enough brokers
	// (internalrf.go): mu guards last, the time of each topic's last warning.
	internalRFWarn struct {
		mu   sync.Mutex
		last map[string]time.Time
	}

	// budget bounds the descriptors and mappings of the partitions' segments (budget.go).
	budget *engine.Budget

	// dirLocks are the log dirs' .lock files, held from New until Shutdown (or a failed New).
	dirLocks []*vfs.DirLock

	obs brokerObs // metrics, /healthz, /readyz, the admin listener (metrics.go)

	fetchSessions fetchSessionCache // incremental fetch sessions, KIP-227 (fetchsession.go)

	shareLeader shareLeaderState // share partitions led and share sessions, KIP-932 (sharefetch.go)

	authz authzState // ACLs (authz.go)

	sec *securityState // listener security: TLS, SASL (security.go)
	// interBroker is how followers connect to leaders: the inter-broker listener and its
	// security (interbroker.go); zero outside a cluster.
	interBroker replication.ClientSecurity
	// interBrokerName is the inter-broker listener's name ("" outside a cluster): it does not
	// wait for max.connections.
	interBrokerName string

	// jbod: replica moves between log dirs and offline replica reports (logdirs.go).
	logDirs logDirsState
	// Client quotas (issue 14): the quota table and sensors (quotas.go).
	quotas quotaState
}

// apiDef is an API handler registered by one file per API key (in its init()).
type apiDef struct {
	key           int16
	min, max      int16
	advertisedMin *int16
	handle        func(b *Broker, r *netio.Request) netio.Reply
}

var apiDefs []apiDef

func register(d apiDef) { apiDefs = append(apiDefs, d) }

// New binds the listeners, starts the controller (waiting for the metadata quorum), opens the
// broker's storage (recovering log dirs as needed) and takes the roles the metadata gives this
// broker's replicas. Start serves.
func New(cfg *Config) (*Broker, error) {
	dirs := cfg.LogDirs()
	if len(dirs) == 0 {
		return nil, errors.New("no log dirs configured")
	}
	limits, err := readNetLimits(cfg)
	if err != nil {
		return nil, err
	}
	b := &Broker{cfg: cfg, nodeID: cfg.NodeID(), faultDir: os.Getenv(faultDirEnv)}
	if b.faultDir != "" {
		slog.Warn("test crash points are armed: "+faultDirEnv+" is set (never set it in production)", "dir", b.faultDir)
	}
	usable := usableLogDirs(dirs) // jbod: a failed log dir is offline, the others serve (logdirs.go)
	for _, d := range usable {
		if err := os.MkdirAll(d, vfs.DirMode); err != nil {
			return nil, fmt.Errorf("log dir %s: %w", d, err)
		}
	}
	// Each log dir (and metadata.log.dir when it is another directory, as Kafka locks it too) is
	// locked for the broker's life, before anything in it is read or written: a second broker on
	// a dir in use stops here, naming the dir.
	lockDirs := usable
	if md := keyMetadataLogDir.Get(cfg); md != "" && !slices.Contains(dirs, md) {
		if err := os.MkdirAll(md, vfs.DirMode); err != nil {
			return nil, fmt.Errorf("metadata.log.dir %s: %w", md, err)
		}
		lockDirs = append(slices.Clip(usable), md)
	}
	for _, d := range lockDirs {
		lk, err := vfs.LockDir(d)
		if err != nil {
			b.unlockDirs()
			return nil, err
		}
		b.dirLocks = append(b.dirLocks, lk)
	}
	if b.budget, err = computeBudget(cfg); err != nil {
		b.unlockDirs()
		return nil, err
	}
	if b.clusterID, err = loadMetaProperties(usable, b.nodeID, keyClusterID.Get(cfg)); err != nil {
		b.unlockDirs()
		return nil, err
	}
	if err := b.bind(); err != nil {
		b.unlockDirs()
		return nil, err
	}
	fail := func(err error) (*Broker, error) {
		if b.ctl != nil {
			b.ctl.Close()
		}
		b.closeListeners()
		b.stopObs()
		b.unlockDirs()
		return nil, err
	}
	b.initObs() // the admin listener answers /healthz and /readyz during start-up (metrics.go)
	if err := b.startController(b.advertised); err != nil {
		return fail(err)
	}
	b.loadBrokerConfigs(b.ctl.Image()) // dynamic broker configs, before the logs open (brokerconfigs.go)
	if b.producers, err = openProducerIDs(dirs[0]); err != nil {
		return fail(err)
	}
	if b.clustered() {
		b.producers.alloc = b.allocateProducerIDs
	}
	b.logs, err = engine.OpenManager(engine.ManagerConfig{
		Dirs:                       dirs,
		FS:                         faultctl.FS(vfs.OS), // vfs.OS itself unless built with -tags faults
		Budget:                     b.budget,
		ConfigFor:                  b.logConfigFor,
		RecoveryThreadsPerDir:      int(keyNumRecoveryThreadsPerDataDir.Get(cfg)),
		RetentionCheckInterval:     keyLogRetentionCheckInterval.Get(cfg),
		CheckpointInterval:         keyLogFlushOffsetCheckpointInterval.Get(cfg),
		CleanerThreads:             cleanerThreads(cfg),
		CleanerBackoff:             keyLogCleanerBackoff.Get(cfg),
		CleanerDedupeBufferSize:    keyLogCleanerDedupeBufferSize.Get(cfg),
		CleanerIOBufferSize:        int(keyLogCleanerIOBufferSize.Get(cfg)),
		CleanerIOMaxBytesPerSecond: keyLogCleanerIOMaxBytesPerSec.Get(cfg),

		ProducerIDExpirationCheckInterval: keyProducerIDExpirationCheckInterval.Get(cfg),
	})
	if err != nil {
		return fail(err)
	}
	if err := b.adoptOrphanLogs(); err != nil {
		b.logs.Close()
		return fail(err)
	}
	if err := b.openGroups(); err != nil {
		b.logs.Close()
		return fail(err)
	}
	if err := b.openTxns(); err != nil {
		b.logs.Close()
		return fail(err)
	}
	if err := b.openShareCoord(); err != nil {
		b.logs.Close()
		return fail(err)
	}
	b.rm = newReplicaManager(b)
	b.rm.reconcile()
	b.quotas.init(b.cfg) // client quotas (quotas.go)
	b.registry = netio.NewRegistry()
	for _, d := range apiDefs {
		d := d
		b.registry.Register(netio.API{Key: d.key, MinVersion: d.min, MaxVersion: d.max, AdvertisedMin: d.advertisedMin,
			Handle: func(r *netio.Request) netio.Reply { return b.handleWithRequestQuota(d, r) }})
	}
	b.obs.reg.MustRegister(securityCollector{b.sec}) // SASL counters (security.go)
	ncfg := netio.Config{
		MaxUnauthenticatedBytes: int32(keySASLServerMaxReceiveSize.Get(cfg)),
		MaxRequestBytes:         int32(keySocketRequestMaxBytes.Get(cfg)),
		IdleTimeout:             keyConnectionsMaxIdle.Get(cfg),
		Observer:                b.obs.reg,
	}
	limits.applyTo(&ncfg)
	b.server = netio.NewServer(ncfg, b.registry)
	b.obs.built.Store(true)
	return b, nil
}

// logConfigFor is a partition log's configuration: the topic's overrides over the broker's
// defaults; a single-replica partition's high watermark follows its own log.
func (b *Broker) logConfigFor(topic string) engine.Config {
	t, _ := b.topics.get(topic)
	c := b.cfg.LogConfig(t.Configs)
	c.LocalHighWatermark = len(t.Assign) == 0 || len(t.Assign[0].Replicas) <= 1
	c.Observer = b.obs.reg // fsync latency and group-commit batch sizes (metrics.go)
	return c
}

// bind binds every listener; a port-0 listener advertises the port it got, unless
// advertised.listeners says otherwise.
func (b *Broker) bind() error {
	specs, err := b.cfg.Listeners()
	if err != nil {
		return err
	}
	adv, err := b.cfg.AdvertisedListeners()
	if err != nil {
		return err
	}
	explicitAdv := keyAdvertisedListeners.IsSet(b.cfg)
	if b.sec, err = newSecurityState(b.cfg, specs); err != nil {
		return err
	}
	if err := b.setupInterBroker(specs, adv); err != nil {
		return err
	}
	for _, spec := range specs {
		ln, err := net.Listen("tcp", spec.Addr())
		if err != nil {
			b.closeListeners()
			return fmt.Errorf("listen %s://%s: %w", spec.Name, spec.Addr(), err)
		}
		l := netio.Listener{Name: spec.Name, Listener: ln, InterBroker: spec.Name == b.interBrokerName}
		b.sec.apply(&l)
		if err := listenerLimits(b.cfg, &l); err != nil {
			ln.Close()
			b.closeListeners()
			return err
		}
		b.mu.Lock()
		b.bound = append(b.bound, l)
		b.mu.Unlock()
		port := ln.Addr().(*net.TCPAddr).Port
		for i := range adv {
			if adv[i].Name == spec.Name && (adv[i].Port == 0 || !explicitAdv) {
				adv[i].Port = port
			}
		}
	}
	b.mu.Lock()
	b.advertised = adv
	b.mu.Unlock()
	return nil
}

// Start serves the listeners bound by New.
func (b *Broker) Start() error {
	adv := b.advertised
	b.rm.start()
	b.startLogDirs() // jbod: moves between log dirs, offline replica reports (logdirs.go)
	b.startGroups()
	b.startTxns()
	if b.sec.anySASL() {
		go b.ensureScramSecret() // the secret behind unknown users' fake SCRAM credentials (scram.go)
	}
	b.rm.reconcile() // elect the coordinator for the __consumer_offsets partitions led here
	for _, l := range b.bound {
		b.server.Serve(l)
	}
	b.obs.started.Store(true)
	var advs, binds []string
	for _, a := range adv {
		advs = append(advs, a.Name+"://"+a.Addr())
	}
	for _, l := range b.bound {
		binds = append(binds, l.Name+"://"+l.Addr().String())
	}
	flushMsgs := keyLogFlushIntervalMessages.Get(b.cfg)
	policy := "durable acks (fdatasync with group commit before every acknowledgement)"
	if flushMsgs != 1 {
		policy = "page-cache acks (fdatasync every " + strconv.FormatInt(flushMsgs, 10) + " messages)"
	}
	slog.Info("weir broker started", "version", Version, "node.id", b.nodeID, "cluster.id", b.clusterID,
		"listeners", strings.Join(binds, ","), "advertised.listeners", strings.Join(advs, ","),
		"log.dirs", strings.Join(b.cfg.LogDirs(), ","), "flush", policy, "topics", len(b.topics.all()),
		"controller.quorum.voters", keyControllerQuorumVoters.Get(b.cfg), "active.controller", b.ctl.ActiveID())
	return nil
}

func (b *Broker) closeListeners() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range b.bound {
		l.Close()
	}
}

// Addr returns the bound address of the first listener (tests use port 0).
func (b *Broker) Addr() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.bound) == 0 {
		return ""
	}
	return b.bound[0].Addr().String()
}

// Advertised returns the advertised listener of name (or the first one).
func (b *Broker) advertisedFor(listener string) ListenerSpec {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, a := range b.advertised {
		if a.Name == listener {
			return a
		}
	}
	if len(b.advertised) > 0 {
		return b.advertised[0]
	}
	return ListenerSpec{Host: "127.0.0.1", Port: 9092}
}

// Shutdown stops accepting connections, answers the requests already read, then flushes every
// log, writes the checkpoints and the clean-shutdown marker, so the next start scans nothing.
func (b *Broker) Shutdown(ctx context.Context) error {
	b.obs.stopping.Store(true) // /readyz answers 503 from now on
	defer b.stopObs()
	if b.clustered() && keyControlledShutdownEnable.Get(b.cfg) {
		// Move this broker's leaderships to other in-sync replicas first, so clients switch
		// to the new leaders while this broker still answers.
		csCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := b.ctl.ControlledShutdown(csCtx)
		cancel()
		if err != nil {
			slog.Warn("controlled shutdown did not complete; stopping anyway", "err", err)
		} else {
			_ = b.waitImage(ctx, func(img *controller.Image) bool { return true })
		}
	}
	errs := []error{b.server.Shutdown(ctx)}
	b.closeShares()
	b.closeShareCoord()
	b.closeTxns()
	b.closeLogDirs() // jbod (logdirs.go)
	b.rm.close()
	b.closeGroups()
	errs = append(errs, b.ctl.Close())
	errs = append(errs, b.logs.Close())
	b.unlockDirs()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	slog.Info("weir broker stopped cleanly")
	return nil
}

// unlockDirs releases the log dirs' locks.
func (b *Broker) unlockDirs() {
	for _, lk := range b.dirLocks {
		if err := lk.Unlock(); err != nil {
			slog.Warn("releasing log dir lock", "dir", lk.Dir(), "err", err)
		}
	}
	b.dirLocks = nil
}

// Logs exposes the log manager (tests, tools).
func (b *Broker) Logs() *engine.Manager { return b.logs }

// loadMetaProperties reads or writes each log dir's meta.properties (Kafka's format: version,
// node.id, cluster.id, directory.id) and returns the cluster id. A node id or cluster id that
// disagrees with the configuration is refused: the dir belongs to another broker.
func loadMetaProperties(dirs []string, nodeID int32, configured string) (string, error) {
	clusterID := configured
	type dirMeta struct{ path, cluster, node string }
	var metas []dirMeta
	for _, d := range dirs {
		p := filepath.Join(d, "meta.properties")
		props, err := LoadProperties(p)
		if errors.Is(err, os.ErrNotExist) {
			metas = append(metas, dirMeta{path: p})
			continue
		}
		if err != nil {
			return "", err
		}
		if n := props["node.id"]; n != "" && n != strconv.Itoa(int(nodeID)) {
			return "", fmt.Errorf("%s says node.id %s, configured %d", p, n, nodeID)
		}
		c := props["cluster.id"]
		if clusterID == "" {
			clusterID = c
		} else if c != "" && c != clusterID {
			return "", fmt.Errorf("%s says cluster.id %s, expected %s", p, c, clusterID)
		}
		metas = append(metas, dirMeta{path: p, cluster: c, node: props["node.id"]})
	}
	if clusterID == "" {
		var raw [16]byte
		_, _ = rand.Read(raw[:])
		clusterID = base64.RawURLEncoding.EncodeToString(raw[:])
	}
	for _, m := range metas {
		if m.cluster != "" {
			continue
		}
		var raw [16]byte
		_, _ = rand.Read(raw[:])
		s := fmt.Sprintf("#\n#%s\ncluster.id=%s\ndirectory.id=%s\nnode.id=%d\nversion=1\n",
			clock.Now().UTC().Format(time.UnixDate), clusterID, base64.RawURLEncoding.EncodeToString(raw[:]), nodeID)
		// Atomically (temp file, fsync, rename, directory fsync): a crash never leaves a
		// truncated meta.properties that would stop the next start.
		if err := vfs.WriteFileAtomic(faultctl.FS(vfs.OS), m.path, []byte(s)); err != nil {
			return "", fmt.Errorf("write %s: %w", m.path, err)
		}
	}
	return clusterID, nil
}

// cleanerThreads maps log.cleaner.enable and log.cleaner.threads to the engine's setting
// (negative disables the background cleaner).
func cleanerThreads(cfg *Config) int {
	if !keyLogCleanerEnable.Get(cfg) {
		return -1
	}
	return int(keyLogCleanerThreads.Get(cfg))
}

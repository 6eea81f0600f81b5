package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/metadatad/metadatad/internal/diskspace"
	"github.com/metadatad/metadatad/server"
	"github.com/metadatad/metadatad/server/auth"
	"github.com/metadatad/metadatad/server/tlscreds"
	"github.com/metadatad/metadatad/store/acquisition"
	"github.com/metadatad/metadatad/store/devices"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble/backup"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/embedded"
	"github.com/metadatad/metadatad/store/retention/policy"
	"github.com/metadatad/metadatad/store/video"
)

func main() {
	os.Exit(exitCode(run(os.Args[1:], os.Stdout), os.Stderr))
}

// serve is the daemon: `metadatad [serve] -flags`.
func serve(ctx context.Context, args []string, out io.Writer) error {
	cfg, err := parseConfig(args, out)
	if err != nil {
		return asUsage("metadatad", err)
	}
	if cfg.version {
		fmt.Fprintln(out, readBuildInfo())
		return nil
	}
	log := startLog(cfg)
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	// Every address is bound before the store is opened: a taken port
	// fails the start before anything is created.
	lis, err := listen(cfg)
	if err != nil {
		return err
	}
	defer lis.close()
	store, err := openBackend(ctx, cfg, log)
	if err != nil {
		return err
	}
	leaveStoreOpen := false
	defer func() {
		if !leaveStoreOpen {
			closeStore(store, log)
		}
	}()
	obs, err := observe(ctx, cfg, &store)
	if err != nil {
		return err
	}
	defer obs.shutdown(cfg.shutdownTimeout, log)
	svc, err := openServices(ctx, cfg, store, obs, log)
	if err != nil {
		return err
	}
	authn, err := cfg.security.authenticator(ctx, log)
	if err != nil {
		return err
	}
	creds, err := cfg.security.credentials()
	if err != nil {
		return err
	}
	if creds != nil {
		defer creds.Close()
	}
	srv, err := server.New(serverOptions(cfg, store, svc, obs, authn, creds, log))
	if err != nil {
		return err
	}

	deleter, err := openBlobDeleter(cfg, svc, store, log)
	if err != nil {
		return err
	}
	stopFleet := svc.fleet.start()
	defer stopFleet()
	purges := startPurges(svc.engine, svc.schedule, svc.budget, svc.budgeter, deleter, log)
	defer func() {
		if !leaveStoreOpen { // else a purge is stuck in the store: waiting would never end
			purges.stop(context.Background())
		}
	}()
	if obs.metrics != nil {
		// The endpoint outlives the gRPC server, so the last scrape sees the
		// calls of the shutdown.
		metricsCtx, stopMetrics := context.WithCancel(context.Background())
		defer stopMetrics()
		obs.metrics.WatchSilentCameras(svc.fleet.silentCounts)
		serveMetrics(metricsCtx, cfg, obs.metrics, lis.metrics, store, svc.engine, svc.repos, served{srv: srv, deleter: deleter, budgeter: svc.budgeter}, log)
	}
	if lis.health != nil {
		serveHealthProbes(srv, lis.health, log)
	}
	addr := lis.grpc.Addr().String()
	cfg.security.warnUnauthenticated(ctx, log, addr)
	log.Info("serving", append([]any{"addr", addr, "replica", cfg.replicaID, "auth", authn != nil, "tls", creds != nil, "mtls", cfg.security.tlsClientCA != ""}, store.describe...)...)
	leaveStoreOpen, err = serveUntilSignalled(ctx, cfg, srv, lis.grpc, purges, log)
	return err
}

// startLog is the daemon's logger, having logged what the flags and the
// runtime settings it chose have to say.
func startLog(cfg config) *slog.Logger {
	log := cfg.logger(os.Stderr)
	for _, w := range cfg.warnings {
		log.Warn(w)
	}
	if pct, set := tuneRuntime(os.Getenv); set {
		log.Debug("garbage collector target set, GOGC unset", "gc_percent", pct)
	}
	return log
}

func closeStore(store backend, log *slog.Logger) {
	if err := store.close(); err != nil {
		log.Error("closing store", "err", err)
	}
}

// serveHealthProbes serves -health-listen: grpc.health.v1.Health alone,
// plaintext, for the kubelet's probes.
func serveHealthProbes(srv *server.Server, lis net.Listener, log *slog.Logger) {
	log.Info("serving health probes", "addr", lis.Addr().String())
	go func() {
		if err := srv.ServeHealth(lis); err != nil {
			log.Error("health probe listener stopped", "err", err)
		}
	}()
}

// services are the repositories and the purge engine over the store.
type services struct {
	repos        map[images.Kind]*images.Repository
	videos       *video.Repository
	deviceStates *devices.Repository
	acquisitions *acquisition.Repository
	fleet        *fleetViews
	engine       *retention.Engine
	schedule     retention.Schedule // zero: no built-in schedule
	budget       embedded.Budget    // zero: no storage budget
	budgeter     *embedded.Budgeter // nil: no storage budget
	// traffic is the server's record of its calls, which purges yield to.
	traffic *server.Traffic
}

func openServices(ctx context.Context, cfg config, store backend, obs observability, log *slog.Logger) (*services, error) {
	db := store.tables
	svc := &services{repos: map[images.Kind]*images.Repository{}, traffic: &server.Traffic{}}
	var err error
	cameras := map[images.Kind]*cameraTable{}
	for _, kind := range images.Kinds {
		opts := images.Options{Kind: kind, Table: cfg.tables[kind], IndexShards: cfg.indexShards,
			CreateTimeout: cfg.createTimeout, LandingMargin: cfg.landingMargin}
		if cameras[kind], err = openCameraTable(ctx, cfg, store, kind, log); err != nil {
			return nil, err
		}
		if cameras[kind] != nil {
			opts.Created = cameras[kind].recorder.Created
		}
		if svc.repos[kind], err = images.Open(ctx, db, opts); err != nil {
			return nil, err
		}
	}
	if svc.fleet, err = openFleet(cfg, store, svc.repos, cameras, log); err != nil {
		return nil, err
	}
	if svc.videos, err = video.Open(ctx, db, video.Options{Table: cfg.videoTable}); err != nil {
		return nil, err
	}
	if svc.deviceStates, err = devices.Open(ctx, db, devices.Options{Table: cfg.deviceStateTable}); err != nil {
		return nil, err
	}
	if svc.acquisitions, err = acquisition.Open(ctx, db, acquisition.Options{Table: cfg.acquisitionTable, Logger: log}); err != nil {
		return nil, err
	}
	svc.engine, err = retention.Open(ctx, retention.Options{
		Backend: db, Repositories: []*images.Repository{svc.repos[images.Single], svc.repos[images.Pano], svc.repos[images.PreStitch]},
		Driver: store.purges, ReplicaID: cfg.replicaID, LeaseDuration: cfg.purgeLease, Logger: log,
		RowsPerSecond: cfg.purgeRowsPerSec, LiveRowsPerSecond: cfg.purgeLiveRowsPerSec, Live: svc.traffic.Live, JobRetention: cfg.purgeJobRetention, Outbox: cfg.retentionOutbox,
		TracerProvider: obs.tracing,
	})
	if err != nil {
		return nil, err
	}
	if cfg.retentionInterval > 0 {
		svc.schedule = retention.Schedule{Retention: policy.Days(cfg.retentionDays), Interval: cfg.retentionInterval, UsePolicies: cfg.usePolicies}
	}
	if cfg.retentionMaxBytes.set() && store.embedded != nil {
		total, err := diskspace.Total(cfg.dataDir)
		if err != nil && cfg.retentionMaxBytes.percent > 0 {
			return nil, fmt.Errorf("-retention-max-bytes %s: the data directory's filesystem: %w", &cfg.retentionMaxBytes, err)
		}
		svc.budget = embedded.Budget{MaxBytes: cfg.retentionMaxBytes.resolve(total), Floor: policy.Days(cfg.minRetentionDays),
			Interval: budgetInterval, Store: store.embedded}
		var repos []*images.Repository
		for _, kind := range images.Kinds {
			repos = append(repos, svc.repos[kind])
		}
		svc.budgeter = embedded.NewBudgeter(svc.engine, repos, log)
		log.Info("storage budget", "max_bytes", svc.budget.MaxBytes, "floor", svc.budget.Floor.String())
	}
	return svc, nil
}

// serverOptions are the gRPC server's options from the flags and what
// serve opened.
func serverOptions(cfg config, store backend, svc *services, obs observability, authn *auth.Authenticator, creds *tlscreds.Credentials, log *slog.Logger) server.Options {
	primary, _ := svc.repos[images.Single].Tables()
	o := server.Options{
		Single: svc.repos[images.Single], Pano: svc.repos[images.Pano], PreStitch: svc.repos[images.PreStitch],
		Retention: svc.engine, MinRetentionDays: int32(cfg.minRetentionDays), RetentionSchedule: svc.schedule, Logger: log, AccessLog: float64(cfg.accessLog),
		Video: svc.videos, Devices: svc.deviceStates, Acquisition: svc.acquisitions, Fleet: svc.fleet.views, TracerProvider: obs.tracing,
		StoreCheck: reachable(primary), WriteCheck: store.writeCheck, HealthInterval: cfg.healthInterval, BudgetCheck: budgetCheck(svc),
		Auth: authn, OpenReflection: cfg.security.reflection == "open",
		Limits: cfg.limits.server(), Traffic: svc.traffic,
		Watch: server.WatchOptions{Window: cfg.watchWindow, Buffer: cfg.watchBuffer, MaxResumeAge: cfg.watchResumeMaxAge},
	}
	if creds != nil { // a nil *tlscreds.Credentials would not be a nil interface
		o.Credentials = creds
	}
	if store.embedded != nil {
		o.Backups = backup.NewSource(store.embedded, cfg.dataDir, nil)
	} else {
		// Replicas share the store: each finds every replica's creates in
		// the index. The embedded store has one process, whose creates feed
		// its watches directly.
		o.Watch.Poll = cfg.watchPoll
	}
	if obs.metrics != nil {
		o.Metrics = obs.metrics.GRPC
		if creds != nil {
			obs.metrics.WatchCertificate("serving", creds.Certificate)
		}
	}
	return o
}

// serveUntilSignalled serves until ctx ends (SIGINT, SIGTERM), then shuts
// down within -shutdown-timeout. leaveStoreOpen is true when calls or
// purges still run in the store after it: closing it under them could
// only fail or crash, and every acknowledged write is already durable.
func serveUntilSignalled(ctx context.Context, cfg config, srv *server.Server, lis net.Listener, purges *purges, log *slog.Logger) (leaveStoreOpen bool, err error) {
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	select {
	case err := <-served:
		return false, err
	case <-ctx.Done():
	}
	log.Info("shutting down", "timeout", cfg.shutdownTimeout)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
	defer cancel()
	// Purges stop at once (a job cut short resumes at the next start) while
	// the server finishes its calls; both within the timeout.
	purges.cancel()
	stuck := srv.Shutdown(shutdownCtx)
	if err := <-served; err != nil && !errors.Is(err, net.ErrClosed) {
		return false, err
	}
	if !purges.stop(shutdownCtx) || stuck != nil {
		return true, fmt.Errorf("shutdown: calls or purges still running after -shutdown-timeout %s; exiting without closing the store", cfg.shutdownTimeout)
	}
	log.Info("stopped")
	return false, nil
}

// listeners are the daemon's bound addresses; health and metrics are nil
// when off.
type listeners struct {
	grpc, health, metrics net.Listener
}

// listen binds -listen, -health-listen and -metrics-listen.
func listen(cfg config) (listeners, error) {
	var l listeners
	var err error
	if l.grpc, err = net.Listen("tcp", cfg.listen); err != nil {
		return listeners{}, fmt.Errorf("-listen: %w", err)
	}
	if cfg.healthListen != "" {
		if l.health, err = net.Listen("tcp", cfg.healthListen); err != nil {
			l.close()
			return listeners{}, fmt.Errorf("-health-listen: %w", err)
		}
	}
	if cfg.metricsListen != "" {
		if l.metrics, err = net.Listen("tcp", cfg.metricsListen); err != nil {
			l.close()
			return listeners{}, fmt.Errorf("-metrics-listen: %w", err)
		}
	}
	return l, nil
}

// close closes the listeners; those the servers closed already only
// report that, which close ignores.
func (l listeners) close() {
	for _, lis := range []net.Listener{l.grpc, l.health, l.metrics} {
		if lis != nil {
			_ = lis.Close()
		}
	}
}

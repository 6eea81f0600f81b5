package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"

	"google.golang.org/grpc/credentials"

	"github.com/metadatad/metadatad/server"
	"github.com/metadatad/metadatad/store/acquisition"
	"github.com/metadatad/metadatad/store/backup"
	"github.com/metadatad/metadatad/store/devices"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
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
	log := cfg.logger(os.Stderr)
	for _, w := range cfg.warnings {
		log.Warn(w)
	}
	if pct, set := tuneRuntime(os.Getenv); set {
		log.Debug("garbage collector target set, GOGC unset", "gc_percent", pct)
	}
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
		if leaveStoreOpen {
			return
		}
		if err := store.close(); err != nil {
			log.Error("closing store", "err", err)
		}
	}()
	obs, err := observe(ctx, cfg, &store)
	if err != nil {
		return err
	}
	defer obs.shutdown(cfg.shutdownTimeout, log)
	db := store.tables
	repos := map[images.Kind]*images.Repository{}
	for _, kind := range images.Kinds {
		if repos[kind], err = images.Open(ctx, db, images.Options{Kind: kind, Table: cfg.tables[kind], IndexShards: cfg.indexShards,
			CreateTimeout: cfg.createTimeout, LandingMargin: cfg.landingMargin}); err != nil {
			return err
		}
	}
	videos, err := video.Open(ctx, db, video.Options{Table: cfg.videoTable})
	if err != nil {
		return err
	}
	deviceStates, err := devices.Open(ctx, db, devices.Options{Table: cfg.deviceStateTable})
	if err != nil {
		return err
	}
	acquisitions, err := acquisition.Open(ctx, db, acquisition.Options{Table: cfg.acquisitionTable, Logger: log})
	if err != nil {
		return err
	}
	engine, err := retention.Open(ctx, retention.Options{
		Backend: db, Repositories: []*images.Repository{repos[images.Single], repos[images.Pano], repos[images.PreStitch]},
		Queue: store.queue, Workers: cfg.purgeWorkers, ReplicaID: cfg.replicaID, LeaseDuration: cfg.purgeLease, Logger: log,
		RowsPerSecond: cfg.purgeRowsPerSec, JobRetention: cfg.purgeJobRetention,
		TracerProvider: obs.tracing,
	})
	if err != nil {
		return err
	}
	primary, _ := repos[images.Single].Tables()
	authn, err := cfg.security.authenticator(ctx, log)
	if err != nil {
		return err
	}
	creds, err := cfg.security.credentials()
	if err != nil {
		return err
	}
	var transport credentials.TransportCredentials // a nil *tlscreds.Credentials would not be a nil interface
	if creds != nil {
		defer creds.Close()
		transport = creds
	}
	var schedule retention.Schedule
	if cfg.retentionInterval > 0 {
		schedule = retention.Schedule{Retention: retention.Days(cfg.retentionDays), Interval: cfg.retentionInterval, UsePolicies: cfg.usePolicies}
	}
	serverOpts := server.Options{
		Single: repos[images.Single], Pano: repos[images.Pano], PreStitch: repos[images.PreStitch],
		Retention: engine, MinRetentionDays: int32(cfg.minRetentionDays), RetentionSchedule: schedule, Logger: log, AccessLog: float64(cfg.accessLog),
		Video: videos, Devices: deviceStates, Acquisition: acquisitions, TracerProvider: obs.tracing,
		StoreCheck: reachable(primary), WriteCheck: store.writeCheck, HealthInterval: cfg.healthInterval,
		Auth: authn, OpenReflection: cfg.security.reflection == "open", Credentials: transport,
		Limits: cfg.limits.server(),
		Watch:  server.WatchOptions{Window: cfg.watchWindow, Buffer: cfg.watchBuffer, MaxResumeAge: cfg.watchResumeMaxAge},
	}
	if store.embedded != nil {
		serverOpts.Backups = backup.NewSource(store.embedded, cfg.dataDir, nil)
	} else {
		// Replicas share the store: each finds every replica's creates in
		// the index. The embedded store has one process, whose creates feed
		// its watches directly.
		serverOpts.Watch.Poll = cfg.watchPoll
	}
	if obs.metrics != nil {
		serverOpts.Metrics = obs.metrics.GRPC
		if creds != nil {
			obs.metrics.WatchCertificate("serving", creds.Certificate)
		}
	}
	srv, err := server.New(serverOpts)
	if err != nil {
		return err
	}

	purges := startPurges(engine, schedule, log)
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
		serveMetrics(metricsCtx, cfg, obs.metrics, lis.metrics, store, engine, repos, log)
	}

	if lis.health != nil {
		log.Info("serving health probes", "addr", lis.health.Addr().String())
		go func() {
			if err := srv.ServeHealth(lis.health); err != nil {
				log.Error("health probe listener stopped", "err", err)
			}
		}()
	}
	addr := lis.grpc.Addr().String()
	cfg.security.warnUnauthenticated(ctx, log, addr)
	log.Info("serving", append([]any{"addr", addr, "replica", cfg.replicaID, "auth", authn != nil, "tls", creds != nil, "mtls", cfg.security.tlsClientCA != ""}, store.describe...)...)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis.grpc) }()

	select {
	case err = <-served:
		return err
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
		return err
	}
	if !purges.stop(shutdownCtx) || stuck != nil {
		// Something still runs in the store: closing it under them could
		// only fail or crash. Every acknowledged write is already durable,
		// so the process ends without closing it.
		leaveStoreOpen = true
		return fmt.Errorf("shutdown: calls or purges still running after -shutdown-timeout %s; exiting without closing the store", cfg.shutdownTimeout)
	}
	log.Info("stopped")
	return nil
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

package server

import (
	"context"
	"log/slog"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// WritesHealthService is the health service name that reports whether
// writes are accepted: NOT_SERVING while the store is out of reach or nearly
// out of space (writes then fail with RESOURCE_EXHAUSTED while reads go on),
// or while the embedded store's flushes fail (writes then wait, until the
// store stops the process or the flushes pass).
// The empty name and each API service report whether the store answers at
// all, which is what a readiness probe asks.
const WritesHealthService = "metadata.v1.Writes"

// BudgetHealthService is the health service name that reports whether the
// storage budget (-retention-max-bytes) holds: NOT_SERVING while the store
// is over it and nothing more may be purged for space, because the images
// left are on legal hold or younger than the floor. Writes go on; it is
// for alerting, not for probes.
const BudgetHealthService = "metadata.v1.RetentionBudget"

// defaultHealthInterval is Options.HealthInterval when zero.
const defaultHealthInterval = 5 * time.Second

// healthChecker keeps the health statuses in step with the store: every
// interval it asks the store for a row and the write check for its verdict.
type healthChecker struct {
	health   *health.Server
	services []string
	store    func(ctx context.Context) error
	writes   func() error
	budget   func() error
	interval time.Duration
	log      *slog.Logger
	// reachable is the last verdict, kept to log each change once;
	// overBudget likewise.
	reachable, overBudget bool
}

// run checks at once and then every interval until ctx ends.
func (c *healthChecker) run(ctx context.Context) {
	ticker := time.NewTicker(c.interval)
	defer ticker.Stop()
	for {
		c.check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// check runs both checks once and sets the statuses they call for.
func (c *healthChecker) check(ctx context.Context) {
	reachable := true
	if c.store != nil {
		// A probe must not outlive its interval, or a store that hangs
		// rather than fails would keep the last verdict forever.
		probeCtx, cancel := context.WithTimeout(ctx, c.interval)
		err := c.store(probeCtx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if reachable = err == nil; reachable != c.reachable {
			if reachable {
				c.log.Info("store reachable again: serving")
			} else {
				c.log.Error("store unreachable: health reports NOT_SERVING", "err", err)
			}
		}
	}
	// Writes need the store as much as reads do.
	writable := reachable
	if c.writes != nil && writable {
		writable = c.writes() == nil
	}
	c.reachable = reachable
	for _, name := range append([]string{""}, c.services...) {
		c.health.SetServingStatus(name, servingStatus(reachable))
	}
	c.health.SetServingStatus(WritesHealthService, servingStatus(writable))
	var budgetErr error
	if c.budget != nil {
		budgetErr = c.budget()
	}
	if over := budgetErr != nil; over != c.overBudget {
		if over {
			c.log.Warn("storage budget cannot hold: health reports "+BudgetHealthService+" NOT_SERVING", "err", budgetErr)
		} else {
			c.log.Info("storage budget holds again")
		}
		c.overBudget = over
	}
	c.health.SetServingStatus(BudgetHealthService, servingStatus(budgetErr == nil))
}

func servingStatus(ok bool) healthpb.HealthCheckResponse_ServingStatus {
	if ok {
		return healthpb.HealthCheckResponse_SERVING
	}
	return healthpb.HealthCheckResponse_NOT_SERVING
}

// drainingHealth is the health service with Watch streams that end when
// Shutdown begins: grpc's health server keeps a watch open until its client
// leaves, which would hold a graceful stop for its whole timeout. A watch
// gets the status the shutdown set (NOT_SERVING), then UNAVAILABLE.
type drainingHealth struct {
	*health.Server
	stopping <-chan struct{}
}

func (h drainingHealth) Watch(req *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	watched := make(chan error, 1)
	go func() { watched <- h.Server.Watch(req, contextStream{stream, ctx}) }()
	select {
	case err := <-watched:
		return err
	case <-h.stopping:
	}
	cancel()
	<-watched // the inner watch sends nothing more
	if last, err := h.Check(stream.Context(), req); err == nil {
		if err := stream.Send(last); err != nil {
			return err
		}
	}
	return status.Error(codes.Unavailable, "server shutting down; watch again")
}

// contextStream is a Watch stream whose context ends earlier than its own.
type contextStream struct {
	healthpb.Health_WatchServer
	ctx context.Context
}

func (s contextStream) Context() context.Context { return s.ctx }

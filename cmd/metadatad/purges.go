package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/metadatad/metadatad/internal/diskspace"
	"github.com/metadatad/metadatad/store/blobs"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/embedded"
)

// purges are the purge engine and the built-in schedule running in the
// background. Both write to the store, so the daemon waits for both to end
// before it closes the store.
type purges struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// startPurges runs engine and, when schedule has an interval, the schedule,
// budgeter with budget when there is one, and the blob deleter when
// there is one. Purges free space, so their writes pass the free-space
// guard.
func startPurges(engine *retention.Engine, schedule retention.Schedule, budget embedded.Budget, budgeter *embedded.Budgeter, deleter *blobs.Deleter, log *slog.Logger) *purges {
	ctx, cancel := context.WithCancel(diskspace.Exempt(context.Background()))
	p := &purges{cancel: cancel, done: make(chan struct{})}
	var running sync.WaitGroup
	running.Go(func() {
		if err := engine.Run(ctx); err != nil {
			log.Error("purge engine", "err", err)
		}
	})
	if schedule.Interval > 0 {
		running.Go(func() { engine.RunSchedule(ctx, schedule) })
	}
	if budgeter != nil {
		running.Go(func() { budgeter.Run(ctx, budget) })
	}
	if deleter != nil {
		running.Go(func() { deleter.Run(ctx, blobDeleteInterval) })
	}
	go func() {
		running.Wait()
		close(p.done)
	}()
	return p
}

// stop ends the purges and waits for them until ctx ends; it reports
// whether they ended. A job cut short resumes at the next start.
func (p *purges) stop(ctx context.Context) bool {
	p.cancel()
	select {
	case <-p.done:
		return true
	case <-ctx.Done():
		select {
		case <-p.done:
			return true
		default:
			return false
		}
	}
}

// budgetInterval is how often the storage budget measures the store: a
// purge of an hour of images ends well within it.
const budgetInterval = time.Minute

// budgetCheck is the health check of the storage budget: an error while
// the store is over budget and nothing more may be purged for space (the
// images left are held or younger than the floor); nil without a budget.
func budgetCheck(svc *services) func() error {
	if svc.budgeter == nil {
		return nil
	}
	return func() error {
		st := svc.budgeter.BudgetState()
		if st.Over && st.Blocked != "" {
			return fmt.Errorf("the store holds %d live bytes, over its budget of %d, and only images that are %s are left to purge",
				st.LiveBytes, st.MaxBytes, map[string]string{"held": "on legal hold", "floor": "younger than -min-retention-days"}[st.Blocked])
		}
		return nil
	}
}

// blobServiceURL is the blob service of the deleter's containers, which
// must all be of one: a container URL less its last path segment.
func blobServiceURL(containers []string) (string, error) {
	service := ""
	for _, c := range containers {
		u, err := url.Parse(c)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return "", fmt.Errorf("-blob-delete-containers: %q is not a container URL", c)
		}
		path := strings.Trim(u.Path, "/")
		i := strings.LastIndex(path, "/")
		if path == "" {
			return "", fmt.Errorf("-blob-delete-containers: %q names no container", c)
		}
		s := u.Scheme + "://" + u.Host + "/"
		if i >= 0 {
			s += path[:i] + "/" // path-style accounts, as Azurite's
		}
		if service != "" && s != service {
			return "", fmt.Errorf("-blob-delete-containers: %q is of another account than %q", c, containers[0])
		}
		service = s
	}
	return service, nil
}

// openBlobDeleter opens the built-in blob deleter, nil without containers.
func openBlobDeleter(cfg config, svc *services, store backend, log *slog.Logger) (*blobs.Deleter, error) {
	bd := cfg.blobDelete
	if len(bd.containers) == 0 {
		return nil, nil
	}
	service, _ := blobServiceURL(bd.containers) // checked with the flags
	client, err := blobClient(service)
	if err != nil {
		return nil, fmt.Errorf("blob deleter: %w", err)
	}
	position, err := store.tables.Table(context.Background(), blobDeleterTable)
	if err != nil {
		return nil, err
	}
	return blobs.New(blobs.Options{Outbox: svc.engine, Client: client, Containers: bd.containers, Position: position,
		PerSecond: bd.perSecond, DryRun: bd.dryRun, Logger: log})
}

// blobDeleterTable keeps how far the blob deleter has read the outbox.
const blobDeleterTable = "BlobDeleter"

// blobDeleteInterval is how often a caught-up blob deleter looks again.
const blobDeleteInterval = 10 * time.Second

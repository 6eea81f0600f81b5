// Package blobs deletes the bytes of the images retention deletes: a
// Deleter follows the outbox of deleted images (retention's
// DeletedImages) and deletes each image's blob in Azure Blob Storage, so
// that a held camera's bytes stay and a purged camera's bytes go, which an
// age-based lifecycle rule on the container cannot tell apart.
package blobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"golang.org/x/time/rate"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/retention"
)

// Outbox is where deleted images are read from; *retention.Engine is one.
type Outbox interface {
	DeletedImages(ctx context.Context, after string, limit int) ([]retention.DeletedImage, error)
}

// Options configures New.
type Options struct {
	Outbox Outbox
	// Client reaches the blob service of the containers.
	Client *azblob.Client
	// Containers are the URLs of the containers whose blobs may be
	// deleted, e.g. https://acct.blob.core.windows.net/images: a blob_uri
	// under none of them is counted and left alone.
	Containers []string
	// Position keeps how far the deleter has read the outbox, in its row
	// DefaultPositionRow, so a restart goes on from there.
	Position store.Table
	// PerSecond caps blob deletes per second; 0 means 50.
	PerSecond float64
	// DryRun logs what would be deleted and deletes nothing: it walks the
	// outbox from the stored position on, then follows new records, as a
	// real run would, but keeps its place in memory, so the stored position
	// stays where a real run resumes and does it all.
	DryRun bool
	Logger *slog.Logger
}

// Its position's row.
const (
	positionPart = "blobs"
	positionRow  = "deleter"
	// propToken holds the position, the outbox's token; propSeq the
	// embedded outbox's position as a number, as the first release kept it.
	propToken = "Token"
	propSeq   = "Seq"
)

// pageSize is how many deleted images one step reads.
const pageSize = 500

// Deleter deletes the blobs of deleted images.
type Deleter struct {
	opts       Options
	containers []container
	limiter    *rate.Limiter
	// dryAt is a dry run's place in the outbox once it has read a page; nil
	// before, when it starts from the stored position.
	dryAt *string

	mu    sync.Mutex
	stats Stats
}

// Stats are what a Deleter's steps have done since it was made, for the
// metrics.
type Stats struct {
	// Deleted and Outside add up the steps' Counts; Failed counts the
	// steps that failed (the next step retries).
	Deleted, Outside, Failed int64
	// Behind is when the oldest record left to handle was deleted from the
	// store: a failed step's record, or after a full page its last record
	// (the next is no older); zero when the deleter has caught up.
	Behind time.Time
}

// Stats returns what the Deleter's steps have done.
func (d *Deleter) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// record adds a step's outcome to the stats.
func (d *Deleter) record(c Counts, behind time.Time, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stats.Deleted += int64(c.Deleted)
	d.stats.Outside += int64(c.Outside)
	if err != nil {
		d.stats.Failed++
	}
	d.stats.Behind = behind
}

// container is an allowed container: its URL, and its name in the client's
// service.
type container struct {
	prefix, name string
}

// Counts are what a step did.
type Counts struct {
	// Deleted blobs (or already gone), Outside blob URIs under no allowed
	// container, left alone.
	Deleted, Outside int
}

// New checks opts and returns a Deleter.
func New(opts Options) (*Deleter, error) {
	if opts.Outbox == nil || opts.Client == nil || opts.Position == nil || len(opts.Containers) == 0 {
		return nil, errors.New("blobs: a Deleter needs an outbox, a client, a position table and containers")
	}
	if opts.PerSecond <= 0 {
		opts.PerSecond = 50
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	d := &Deleter{opts: opts, limiter: rate.NewLimiter(rate.Limit(opts.PerSecond), 1)}
	for _, c := range opts.Containers {
		u, err := url.Parse(c)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("blobs: container %q is not a URL", c)
		}
		path := strings.Trim(u.Path, "/")
		name := path[strings.LastIndex(path, "/")+1:]
		if name == "" || u.RawQuery != "" {
			return nil, fmt.Errorf("blobs: container %q names no container (or has a query)", c)
		}
		d.containers = append(d.containers, container{prefix: strings.TrimSuffix(c, "/") + "/", name: name})
	}
	return d, nil
}

// RunOnce deletes the blobs of the next page of deleted images and records
// the position after them; it reports what it did and whether there may
// be more. A delete that fails leaves the position before its image, so
// the next step tries again: deleting a blob twice deletes it once. Steps
// run one at a time.
func (d *Deleter) RunOnce(ctx context.Context) (c Counts, more bool, err error) {
	var behind time.Time
	defer func() {
		if err != nil && behind.IsZero() {
			behind = d.Stats().Behind // a step that read nothing is no nearer
		}
		d.record(c, behind, err)
	}()
	after, err := d.from(ctx)
	if err != nil {
		return c, false, err
	}
	page, err := d.opts.Outbox.DeletedImages(ctx, after, pageSize)
	switch {
	case errors.Is(err, retention.ErrOutboxTrimmed):
		// Behind the outbox's retention: what was retired is beyond reach.
		d.opts.Logger.Error("blob deleter: it fell behind the outbox's retention; the blobs of the retired records stay (metadatad blobs audit finds them)",
			"position", after, "err", err)
		page, err = d.opts.Outbox.DeletedImages(ctx, "", pageSize)
	case errors.Is(err, retention.ErrBadResumeToken):
		// A position in the other store's outbox, which `metadatad copy`
		// brought with the tables: this store's outbox is read from its start.
		d.opts.Logger.Warn("blob deleter: its position is not one of this store's outbox (copied from the other store); reading the outbox from its start",
			"position", after)
		page, err = d.opts.Outbox.DeletedImages(ctx, "", pageSize)
	}
	if err != nil || len(page) == 0 {
		return c, false, err
	}
	done := after
	for _, img := range page {
		if err := d.delete(ctx, img, &c); err != nil {
			if done != after {
				err = errors.Join(err, d.advance(ctx, done))
			}
			behind = img.DeletedAt
			return c, false, err
		}
		done = img.Token
	}
	if len(page) == pageSize {
		behind = page[len(page)-1].DeletedAt
	}
	return c, len(page) == pageSize, d.advance(ctx, done)
}

// Run runs RunOnce, every interval once caught up, until ctx ends.
func (d *Deleter) Run(ctx context.Context, interval time.Duration) {
	for ctx.Err() == nil {
		c, more, err := d.RunOnce(ctx)
		if err != nil && ctx.Err() == nil {
			d.opts.Logger.Warn("blob deleter: a step failed; retried", "err", err)
		}
		if c.Deleted+c.Outside > 0 {
			d.opts.Logger.Info("blob deleter: blobs of deleted images", "deleted", c.Deleted, "outside_the_containers", c.Outside, "dry_run", d.opts.DryRun)
		}
		if more && err == nil {
			continue
		}
		select {
		case <-ctx.Done():
		case <-time.After(interval):
		}
	}
}

func (d *Deleter) delete(ctx context.Context, img retention.DeletedImage, c *Counts) error {
	name, cont, ok := d.locate(img.BlobURI)
	if !ok {
		c.Outside++
		if img.BlobURI != "" {
			d.opts.Logger.Debug("blob deleter: blob outside the allowed containers left alone", "blob_uri", img.BlobURI)
		}
		return nil
	}
	if d.opts.DryRun {
		d.opts.Logger.Info("blob deleter: would delete", "blob_uri", img.BlobURI, "camera", img.CameraID)
		c.Deleted++
		return nil
	}
	if err := d.limiter.Wait(ctx); err != nil {
		return err
	}
	_, err := d.opts.Client.DeleteBlob(ctx, cont, name, nil)
	if err != nil && !bloberror.HasCode(err, bloberror.BlobNotFound) {
		return fmt.Errorf("blobs: delete %s: %w", img.BlobURI, err)
	}
	c.Deleted++
	return nil
}

// locate is a blob URI's name in its allowed container.
func (d *Deleter) locate(uri string) (name, cont string, ok bool) {
	for _, c := range d.containers {
		if rest, found := strings.CutPrefix(uri, c.prefix); found && rest != "" {
			if unescaped, err := url.PathUnescape(rest); err == nil {
				return unescaped, c.name, true
			}
		}
	}
	return "", "", false
}

// from is where the next step reads: a dry run's own place, else the
// stored position.
func (d *Deleter) from(ctx context.Context) (string, error) {
	if d.dryAt != nil {
		return *d.dryAt, nil
	}
	return d.position(ctx)
}

// advance records that the step handled the outbox up to token: in the
// store, or a dry run's own place.
func (d *Deleter) advance(ctx context.Context, token string) error {
	if d.opts.DryRun {
		d.dryAt = &token
		return nil
	}
	return d.setPosition(ctx, token)
}

func (d *Deleter) position(ctx context.Context) (string, error) {
	e, err := d.opts.Position.Get(ctx, positionPart, positionRow)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if tok, ok := e.Properties[propToken].(string); ok {
		return tok, nil
	}
	if n, ok := e.Properties[propSeq].(int64); ok && n > 0 {
		return strconv.FormatInt(n, 10), nil // the embedded outbox's token
	}
	return "", nil
}

func (d *Deleter) setPosition(ctx context.Context, token string) error {
	_, err := d.opts.Position.Upsert(ctx, store.Entity{PartitionKey: positionPart, RowKey: positionRow,
		Properties: store.Properties{propToken: token}}, store.Replace)
	return err
}

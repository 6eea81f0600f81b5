package aztable

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/metadatad/metadatad/store"
)

// table is the engine's side of one table of a Backend: store.Table on
// input that the portable layer has checked (see store.Driver). Callers
// get it only wrapped in that layer.
type table struct {
	// name is the name as the caller gave it, without the prefix.
	name   string
	client *aztables.Client
	log    *slog.Logger
	clock  *clock
}

// Name is the table's name as given to Backend.Table.
func (t *table) Name() string { return t.name }

// Insert adds e; store.ErrAlreadyExists if its key is taken. A retried
// insert that finds e itself stored, its first attempt's answer lost,
// succeeds (see replay.go).
func (t *table) Insert(ctx context.Context, e store.Entity) (store.Entity, error) {
	body, err := t.prepare(ctx, e)
	if err != nil {
		return store.Entity{}, err
	}
	what := "insert " + address(e.PartitionKey, e.RowKey)
	actx, attempts := withAttempts(ctx)
	var raw *http.Response
	resp, err := t.client.AddEntity(runtime.WithCaptureResponse(actx, &raw), body, nil)
	if err != nil {
		if attempts.Load() > 1 && hasCode(err, http.StatusConflict, aztables.EntityAlreadyExists) {
			if stored, ok := t.replayed(ctx, store.Op{Kind: store.OpInsert, Entity: e}); ok {
				t.logReplay(what)
				return stored, nil
			}
		}
		return store.Entity{}, serviceError(ctx, what, err)
	}
	return t.stamped(e, resp.ETag, raw), nil
}

// Upsert adds e or writes over the stored entity per mode. Azure sends no
// entity back, only its ETag: the returned entity is e stamped, which the
// contract makes every backend's answer.
func (t *table) Upsert(ctx context.Context, e store.Entity, mode store.WriteMode) (store.Entity, error) {
	body, err := t.prepare(ctx, e)
	if err != nil {
		return store.Entity{}, err
	}
	var raw *http.Response
	resp, err := t.client.UpsertEntity(runtime.WithCaptureResponse(ctx, &raw), body,
		&aztables.UpsertEntityOptions{UpdateMode: updateMode(mode)})
	if err != nil {
		return store.Entity{}, serviceError(ctx, "upsert "+address(e.PartitionKey, e.RowKey), err)
	}
	return t.stamped(e, resp.ETag, raw), nil
}

// Update writes over the stored entity per mode, if its ETag matches ifMatch;
// an empty ifMatch matches any. A retried update whose first attempt moved the ETag
// on succeeds if the entity holds what it wrote (see replay.go).
func (t *table) Update(ctx context.Context, e store.Entity, mode store.WriteMode, ifMatch string) (store.Entity, error) {
	body, err := t.prepare(ctx, e)
	if err != nil {
		return store.Entity{}, err
	}
	what := "update " + address(e.PartitionKey, e.RowKey)
	etag := etagOrAny(ifMatch)
	actx, attempts := withAttempts(ctx)
	var raw *http.Response
	resp, err := t.client.UpdateEntity(runtime.WithCaptureResponse(actx, &raw), body,
		&aztables.UpdateEntityOptions{UpdateMode: updateMode(mode), IfMatch: &etag})
	if err != nil {
		if attempts.Load() > 1 && ifMatch != "" && hasStatus(err, http.StatusPreconditionFailed) {
			if stored, ok := t.replayed(ctx, store.Op{Kind: store.OpUpdate, Entity: e, Mode: mode}); ok {
				t.logReplay(what)
				return stored, nil
			}
		}
		return store.Entity{}, serviceError(ctx, what, err)
	}
	return t.stamped(e, resp.ETag, raw), nil
}

// Get reads one entity.
func (t *table) Get(ctx context.Context, partitionKey, rowKey string) (store.Entity, error) {
	what := "get " + address(partitionKey, rowKey)
	if err := ctx.Err(); err != nil {
		return store.Entity{}, fmt.Errorf("aztable: %s: %w", what, err)
	}
	var raw *http.Response
	resp, err := t.client.GetEntity(runtime.WithCaptureResponse(ctx, &raw), partitionKey, rowKey, nil)
	if err != nil {
		return store.Entity{}, serviceError(ctx, what, err)
	}
	payload, err := runtime.Payload(raw)
	if err != nil {
		return store.Entity{}, serviceError(ctx, what, err)
	}
	e, err := decodeEntity(payload)
	if err != nil {
		return store.Entity{}, err
	}
	if resp.ETag != "" {
		e.ETag = string(resp.ETag)
	}
	return e, nil
}

// Delete removes one entity, if its ETag matches ifMatch; an empty ifMatch
// matches any. A retried delete that finds the entity gone succeeds (see
// replay.go).
func (t *table) Delete(ctx context.Context, partitionKey, rowKey, ifMatch string) error {
	what := "delete " + address(partitionKey, rowKey)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("aztable: %s: %w", what, err)
	}
	etag := etagOrAny(ifMatch)
	actx, attempts := withAttempts(ctx)
	_, err := t.client.DeleteEntity(actx, partitionKey, rowKey, &aztables.DeleteEntityOptions{IfMatch: &etag})
	if err != nil && attempts.Load() > 1 && hasStatus(err, http.StatusNotFound) {
		t.logReplay(what)
		return nil
	}
	if err != nil {
		return serviceError(ctx, what, err)
	}
	return nil
}

// prepare encodes e, which the portable layer has checked.
func (t *table) prepare(ctx context.Context, e store.Entity) ([]byte, error) {
	body, err := encodeEntity(e)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("aztable: write %s: %w", address(e.PartitionKey, e.RowKey), err)
	}
	return body, nil
}

// stamped is e as a write left it.
func (t *table) stamped(e store.Entity, etag azcore.ETag, resp *http.Response) store.Entity {
	e.ETag = string(etag)
	e.Timestamp = t.clock.writeTime(e.ETag, resp)
	return e
}

func updateMode(mode store.WriteMode) aztables.UpdateMode {
	if mode == store.Replace {
		return aztables.UpdateModeReplace
	}
	return aztables.UpdateModeMerge
}

// etagOrAny is the If-Match of a write: the contract's empty ETag is "*".
// Without an If-Match an update would be an upsert.
func etagOrAny(ifMatch string) azcore.ETag {
	if ifMatch == "" {
		return azcore.ETagAny
	}
	return azcore.ETag(ifMatch)
}

func address(partitionKey, rowKey string) string {
	return fmt.Sprintf("%q/%q", partitionKey, rowKey)
}

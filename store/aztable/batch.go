package aztable

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/metadatad/metadatad/store"
)

// Batch applies operations on one partition atomically, as one entity group
// transaction.
//
// The portable layer has checked the batch, its partition rule included:
// Azurite accepts batches that span partitions, which Azure refuses. A failed transaction answers 202 with the failure inside the
// multipart body: the failed operation's status, code and a message that
// starts with its index ("2:The specified entity already exists."); Batch
// reports it as a *store.BatchError with the sentinel of the status.
//
// A transaction retried after its first attempt committed fails as a whole
// (an insert finds its key taken, a delete finds nothing). Such a failure is
// checked against the table, one read per operation: if the table holds what
// every operation leaves, the batch counts as applied (see replay.go).
func (t *table) Batch(ctx context.Context, ops []store.Op) error {
	what := fmt.Sprintf("batch of %d operations on partition %q", len(ops), ops[0].Entity.PartitionKey)
	if err := ctxErr(ctx, what); err != nil {
		return err
	}
	actions := make([]aztables.TransactionAction, len(ops))
	for i, op := range ops {
		action, err := transactionAction(op)
		if err != nil {
			return &store.BatchError{Index: i, Err: err}
		}
		actions[i] = action
	}
	actx, attempts := withAttempts(ctx)
	_, err := t.client.SubmitTransaction(actx, actions, nil)
	if err == nil {
		return nil
	}
	err = batchError(ctx, what, len(ops), err)
	var be *store.BatchError
	if attempts.Load() > 1 && errors.As(err, &be) &&
		(errors.Is(be, store.ErrAlreadyExists) || errors.Is(be, store.ErrNotFound) || errors.Is(be, store.ErrConflict)) &&
		t.batchReplayed(ctx, ops) {
		t.logReplay(what)
		return nil
	}
	return err
}

// batchReplayed reports whether the table holds what every operation of a
// batch leaves.
func (t *table) batchReplayed(ctx context.Context, ops []store.Op) bool {
	for _, op := range ops {
		if _, ok := t.replayed(ctx, op); !ok {
			return false
		}
	}
	return true
}

// transactionAction is op as the SDK's transaction action. Updates and deletes
// always carry an If-Match, "*" for any ETag: an update without one would be
// an upsert.
//
// For every operation but an insert the SDK writes the keys into the
// operation's URL (Table(PartitionKey='...',RowKey='...')) without doubling
// their single quotes, as its single-entity calls do, so a key with a quote
// would end the literal early. Those keys are doubled here. The body of an
// upsert or update then carries the doubled keys too; the service addresses
// the entity by its URL.
func transactionAction(op store.Op) (aztables.TransactionAction, error) {
	e := op.Entity
	var action aztables.TransactionAction
	switch op.Kind {
	case store.OpInsert:
		action.ActionType = aztables.TransactionTypeAdd
	case store.OpUpsert:
		action.ActionType = aztables.TransactionTypeInsertMerge
		if op.Mode == store.Replace {
			action.ActionType = aztables.TransactionTypeInsertReplace
		}
	case store.OpUpdate:
		action.ActionType = aztables.TransactionTypeUpdateMerge
		if op.Mode == store.Replace {
			action.ActionType = aztables.TransactionTypeUpdateReplace
		}
	case store.OpDelete:
		action.ActionType = aztables.TransactionTypeDelete
		e.Properties = nil
	}
	if op.Kind == store.OpUpdate || op.Kind == store.OpDelete {
		etag := etagOrAny(op.IfMatch)
		action.IfMatch = &etag
	}
	if op.Kind != store.OpInsert {
		e.PartitionKey = strings.ReplaceAll(e.PartitionKey, "'", "''")
		e.RowKey = strings.ReplaceAll(e.RowKey, "'", "''")
	}
	body, err := encodeEntity(e)
	if err != nil {
		return aztables.TransactionAction{}, err
	}
	action.Entity = body
	return action, nil
}

// batchError turns the error of a transaction into the contract's.
func batchError(ctx context.Context, what string, n int, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("aztable: %s: %w", what, cerr)
	}
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.RawResponse == nil {
		return serviceError(ctx, what, err)
	}
	payload, perr := runtime.Payload(re.RawResponse)
	if perr != nil {
		return serviceError(ctx, what, err)
	}
	f, ok := parseBatchFailure(re.StatusCode, re.RawResponse.Header.Get("Content-Type"), payload)
	if !ok {
		return serviceError(ctx, what, err)
	}
	opErr := fmt.Errorf("aztable: service answered %d %s: %s", f.status, f.code, firstLine(f.message))
	if s := sentinel(f.status, f.code); s != nil {
		opErr = fmt.Errorf("%w (%d %s)", s, f.status, f.code)
	}
	index := f.index
	if index < 0 && n == 1 {
		index = 0
	}
	if index < 0 || index >= n {
		return fmt.Errorf("aztable: %s failed at an operation the service did not name: %w", what, opErr)
	}
	return &store.BatchError{Index: index, Err: opErr}
}

// batchFailure is the failed operation of a transaction, as the service
// reported it.
type batchFailure struct {
	// index is the failed operation's position, or -1 when the message
	// does not say.
	index   int
	status  int
	code    string
	message string
}

// indexPrefix is how a failure message names its operation: "3:The ...".
var indexPrefix = regexp.MustCompile(`^(\d+):`)

// parseBatchFailure reads a failed transaction's answer. A transaction that
// failed on an operation answers 202 multipart/mixed with a changeset holding
// that operation's HTTP answer; a request the service refused outright
// answers 4xx itself. Error bodies are OData errors in JSON
// ({"odata.error":{"code":...,"message":{"value":...}}}) or, from older
// services, XML (<error><code/><message/></error>).
func parseBatchFailure(status int, contentType string, body []byte) (batchFailure, bool) {
	mediaType, params, _ := mime.ParseMediaType(contentType)
	if strings.HasPrefix(mediaType, "multipart/") {
		resp, err := failedPart(params["boundary"], body)
		if err != nil || resp == nil {
			return batchFailure{}, false
		}
		defer resp.Body.Close()
		if body, err = io.ReadAll(resp.Body); err != nil {
			return batchFailure{}, false
		}
		status = resp.StatusCode
	}
	if status < http.StatusBadRequest {
		return batchFailure{}, false
	}
	f := batchFailure{index: -1, status: status}
	f.code, f.message = odataError(body)
	if m := indexPrefix.FindStringSubmatch(f.message); m != nil {
		f.index, _ = strconv.Atoi(m[1])
	}
	return f, true
}

// failedPart finds the first answer of status 400 or more in a batch answer,
// descending into changesets; nil if there is none.
func failedPart(boundary string, body []byte) (*http.Response, error) {
	parts := multipart.NewReader(bytes.NewReader(body), boundary)
	for {
		part, err := parts.NextPart()
		if err == io.EOF {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		content, err := io.ReadAll(part)
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, err
		}
		mediaType, params, _ := mime.ParseMediaType(part.Header.Get("Content-Type"))
		switch {
		case strings.HasPrefix(mediaType, "multipart/"):
			if resp, err := failedPart(params["boundary"], content); err != nil || resp != nil {
				return resp, err
			}
		case mediaType == "application/http":
			resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(content)), nil)
			if err != nil {
				return nil, err
			}
			if resp.StatusCode >= http.StatusBadRequest {
				return resp, nil
			}
			resp.Body.Close()
		}
	}
}

package server

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/fleet"
	"github.com/metadatad/metadatad/store/pebble/backup"
	"github.com/metadatad/metadatad/store/retention"
)

// sentinelCodes are the code each domain sentinel reaches a client with.
var sentinelCodes = []struct {
	err  error
	code codes.Code
}{
	{store.ErrNotFound, codes.NotFound},
	{store.ErrAlreadyExists, codes.AlreadyExists},
	{store.ErrConflict, codes.Aborted},
	{store.ErrInvalidKey, codes.InvalidArgument},
	{store.ErrInvalidEntity, codes.InvalidArgument},
	{store.ErrTooLarge, codes.InvalidArgument},
	{store.ErrInvalidQuery, codes.InvalidArgument},
	{store.ErrInvalidBatch, codes.InvalidArgument},
	{retention.ErrFutureCutoff, codes.InvalidArgument},
	{retention.ErrNoKinds, codes.InvalidArgument},
	{retention.ErrPurgeRunning, codes.FailedPrecondition},
	{retention.ErrNoPolicies, codes.FailedPrecondition},
	{retention.ErrJobEnded, codes.FailedPrecondition},
	{retention.ErrCameraHeld, codes.FailedPrecondition},
	{retention.ErrOutboxTrimmed, codes.OutOfRange},
	{retention.ErrOutboxAhead, codes.OutOfRange},
	{retention.ErrBadResumeToken, codes.InvalidArgument},
	{retention.ErrTooManyPrefixes, codes.ResourceExhausted},
	{backup.ErrBusy, codes.FailedPrecondition},
	{fleet.ErrNoDailyCounts, codes.FailedPrecondition},
	{store.ErrCorrupt, codes.DataLoss},
	{store.ErrInsufficientStorage, codes.ResourceExhausted},
	{context.Canceled, codes.Canceled},
	{context.DeadlineExceeded, codes.DeadlineExceeded},
}

// TestErrorCodes: each domain sentinel, wrapped as the store and the
// engine wrap them, reaches the client with its code and a generic message.
// The server validates requests before the store or the engine sees them,
// so most of these no request produces; the table is tested through the
// mapping function (TestClockStepBackDuringStartPurge reaches
// ErrFutureCutoff over gRPC).
func TestErrorCodes(t *testing.T) {
	for _, tc := range sentinelCodes {
		t.Run(tc.err.Error(), func(t *testing.T) {
			wrapped := fmt.Errorf("in /secret/path: %w", tc.err)
			st, _ := status.FromError(toStatus(t.Context(), slog.New(slog.DiscardHandler), wrapped))
			if st.Code() != tc.code {
				t.Errorf("%v reaches the client as %v, want %v", tc.err, st.Code(), tc.code)
			}
			if st.Message() == wrapped.Error() || strings.Contains(st.Message(), "secret") {
				t.Errorf("the client got the error's own text %q", st.Message())
			}
		})
	}
}

// offTheAPI are the exported sentinels of the packages below the server
// that no call returns, and why.
var offTheAPI = map[string]string{
	"backup.ErrDamaged":          "metadatad restore's: a backup read from disk",
	"backup.ErrFormat":           "metadatad restore's",
	"backup.ErrNotEmpty":         "metadatad restore's: its target directory",
	"pebble.ErrUnfinished":       "the store's open, before any call",
	"azqueue.ErrMessageTooLarge": "the purge engine's own queue messages, bounded by it",
	"tablequeue.ErrLostMessage":  "the purge engine's own queue",
	"tablecopy.ErrMismatch":      "metadatad copy's verification",
	"retention.ErrCancelled":     "the purge engine's and its drivers': ends a job's run, recorded as its state",
	"retention.ErrLeaseLost":     "the purge engine's and its drivers': stops a run another replica took over",
	"retention.ErrForeignJob":    "the purge engine's: ends a job of an earlier release, recorded as its state",
	"retention.ErrTaskLost":      "the purge engine's and the queue design's: ends a job, recorded as its state",
	"retention.ErrCameraCutoff":  "the purge engine's Start: DeleteCameraImages has no cutoff to send",
}

// TestEverySentinelHasACode: an exported Err variable of the store and
// engine packages is in the error table, or listed in offTheAPI with why
// no call returns it; a new sentinel cannot fall through to INTERNAL
// unnoticed.
func TestEverySentinelHasACode(t *testing.T) {
	mapped := map[error]bool{}
	for _, m := range errorCodes {
		mapped[m.err] = true
	}
	for _, tc := range sentinelCodes {
		if !mapped[tc.err] {
			t.Errorf("%v is tested but not in errorCodes", tc.err)
		}
	}
	if len(sentinelCodes) != len(errorCodes) {
		t.Errorf("errorCodes has %d entries, sentinelCodes %d: test each mapping", len(errorCodes), len(sentinelCodes))
	}
	byName := map[string]error{
		"store.ErrNotFound": store.ErrNotFound, "store.ErrAlreadyExists": store.ErrAlreadyExists, "store.ErrConflict": store.ErrConflict,
		"store.ErrInvalidKey": store.ErrInvalidKey, "store.ErrInvalidEntity": store.ErrInvalidEntity, "store.ErrTooLarge": store.ErrTooLarge,
		"store.ErrInvalidQuery": store.ErrInvalidQuery, "store.ErrInvalidBatch": store.ErrInvalidBatch, "store.ErrCorrupt": store.ErrCorrupt,
		"store.ErrInsufficientStorage": store.ErrInsufficientStorage,
		"retention.ErrFutureCutoff":    retention.ErrFutureCutoff, "retention.ErrNoKinds": retention.ErrNoKinds,
		"retention.ErrPurgeRunning": retention.ErrPurgeRunning, "retention.ErrNoPolicies": retention.ErrNoPolicies,
		"retention.ErrJobEnded": retention.ErrJobEnded, "retention.ErrTooManyPrefixes": retention.ErrTooManyPrefixes,
		"retention.ErrOutboxTrimmed": retention.ErrOutboxTrimmed, "retention.ErrBadResumeToken": retention.ErrBadResumeToken,
		"retention.ErrOutboxAhead": retention.ErrOutboxAhead, "backup.ErrBusy": backup.ErrBusy,
		"fleet.ErrNoDailyCounts":  fleet.ErrNoDailyCounts,
		"retention.ErrCameraHeld": retention.ErrCameraHeld,
	}
	var dirs []string
	err := filepath.WalkDir("../store", func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() != "testdata" {
			dirs = append(dirs, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, dir := range dirs {
		pkgs, err := parser.ParseDir(token.NewFileSet(), dir, func(fi fs.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, 0)
		if err != nil {
			continue // not a Go package
		}
		for name, pkg := range pkgs {
			for _, f := range pkg.Files {
				for _, decl := range f.Decls {
					gen, ok := decl.(*ast.GenDecl)
					if !ok || gen.Tok != token.VAR {
						continue
					}
					for _, spec := range gen.Specs {
						for _, ident := range spec.(*ast.ValueSpec).Names {
							if !ident.IsExported() || !strings.HasPrefix(ident.Name, "Err") {
								continue
							}
							found++
							qualified := name + "." + ident.Name
							if _, ok := offTheAPI[qualified]; ok {
								continue
							}
							if err, ok := byName[qualified]; !ok || !mapped[err] {
								t.Errorf("%s has no code in errorCodes (nor a reason in offTheAPI): a call returning it answers INTERNAL", qualified)
							}
						}
					}
				}
			}
		}
	}
	if found < len(byName) {
		t.Errorf("found %d sentinels in ../store, fewer than the %d mapped: is the parse broken?", found, len(byName))
	}
}

// TestErrorWords: a call's own message replaces the table's, never its
// code; a property error becomes a field violation of the call's entity;
// a running purge carries its PURGE_RUNNING detail.
func TestErrorWords(t *testing.T) {
	ctx, log := t.Context(), slog.New(slog.DiscardHandler)
	words := errorWords{
		messages: map[error]string{store.ErrNotFound: `camera "cam-1" has no image`},
		entity:   "metadata", fields: map[string]string{"BlobUri": "blob_uri"},
	}
	st, _ := status.FromError(words.status(ctx, log, fmt.Errorf("get: %w", store.ErrNotFound)))
	if st.Code() != codes.NotFound || st.Message() != `camera "cam-1" has no image` {
		t.Errorf("not found in the call's words: %v %q", st.Code(), st.Message())
	}
	st, _ = status.FromError(words.status(ctx, log, fmt.Errorf("put: %w", store.ErrConflict)))
	if st.Code() != codes.Aborted || st.Message() != "concurrent modification; read again and retry" {
		t.Errorf("a sentinel the call has no words for: %v %q, want the table's", st.Code(), st.Message())
	}

	prop := &store.PropertyError{Property: "BlobUri", Err: errors.New("too long")}
	st, _ = status.FromError(words.status(ctx, log, fmt.Errorf("insert: %w", prop)))
	var violations []string
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				violations = append(violations, v.GetField())
			}
		}
	}
	if st.Code() != codes.InvalidArgument || len(violations) != 1 || violations[0] != "metadata.blob_uri" {
		t.Errorf("property error: %v, violations %q; want INVALID_ARGUMENT on metadata.blob_uri", st.Code(), violations)
	}

	st, _ = status.FromError(toStatus(ctx, log, fmt.Errorf("start: %w", &retention.RunningError{JobID: "job-1"})))
	var subjects []string
	for _, d := range st.Details() {
		if pf, ok := d.(*errdetails.PreconditionFailure); ok {
			for _, v := range pf.GetViolations() {
				subjects = append(subjects, v.GetType()+" "+v.GetSubject())
			}
		}
	}
	if st.Code() != codes.FailedPrecondition || len(subjects) != 1 || subjects[0] != "PURGE_RUNNING purges/job-1" {
		t.Errorf("running purge: %v, details %q", st.Code(), subjects)
	}
}

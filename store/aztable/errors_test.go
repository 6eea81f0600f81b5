package aztable

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/metadatad/metadatad/store"
)

func TestServiceError(t *testing.T) {
	sentinels := []error{store.ErrNotFound, store.ErrAlreadyExists, store.ErrConflict, store.ErrTooLarge}
	odata := func(code, message string) string {
		return `{"odata.error":{"code":"` + code + `","message":{"lang":"en-US","value":"` + message + `\nRequestId:1\nTime:2026-01-01T00:00:00Z"}}}`
	}
	for _, tc := range []struct {
		name    string
		status  int
		code    string
		message string
		want    error  // nil: no sentinel
		text    string // what the error must say
	}{
		{"missing entity", 404, "ResourceNotFound", "The specified resource does not exist.", store.ErrNotFound, "404 ResourceNotFound"},
		{"missing table is no missing entity", 404, "TableNotFound", "The table specified does not exist.", nil, "404 TableNotFound: The table specified does not exist."},
		{"taken key", 409, "EntityAlreadyExists", "The specified entity already exists.", store.ErrAlreadyExists, "409 EntityAlreadyExists"},
		{"table being deleted", 409, "TableBeingDeleted", "The specified table is being deleted.", nil, "409 TableBeingDeleted"},
		{"stale ETag", 412, "UpdateConditionNotSatisfied", "The update condition specified in the request was not satisfied.", store.ErrConflict, "412"},
		{"entity too large", 400, "EntityTooLarge", "The entity is larger than the maximum allowed size.", store.ErrTooLarge, "EntityTooLarge"},
		{"body too large", 413, "RequestBodyTooLarge", "The request body is too large.", store.ErrTooLarge, "413"},
		{"throttled past the retries", 503, "ServerBusy", "The server is busy.", nil, "service answered 503 ServerBusy: The server is busy."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := serviceError(t.Context(), "get", answerError(tc.status, "application/json", odata(tc.code, tc.message)))
			for _, s := range sentinels {
				if errors.Is(err, s) != (s == tc.want) {
					t.Errorf("serviceError = %v; errors.Is(%v) = %v", err, s, errors.Is(err, s))
				}
			}
			if !strings.Contains(err.Error(), tc.text) || strings.Contains(err.Error(), "\n") {
				t.Errorf("serviceError = %q, want one line saying %q", err, tc.text)
			}
			if tc.want == nil {
				var re *azcore.ResponseError
				if !errors.As(err, &re) {
					t.Errorf("serviceError = %v lost the SDK's error", err)
				}
			}
		})
	}

	t.Run("cancelled context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		err := serviceError(ctx, "get", answerError(http.StatusServiceUnavailable, "application/json", ""))
		if !errors.Is(err, context.Canceled) {
			t.Errorf("serviceError = %v, want one wrapping context.Canceled", err)
		}
	})
}

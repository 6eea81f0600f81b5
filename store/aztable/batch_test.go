package aztable

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"

	"github.com/metadatad/metadatad/store"
)

const batchType = "multipart/mixed; boundary=batchresponse_1"

// changeset is the body of a 202 answer to a failed transaction holding the
// given HTTP answers, laid out as Azure and Azurite send it.
func changeset(answers ...string) string {
	var b strings.Builder
	b.WriteString("--batchresponse_1\r\nContent-Type: multipart/mixed; boundary=changesetresponse_1\r\n\r\n")
	for _, a := range answers {
		b.WriteString("--changesetresponse_1\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n")
		b.WriteString(a)
		b.WriteString("\r\n")
	}
	b.WriteString("--changesetresponse_1--\r\n--batchresponse_1--\r\n")
	return b.String()
}

func jsonAnswer(status, code, message string) string {
	return "HTTP/1.1 " + status + "\r\nContent-ID: 2\r\nDataServiceVersion: 3.0;\r\n" +
		"Content-Type: application/json;odata=minimalmetadata;charset=utf-8\r\n\r\n" +
		`{"odata.error":{"code":"` + code + `","message":{"lang":"en-US","value":"` + message + `\nRequestId:1\nTime:2026-01-01T00:00:00Z"}}}`
}

func TestParseBatchFailure(t *testing.T) {
	for _, tc := range []struct {
		name        string
		status      int
		contentType string
		body        string
		want        batchFailure
		ok          bool
	}{
		{"Azurite: insert of a taken key", http.StatusAccepted, batchType,
			changeset(jsonAnswer("409 Conflict", "EntityAlreadyExists", "1:The specified entity already exists.")),
			batchFailure{index: 1, status: 409, code: "EntityAlreadyExists"}, true},
		{"Azure: stale ETag at a two-digit index", http.StatusAccepted, batchType,
			changeset(jsonAnswer("412 Precondition Failed", "UpdateConditionNotSatisfied", "42:The update condition specified in the request was not satisfied.")),
			batchFailure{index: 42, status: 412, code: "UpdateConditionNotSatisfied"}, true},
		{"Azure: XML error of an older version", http.StatusAccepted, batchType,
			changeset("HTTP/1.1 404 Not Found\r\nContent-ID: 4\r\nContent-Type: application/xml\r\n\r\n" +
				`<?xml version="1.0" encoding="utf-8" standalone="yes"?>` +
				`<error xmlns="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata">` +
				`<code>ResourceNotFound</code><message xml:lang="en-US">1:The specified resource does not exist.` + "\nRequestId:1\n</message></error>"),
			batchFailure{index: 1, status: 404, code: "ResourceNotFound"}, true},
		{"successful answers before the failed one", http.StatusAccepted, batchType,
			changeset("HTTP/1.1 204 No Content\r\nContent-ID: 1\r\n\r\n",
				jsonAnswer("404 Not Found", "ResourceNotFound", "1:The specified resource does not exist.")),
			batchFailure{index: 1, status: 404, code: "ResourceNotFound"}, true},
		{"message without an index", http.StatusAccepted, batchType,
			changeset(jsonAnswer("409 Conflict", "EntityAlreadyExists", "The specified entity already exists.")),
			batchFailure{index: -1, status: 409, code: "EntityAlreadyExists"}, true},
		{"request refused as a whole, with an index", http.StatusBadRequest, "application/json;odata=minimalmetadata",
			`{"odata.error":{"code":"InvalidInput","message":{"lang":"en-US","value":"0:Bad Request - Error in query syntax."}}}`,
			batchFailure{index: 0, status: 400, code: "InvalidInput"}, true},
		{"request refused as a whole, without an index", http.StatusRequestEntityTooLarge, "application/json",
			`{"odata.error":{"code":"RequestBodyTooLarge","message":{"lang":"en-US","value":"The request body is too large."}}}`,
			batchFailure{index: -1, status: 413, code: "RequestBodyTooLarge"}, true},
		{"every answer successful", http.StatusAccepted, batchType,
			changeset("HTTP/1.1 204 No Content\r\nContent-ID: 1\r\n\r\n"), batchFailure{}, false},
		{"truncated multipart", http.StatusAccepted, batchType, "--batchresponse_1\r\nContent-Type: multip", batchFailure{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseBatchFailure(tc.status, tc.contentType, []byte(tc.body))
			if ok != tc.ok {
				t.Fatalf("parseBatchFailure: ok = %v, want %v (%+v)", ok, tc.ok, got)
			}
			if !ok {
				return
			}
			if got.index != tc.want.index || got.status != tc.want.status || got.code != tc.want.code {
				t.Errorf("parseBatchFailure = index %d, %d %s; want index %d, %d %s",
					got.index, got.status, got.code, tc.want.index, tc.want.status, tc.want.code)
			}
			if got.message == "" {
				t.Error("parseBatchFailure lost the message")
			}
		})
	}
}

func TestBatchError(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ops    int
		answer string
		index  int // -1: not a *store.BatchError
		want   error
	}{
		{"taken key", 3, jsonAnswer("409 Conflict", "EntityAlreadyExists", "2:The specified entity already exists."), 2, store.ErrAlreadyExists},
		{"missing row", 3, jsonAnswer("404 Not Found", "ResourceNotFound", "1:The specified resource does not exist."), 1, store.ErrNotFound},
		{"stale ETag", 3, jsonAnswer("412 Precondition Failed", "UpdateConditionNotSatisfied", "0:The update condition specified in the request was not satisfied."), 0, store.ErrConflict},
		{"entity too large", 2, jsonAnswer("400 Bad Request", "EntityTooLarge", "1:The entity is larger than the maximum allowed size."), 1, store.ErrTooLarge},
		{"one operation without an index", 1, jsonAnswer("409 Conflict", "EntityAlreadyExists", "The specified entity already exists."), 0, store.ErrAlreadyExists},
		{"several operations without an index", 2, jsonAnswer("409 Conflict", "EntityAlreadyExists", "The specified entity already exists."), -1, store.ErrAlreadyExists},
		{"index out of range", 2, jsonAnswer("404 Not Found", "ResourceNotFound", "7:The specified resource does not exist."), -1, store.ErrNotFound},
		{"a failure the contract does not name", 2, jsonAnswer("400 Bad Request", "InvalidInput", "1:Bad value."), 1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := batchError(t.Context(), "batch", tc.ops, answerError(http.StatusAccepted, batchType, changeset(tc.answer)))
			var be *store.BatchError
			isBatch := errors.As(err, &be)
			switch {
			case tc.index >= 0 && !isBatch:
				t.Fatalf("batchError = %v, want a *store.BatchError", err)
			case tc.index >= 0 && be.Index != tc.index:
				t.Errorf("batchError: Index %d, want %d", be.Index, tc.index)
			case tc.index < 0 && isBatch:
				t.Errorf("batchError = %v names operation %d; the service named none in range", err, be.Index)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("batchError = %v, want one wrapping %v", err, tc.want)
			}
			for _, s := range []error{store.ErrNotFound, store.ErrAlreadyExists, store.ErrConflict, store.ErrTooLarge} {
				if s != tc.want && errors.Is(err, s) {
					t.Errorf("batchError = %v wraps %v too", err, s)
				}
			}
		})
	}
}

// answerError is the error the SDK returns for an answer.
func answerError(status int, contentType, body string) error {
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/devstoreaccount1/$batch", nil)
	return runtime.NewResponseError(&http.Response{
		StatusCode: status,
		Status:     http.StatusText(status),
		Header:     http.Header{"Content-Type": {contentType}},
		Body:       io.NopCloser(strings.NewReader(body)),
		Request:    req,
	})
}

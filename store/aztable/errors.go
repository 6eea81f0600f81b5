package aztable

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/metadatad/metadatad/store"
)

// codeRequestBodyTooLarge is the code of a batch over 4 MiB, which the SDK
// does not name.
const codeRequestBodyTooLarge = "RequestBodyTooLarge"

// sentinel is the store error of a service answer, or nil when the answer
// means nothing to the contract (throttling that outlived the retries, a
// missing table, an authorisation failure).
func sentinel(status int, code string) error {
	switch {
	case status == http.StatusNotFound && code != string(aztables.TableNotFound):
		// ResourceNotFound: the entity, not the table, is missing.
		return store.ErrNotFound
	case status == http.StatusConflict && code == string(aztables.EntityAlreadyExists):
		return store.ErrAlreadyExists
	case status == http.StatusPreconditionFailed:
		// UpdateConditionNotSatisfied: the ETag of If-Match is stale.
		return store.ErrConflict
	case status == http.StatusRequestEntityTooLarge,
		code == string(aztables.EntityTooLarge),
		code == string(aztables.PropertyValueTooLarge),
		code == codeRequestBodyTooLarge:
		return store.ErrTooLarge
	}
	return nil
}

// serviceError turns an SDK error into the contract's: a cancelled or expired
// context first, so that callers tell a shutdown from a storage failure, then
// the sentinel of the service's answer. Every error goes through redact.
func serviceError(ctx context.Context, what string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("aztable: %s: %w", what, cerr)
	}
	err = redact(err)
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		if s := sentinel(re.StatusCode, re.ErrorCode); s != nil {
			return fmt.Errorf("aztable: %s: %w (%d %s)", what, s, re.StatusCode, re.ErrorCode)
		}
		return &responseError{what: what, re: re}
	}
	return fmt.Errorf("aztable: %s: %w", what, err)
}

// responseError is an answer the contract has no sentinel for, told in one
// line for the log; the SDK's error, with the whole answer, stays in the
// chain for errors.As.
type responseError struct {
	what string
	re   *azcore.ResponseError
}

func (e *responseError) Error() string {
	s := fmt.Sprintf("aztable: %s: service answered %d %s", e.what, e.re.StatusCode, e.re.ErrorCode)
	if e.re.RawResponse == nil {
		return s
	}
	if body, err := runtime.Payload(e.re.RawResponse); err == nil {
		if _, message := odataError(body); message != "" {
			s += ": " + firstLine(message)
		}
	}
	return s
}

func (e *responseError) Unwrap() error { return e.re }

// firstLine is the first line of a service's error message; the lines after
// it hold the request ID and time.
func firstLine(message string) string {
	first, _, _ := strings.Cut(message, "\n")
	return first
}

// hasCode reports whether err is the service's answer with status and code.
func hasCode(err error, status int, code aztables.TableErrorCode) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == status && re.ErrorCode == string(code)
}

// hasStatus reports whether err is the service's answer with status.
func hasStatus(err error, status int) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == status
}

// redact drops the query of a URL a transport error quotes: with a shared
// access signature the query holds the signature, a secret. Response errors
// need nothing: azcore prints only their method, host and path.
func redact(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil && u.RawQuery != "" {
			u.RawQuery = "REDACTED"
			ue.URL = u.String()
		} else if perr != nil {
			ue.URL = "REDACTED"
		}
	}
	return err
}

// odataError reads the code and message of an OData error body.
func odataError(body []byte) (code, message string) {
	var j struct {
		Error struct {
			Code    string `json:"code"`
			Message struct {
				Value string `json:"value"`
			} `json:"message"`
		} `json:"odata.error"`
	}
	if json.Unmarshal(body, &j) == nil && j.Error.Code != "" {
		return j.Error.Code, j.Error.Message.Value
	}
	var x struct {
		Code    string `xml:"code"`
		Message string `xml:"message"`
	}
	if xml.Unmarshal(body, &x) == nil {
		return x.Code, x.Message
	}
	return "", ""
}

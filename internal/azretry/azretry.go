package azretry

import (
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
)

// Defaults of the policy. Azure asks clients to back off exponentially on
// 503 Server Busy and 500 Operation Timeout; azcore's retry policy does so
// (delay × (2^try − 1), jittered, capped), honouring Retry-After, and its
// default status list holds both.
const (
	MaxRetries    = 5
	RetryDelay    = 500 * time.Millisecond
	MaxRetryDelay = 30 * time.Second
	// TryTimeout bounds one attempt, so that a connection the network
	// dropped without a reset is retried instead of waited on until the
	// caller's deadline.
	TryTimeout = time.Minute
)

// WithDefaults fills the zero fields of o with the package defaults;
// StatusCodes left nil keep azcore's own list.
func WithDefaults(o policy.RetryOptions) policy.RetryOptions {
	if o.MaxRetries == 0 {
		o.MaxRetries = MaxRetries
	}
	if o.RetryDelay == 0 {
		o.RetryDelay = RetryDelay
	}
	if o.MaxRetryDelay == 0 {
		o.MaxRetryDelay = MaxRetryDelay
	}
	if o.TryTimeout == 0 {
		o.TryTimeout = TryTimeout
	}
	return o
}

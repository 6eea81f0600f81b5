package azqueue

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net/url"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/queueerror"

	"github.com/metadatad/metadatad/internal/azretry"
	"github.com/metadatad/metadatad/store/tablequeue"
)

// Azure's limits on a receive.
const (
	maxReceive    = 32
	maxVisibility = 7 * 24 * time.Hour
	// MaxMessageBytes bounds a message body: 64 KiB of base64 text.
	MaxMessageBytes = 48 << 10
)

// ErrMessageTooLarge reports a body over MaxMessageBytes.
var ErrMessageTooLarge = errors.New("azqueue: message too large")

// Options configures Open. Exactly one of ConnectionString and ServiceURL
// is set.
type Options struct {
	// ConnectionString is the storage account's full connection string
	// (with QueueEndpoint or EndpointSuffix). It holds the account key: it
	// never appears in an error or a log line.
	ConnectionString string
	// ServiceURL is the queue endpoint, such as
	// https://account.queue.core.windows.net, for Credential.
	ServiceURL string
	// Credential authorises requests to ServiceURL.
	Credential azcore.TokenCredential
	// Name is the queue's name: 3 to 63 lower-case letters, digits and dashes.
	Name string
	// Retry is azcore's retry policy; zero fields take azretry's defaults,
	// the tables' too: backoff on 500 and 503, dropped connections retried,
	// one minute per attempt.
	Retry policy.RetryOptions
	// Transport sends the HTTP requests; nil means azcore's default client.
	Transport policy.Transporter
	// PoisonTTL is how long a dead-lettered message stays in the poison
	// queue, kept for operators as long as a purge's record (the daemon
	// passes its -purge-job-retention); 0 keeps it for ever.
	PoisonTTL time.Duration
}

// Queue is one Azure queue and its poison queue.
type Queue struct {
	main, poison *azqueue.QueueClient
	// poisonTTL is a dead letter's time to live in seconds, -1 for ever.
	poisonTTL int32
}

// Open connects to the queue service and creates the queue and its poison
// queue if they do not exist.
func Open(ctx context.Context, opts Options) (*Queue, error) {
	clientOpts := &azqueue.ClientOptions{ClientOptions: azcore.ClientOptions{Retry: azretry.WithDefaults(opts.Retry), Transport: opts.Transport}}
	var service *azqueue.ServiceClient
	var err error
	switch {
	case opts.ConnectionString != "" && opts.ServiceURL != "":
		return nil, errors.New("azqueue: set ConnectionString or ServiceURL, not both")
	case opts.ConnectionString != "":
		service, err = azqueue.NewServiceClientFromConnectionString(opts.ConnectionString, clientOpts)
		if err != nil {
			// The SDK's message may quote the string, key included.
			return nil, errors.New("azqueue: the connection string is malformed")
		}
	case opts.ServiceURL != "" && opts.Credential != nil:
		if service, err = azqueue.NewServiceClient(opts.ServiceURL, opts.Credential, clientOpts); err != nil {
			return nil, fmt.Errorf("azqueue: %w", err)
		}
	default:
		return nil, errors.New("azqueue: set ConnectionString, or ServiceURL and Credential")
	}
	q := &Queue{main: service.NewQueueClient(opts.Name), poison: service.NewQueueClient(opts.Name + "-poison"), poisonTTL: -1}
	if opts.PoisonTTL > 0 {
		q.poisonTTL = int32(min(opts.PoisonTTL.Round(time.Second)/time.Second, math.MaxInt32))
	}
	for _, c := range []*azqueue.QueueClient{q.main, q.poison} {
		if _, err := c.Create(ctx, nil); err != nil && !queueerror.HasCode(err, queueerror.QueueAlreadyExists) {
			return nil, fmt.Errorf("azqueue: create queue: %w", describe(err))
		}
	}
	return q, nil
}

// Send adds a message, visible at once, that never expires: a purge's task
// must outlive any backlog.
func (q *Queue) Send(ctx context.Context, body []byte) error {
	return send(ctx, q.main, body, -1)
}

// send enqueues body to live ttl seconds, -1 for ever.
func send(ctx context.Context, c *azqueue.QueueClient, body []byte, ttl int32) error {
	if len(body) > MaxMessageBytes {
		return fmt.Errorf("%w: %d bytes, over %d", ErrMessageTooLarge, len(body), MaxMessageBytes)
	}
	_, err := c.EnqueueMessage(ctx, base64.StdEncoding.EncodeToString(body), &azqueue.EnqueueMessageOptions{TimeToLive: to.Ptr(ttl)})
	if err != nil {
		return fmt.Errorf("azqueue: send: %w", describe(err))
	}
	return nil
}

// Receive returns up to limit visible messages and hides them for visibility
// (rounded up to whole seconds, as Azure counts it).
func (q *Queue) Receive(ctx context.Context, limit int, visibility time.Duration) ([]tablequeue.Message, error) {
	n := int32(min(limit, maxReceive))
	secs := visibilitySeconds(visibility)
	resp, err := q.main.DequeueMessages(ctx, &azqueue.DequeueMessagesOptions{
		NumberOfMessages: &n, VisibilityTimeout: &secs,
	})
	if err != nil {
		return nil, fmt.Errorf("azqueue: receive: %w", describe(err))
	}
	out := make([]tablequeue.Message, 0, len(resp.Messages))
	for _, m := range resp.Messages {
		if m == nil || m.MessageID == nil || m.PopReceipt == nil {
			continue
		}
		var text string
		if m.MessageText != nil {
			text = *m.MessageText
		}
		body, err := base64.StdEncoding.DecodeString(text)
		if err != nil {
			body = []byte(text) // not ours: the consumer dead-letters it
		}
		count := 0
		if m.DequeueCount != nil {
			count = int(*m.DequeueCount)
		}
		out = append(out, tablequeue.Message{ID: *m.MessageID, Body: body, DequeueCount: count, Receipt: *m.PopReceipt})
	}
	return out, nil
}

// Extend hides a received message for visibility from now (rounded up to
// whole seconds) and returns it with its new pop receipt. A message
// received again since, or deleted, fails with tablequeue.ErrLostMessage.
func (q *Queue) Extend(ctx context.Context, m tablequeue.Message, visibility time.Duration) (tablequeue.Message, error) {
	resp, err := q.main.UpdateMessage(ctx, m.ID, m.Receipt, base64.StdEncoding.EncodeToString(m.Body),
		&azqueue.UpdateMessageOptions{VisibilityTimeout: to.Ptr(visibilitySeconds(visibility))})
	switch {
	case queueerror.HasCode(err, queueerror.MessageNotFound, queueerror.PopReceiptMismatch):
		return m, fmt.Errorf("%w: %s", tablequeue.ErrLostMessage, m.ID)
	case err != nil:
		return m, fmt.Errorf("azqueue: extend: %w", describe(err))
	case resp.PopReceipt == nil:
		return m, errors.New("azqueue: extend: the service answered without a pop receipt")
	}
	m.Receipt = *resp.PopReceipt
	return m, nil
}

// visibilitySeconds is visibility as Azure takes it: whole seconds, 1 to 7 days.
func visibilitySeconds(visibility time.Duration) int32 {
	return int32(max(1, min(math.Ceil(visibility.Seconds()), maxVisibility.Seconds())))
}

// Delete removes a received message. A message already gone counts as
// deleted; one received again since fails with tablequeue.ErrLostMessage.
func (q *Queue) Delete(ctx context.Context, m tablequeue.Message) error {
	_, err := q.main.DeleteMessage(ctx, m.ID, m.Receipt, nil)
	switch {
	case err == nil, queueerror.HasCode(err, queueerror.MessageNotFound):
		return nil
	case queueerror.HasCode(err, queueerror.PopReceiptMismatch):
		return fmt.Errorf("%w: %s", tablequeue.ErrLostMessage, m.ID)
	}
	return fmt.Errorf("azqueue: delete: %w", describe(err))
}

// DeadLetter moves a received message to the poison queue, where it
// lives Options.PoisonTTL.
func (q *Queue) DeadLetter(ctx context.Context, m tablequeue.Message) error {
	if err := send(ctx, q.poison, m.Body, q.poisonTTL); err != nil {
		return err
	}
	return q.Delete(ctx, m)
}

// Depth is the queue's approximate message count, as Azure reports it:
// messages in flight included, poison queue excluded.
func (q *Queue) Depth(ctx context.Context) (int64, error) {
	props, err := q.main.GetProperties(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("azqueue: depth: %w", describe(err))
	}
	if props.ApproximateMessagesCount == nil {
		return 0, nil
	}
	return int64(*props.ApproximateMessagesCount), nil
}

// describe keeps an error's status and code and drops the rest: the SDK's
// messages quote request URLs, which may carry a SAS token.
func describe(err error) error {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return fmt.Errorf("service answered %d %s", re.StatusCode, re.ErrorCode)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s request failed: %w", ue.Op, ue.Err)
	}
	return err
}

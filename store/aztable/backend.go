package aztable

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/metadatad/metadatad/internal/azretry"
	"github.com/metadatad/metadatad/store"
)

// maxPrefix bounds Options.TablePrefix so that a prefixed name always has
// room for the hash that shortens long names (see azureName).
const maxPrefix = 40

// Options configures Open. Exactly one of ConnectionString and ServiceURL
// is set.
type Options struct {
	// ConnectionString is a storage account's full connection string, with
	// AccountName, AccountKey (or SharedAccessSignature) and TableEndpoint
	// or EndpointSuffix. The SDK does not parse the UseDevelopmentStorage=true
	// shorthand, so Open rejects it. The string holds the account key: it
	// never appears in an error or a log line.
	ConnectionString string
	// ServiceURL is the table endpoint, such as
	// https://account.table.core.windows.net, for Credential.
	ServiceURL string
	// Credential authorises requests to ServiceURL, for instance
	// azidentity's DefaultAzureCredential with a managed identity.
	Credential azcore.TokenCredential
	// TablePrefix is prepended to every table name, so that several
	// deployments or tests share one account without sharing tables. It is
	// letters and digits, starting with a letter, at most 40 characters.
	// Empty means the names as given, the names the .NET system uses.
	TablePrefix string
	// Logger receives the backend's messages; nil means slog.Default.
	Logger *slog.Logger
	// Retry is azcore's retry policy. Zero fields take azretry's defaults:
	// 5 retries, a first delay of 500ms doubling up to 30s, a try timeout
	// of one minute, and azcore's statuses (408, 429, 500, 502, 503, 504).
	// Dropped connections are retried too. MaxRetries below zero means none.
	Retry policy.RetryOptions
	// Transport sends the HTTP requests; nil means azcore's default client.
	// Tests pass one that drops responses or injects throttling.
	Transport policy.Transporter
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.Retry = azretry.WithDefaults(o.Retry)
	return o
}

// Backend is a storage account's table service. It implements store.Backend
// through the portable layer (store.NewBackend), which checks every call
// before a request is built. It implements neither store.Transactor nor
// store.Purger: Azure has no transaction across partitions or tables and no
// range delete, so callers take their fallbacks.
type Backend struct {
	// tables is the portable layer over this backend's driver.
	tables  store.Backend
	service *aztables.ServiceClient
	prefix  string
	log     *slog.Logger
	// clock stamps writes, for every table.
	clock *clock

	mu sync.Mutex
	// entries holds one entry per table, keyed by the Azure name in lower
	// case since Azure table names are case-insensitive.
	entries map[string]*tableEntry
}

// tableEntry is a table's client, and whether the table is known to exist.
type tableEntry struct {
	mu      sync.Mutex
	client  *aztables.Client
	created bool
}

// Open connects to the table service and checks that it answers and accepts
// the credentials, by listing at most one table, so that a wrong key or URL
// fails here rather than on the first request the daemon serves.
func Open(ctx context.Context, opts Options) (*Backend, error) {
	opts = opts.withDefaults()
	if err := checkPrefix(opts.TablePrefix); err != nil {
		return nil, err
	}
	clientOpts := &aztables.ClientOptions{ClientOptions: azcore.ClientOptions{
		Retry:            opts.Retry,
		Transport:        opts.Transport,
		PerRetryPolicies: []policy.Policy{countAttempts{}},
	}}
	service, err := newServiceClient(opts, clientOpts)
	if err != nil {
		return nil, err
	}
	b := &Backend{service: service, prefix: opts.TablePrefix, log: opts.Logger, clock: &clock{log: opts.Logger},
		entries: map[string]*tableEntry{}}
	b.tables = store.NewBackend(store.Driver{OpenTable: b.openTable})
	pager := service.NewListTablesPager(&aztables.ListTablesOptions{Top: to.Ptr[int32](1)})
	if _, err := pager.NextPage(ctx); err != nil {
		return nil, serviceError(ctx, "open: list tables", err)
	}
	return b, nil
}

// newServiceClient builds the SDK client. Errors about the connection string
// never wrap the SDK's: those may quote the string, and it holds the key.
func newServiceClient(opts Options, clientOpts *aztables.ClientOptions) (*aztables.ServiceClient, error) {
	switch {
	case opts.ConnectionString != "" && opts.ServiceURL != "":
		return nil, errors.New("aztable: set either Options.ConnectionString or Options.ServiceURL, not both")
	case opts.ConnectionString != "":
		if isDevelopmentStorage(opts.ConnectionString) {
			return nil, errors.New("aztable: the Azure SDK does not parse UseDevelopmentStorage=true; " +
				"pass the emulator's full connection string: DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;" +
				"AccountKey=<key>;TableEndpoint=http://127.0.0.1:10002/devstoreaccount1;")
		}
		service, err := aztables.NewServiceClientFromConnectionString(opts.ConnectionString, clientOpts)
		if err != nil {
			return nil, errors.New("aztable: the connection string is malformed: it needs AccountName, " +
				"AccountKey (or SharedAccessSignature) and TableEndpoint or EndpointSuffix, as key=value pairs separated by semicolons")
		}
		return service, nil
	case opts.ServiceURL != "":
		if opts.Credential == nil {
			return nil, errors.New("aztable: Options.ServiceURL needs Options.Credential")
		}
		service, err := aztables.NewServiceClient(opts.ServiceURL, opts.Credential, clientOpts)
		if err != nil {
			return nil, fmt.Errorf("aztable: service URL: %w", redact(err))
		}
		return service, nil
	}
	return nil, errors.New("aztable: set Options.ConnectionString or Options.ServiceURL")
}

func isDevelopmentStorage(connectionString string) bool {
	for _, pair := range strings.Split(connectionString, ";") {
		k, v, _ := strings.Cut(pair, "=")
		if strings.EqualFold(strings.TrimSpace(k), "UseDevelopmentStorage") && strings.EqualFold(strings.TrimSpace(v), "true") {
			return true
		}
	}
	return false
}

func checkPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if len(prefix) > maxPrefix {
		return fmt.Errorf("aztable: table prefix %q is over %d characters", prefix, maxPrefix)
	}
	// A prefix followed by a valid name is valid when the prefix is letters
	// and digits starting with a letter; pad it to pass the length rule.
	if err := store.ValidateTableName(prefix + "abc"); err != nil {
		return fmt.Errorf("aztable: table prefix %q must be letters and digits, starting with a letter", prefix)
	}
	return nil
}

// Table returns the named table, creating it if it does not exist. Azure has
// no create-if-absent: a 409 TableAlreadyExists means another caller, or an
// earlier process, created it, and counts as success. A table once created
// is remembered, so later calls send no request.
func (b *Backend) Table(ctx context.Context, name string) (store.Table, error) {
	return b.tables.Table(ctx, name)
}

// openTable is the driver's side of Table, for a valid name.
func (b *Backend) openTable(ctx context.Context, name string) (store.Table, error) {
	azure := azureName(b.prefix, name)
	b.mu.Lock()
	entry, ok := b.entries[strings.ToLower(azure)]
	if !ok {
		// The first spelling opened names the table in every request, so
		// that differently cased handles address it alike.
		entry = &tableEntry{client: b.service.NewClient(azure)}
		b.entries[strings.ToLower(azure)] = entry
	}
	b.mu.Unlock()

	entry.mu.Lock()
	defer entry.mu.Unlock()
	if !entry.created {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("aztable: create table %s: %w", azure, err)
		}
		_, err := entry.client.CreateTable(ctx, nil)
		if err != nil && !hasCode(err, http.StatusConflict, aztables.TableAlreadyExists) {
			return nil, serviceError(ctx, "create table "+azure, err)
		}
		if err == nil {
			b.log.Info("aztable: created table", "table", azure)
		}
		entry.created = true
	}
	return &table{name: name, client: entry.client, log: b.log, clock: b.clock}, nil
}

// azureName is the name of a table in the account: the prefix and the name.
// Azure caps names at 63 characters; a prefixed name over the cap keeps its
// head and ends with a hash of the whole lower-cased name, so that it stays
// distinct, stable and case-insensitive. Without a prefix names are unchanged.
func azureName(prefix, name string) string {
	full := prefix + name
	if len(full) <= 63 {
		return full
	}
	sum := sha256.Sum256([]byte(strings.ToLower(name)))
	hash := strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:]))[:16]
	return full[:63-len(hash)] + hash
}

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
)

// runBlobs is `metadatad blobs audit`: the blobs under a prefix of a
// container that no image row names, and the image rows under it whose
// blob is missing, for the orphans that exist from before the blob deleter
// (or from a lifecycle rule that did not follow the holds).
func runBlobs(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlagSet("metadatad blobs audit")
	var f blobsFlags
	f.register(fs)
	if len(args) > 0 && isHelpFlag(args[0]) {
		printHelp(out, fs) // blobs has one verb: its help is audit's
		return flag.ErrHelp
	}
	if len(args) == 0 || args[0] != "audit" {
		return usagef(fs, "metadatad blobs takes one verb: audit")
	}
	if _, err := parseFlags(fs, args[1:], out); err != nil {
		return err
	}
	warnings, err := f.azure.resolve(fs)
	if err != nil {
		return usagef(fs, "%v", err)
	}
	for _, w := range warnings {
		fmt.Fprintln(os.Stderr, "metadatad blobs audit: warning:", w)
	}
	switch {
	case f.container == "":
		return usagef(fs, "-container is required")
	case f.store == "embedded" && f.dataDir == "":
		return usagef(fs, "-data-dir is required with -store embedded")
	case f.store != "embedded" && f.store != "azure":
		return usagef(fs, "-store must be embedded or azure, not %q", f.store)
	case f.limit <= 0:
		return usagef(fs, "-limit must be positive, not %d", f.limit)
	}
	service, err := blobServiceURL([]string{f.container})
	if err != nil {
		return usagef(fs, "%v", err)
	}
	client, err := blobClient(service)
	if err != nil {
		return fmt.Errorf("blobs audit: %w", err)
	}
	tables, closeTables, err := f.open(ctx)
	if err != nil {
		return fmt.Errorf("blobs audit: %w", err)
	}
	defer closeTables()
	a := audit{container: strings.TrimSuffix(f.container, "/"), prefix: f.prefix}
	if err := a.readRows(ctx, tables); err != nil {
		return fmt.Errorf("blobs audit: %w", err)
	}
	listed, orphans, err := a.listBlobs(ctx, client, out, f.limit)
	if err != nil {
		return fmt.Errorf("blobs audit: %w", err)
	}
	missing := make([]string, 0, len(a.rows))
	for name := range a.rows {
		missing = append(missing, name)
	}
	slices.Sort(missing)
	for i, name := range missing {
		if i == f.limit {
			fmt.Fprintf(out, "... %d more rows whose blob is missing\n", len(missing)-i)
			break
		}
		fmt.Fprintf(out, "missing %s/%s (%s)\n", a.container, name, a.rows[name])
	}
	fmt.Fprintf(out, "%d blobs under %s/%s: %d named by no image row; %d image rows whose blob is missing\n",
		listed, a.container, f.prefix, orphans, len(missing))
	return nil
}

type blobsFlags struct {
	store, dataDir, container, prefix string
	azure                             azureConfig
	limit                             int
}

func (f *blobsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.store, "store", "embedded", "the store audited: embedded (a stopped metadatad's -data-dir) or azure (its tables, which the audit reads while metadatad serves)")
	fs.StringVar(&f.dataDir, "data-dir", "", "with -store embedded: data directory of a stopped metadatad (required)")
	f.azure.register(fs, "with -store azure")
	fs.StringVar(&f.container, "container", "", "URL of the Azure Blob container, e.g. https://acct.blob.core.windows.net/images (required); credentials from $"+envBlobConnectionString+", else DefaultAzureCredential")
	fs.StringVar(&f.prefix, "prefix", "", "audit only the blobs whose name starts with this, and the rows whose blob_uri does")
	fs.IntVar(&f.limit, "limit", 100, "print at most this many orphans and as many missing blobs (the counts are of all)")
}

// open opens the audited store's tables and says how to close them.
func (f *blobsFlags) open(ctx context.Context) (store.Backend, func(), error) {
	if f.store == "azure" {
		tables, _, err := openAzureTables(ctx, f.azure)
		return tables, func() {}, err
	}
	if _, err := os.Stat(f.dataDir); err != nil {
		return nil, nil, err
	}
	db, err := pebble.Open(pebble.Options{Dir: f.dataDir, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return nil, nil, notAlone(f.dataDir, err, "stop the metadatad that serves it first")
	}
	return db, func() { _ = db.Close() }, nil
}

// blobClient is a client of service, with the credentials the blob
// deleter uses.
func blobClient(service string) (*azblob.Client, error) {
	if conn := os.Getenv(envBlobConnectionString); conn != "" {
		return azblob.NewClientFromConnectionString(conn, nil)
	}
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		return nil, err
	}
	return azblob.NewClient(service, cred, nil)
}

// audit is one audit: the image rows whose blob_uri lies under the
// container and prefix, by blob name, each with what names it; a blob
// listed is taken out of rows, so what is left is missing.
type audit struct {
	container, prefix string
	rows              map[string]string
}

// readRows reads the blob URIs of every image row of each kind, keys and
// one property (a scan of the tables, as an audit is a one-off).
func (a *audit) readRows(ctx context.Context, db store.Backend) error {
	a.rows = map[string]string{}
	for _, kind := range images.Kinds {
		repo, err := images.Open(ctx, db, images.Options{Kind: kind})
		if err != nil {
			return err
		}
		primary, _ := repo.Tables()
		s := store.Scan{Select: []string{images.PropBlobURI}}
		for {
			page, err := primary.Scan(ctx, s)
			if err != nil {
				return err
			}
			for _, e := range page.Entities {
				uri, _ := e.Properties[images.PropBlobURI].(string)
				if name, ok := a.name(uri); ok {
					a.rows[name] = fmt.Sprintf("%s %s %s", kind, e.PartitionKey, e.RowKey)
				}
			}
			if page.Next == nil {
				break
			}
			s.Resume = page.Next
		}
	}
	return nil
}

// name is a blob URI's blob name in the audited container, if it is there
// and under the prefix.
func (a *audit) name(uri string) (string, bool) {
	rest, ok := strings.CutPrefix(uri, a.container+"/")
	if !ok {
		return "", false
	}
	name, err := url.PathUnescape(rest)
	if err != nil || !strings.HasPrefix(name, a.prefix) {
		return "", false
	}
	return name, true
}

// listBlobs pages through the container's blobs under the prefix, prints
// up to limit that no row names, and takes the named ones out of rows.
func (a *audit) listBlobs(ctx context.Context, client *azblob.Client, out io.Writer, limit int) (listed, orphans int, err error) {
	cont := a.container[strings.LastIndex(a.container, "/")+1:]
	pager := client.NewListBlobsFlatPager(cont, &azblob.ListBlobsFlatOptions{Prefix: &a.prefix})
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return listed, orphans, err
		}
		for _, b := range page.Segment.BlobItems {
			if b.Name == nil {
				continue
			}
			listed++
			if _, named := a.rows[*b.Name]; named {
				delete(a.rows, *b.Name)
				continue
			}
			if orphans++; orphans <= limit {
				fmt.Fprintf(out, "orphan %s/%s\n", a.container, *b.Name)
			}
		}
	}
	if orphans > limit {
		fmt.Fprintf(out, "... %d more orphans\n", orphans-limit)
	}
	return listed, orphans, nil
}

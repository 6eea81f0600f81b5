package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/acquisition"
	"github.com/metadatad/metadatad/store/aztable"
	"github.com/metadatad/metadatad/store/fleet"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/tablecopy"
)

// runCopy is `metadatad copy`: every table of a deployment from one backend
// to another, resumable, verified at the end.
func runCopy(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlagSet("metadatad copy")
	var f copyFlags
	applyTables := f.register(fs)
	if _, err := parseFlags(fs, args, out); err != nil {
		return err
	}
	applyTables()
	warnings, err := f.config.azure.resolve(fs)
	if err != nil {
		return usagef(fs, "%v", err)
	}
	for _, w := range warnings {
		fmt.Fprintln(os.Stderr, "metadatad copy: warning:", w)
	}
	switch {
	case f.from == "" || f.to == "":
		return usagef(fs, "-from and -to are required")
	case f.from == "azure" && f.to == "azure":
		return usagef(fs, "from Azure to Azure is not supported: the Azure flags name one account")
	case f.from == f.to || (strings.HasPrefix(f.from, "embedded:") && strings.HasPrefix(f.to, "embedded:") &&
		filepath.Clean(strings.TrimPrefix(f.from, "embedded:")) == filepath.Clean(strings.TrimPrefix(f.to, "embedded:"))):
		return usagef(fs, "-from and -to are the same store")
	}
	src, err := openCopyEnd(ctx, f.from, f.config.azure, nil)
	if err != nil {
		return fmt.Errorf("copy: -from: %w", err)
	}
	defer src.close()
	dst, err := openCopyEnd(ctx, f.to, f.config.azure, copyRerun(fs))
	if err != nil {
		return fmt.Errorf("copy: -to: %w", err)
	}
	defer dst.close()

	opts := tablecopy.Options{From: src.backend, To: dst.backend, Source: src.name, Tables: copyTables(f.config), Restart: f.restart}
	if bar := copyProgress(); bar != nil {
		defer bar.Finish()
		var table string
		var before int64
		opts.Progress = func(t string, rows int64) {
			if t != table {
				table, before = t, 0
				bar.Describe(t)
			}
			_ = bar.Add64(rows - before)
			before = rows
		}
	}
	report, err := tablecopy.Run(ctx, opts)
	if report != nil {
		printCopyReport(out, f.from, f.to, report)
	}
	if err != nil {
		return fmt.Errorf("copy: %w; run the same command again to resume", err)
	}
	if err := copyCameraTables(ctx, src, dst, f.config, out); err != nil {
		return fmt.Errorf("copy: %w; run the same command again to resume", err)
	}
	return dst.finish()
}

// copyCameraTables writes Azure's camera tables (the fleet's inventory,
// store/fleet) when copying the embedded store, which keeps none: its
// views read the primary tables' partitions, which give the rows.
func copyCameraTables(ctx context.Context, src, dst copyEnd, c config, out io.Writer) error {
	if src.embedded == nil || dst.embedded != nil {
		return nil
	}
	for _, k := range images.Kinds {
		table, err := fleet.OpenCameraTable(ctx, dst.backend, c.tables[k])
		if err != nil {
			return err
		}
		n, err := fleet.CopyCameras(ctx, src.embedded, c.tables[k], table)
		if err != nil {
			return fmt.Errorf("camera table %s: %w", table.Name(), err)
		}
		fmt.Fprintf(out, "  %-34s %-14s %9d rows  (a row per camera of %s)\n", table.Name(), "written", n, c.tables[k])
	}
	return nil
}

// copyFlags are the flags of `metadatad copy`.
type copyFlags struct {
	from, to string
	restart  bool
	// config holds the table names and the Azure settings, as the daemon's.
	config config
}

// register defines the flags on fs; the returned function, called once
// they are parsed, fills in the table names.
func (f *copyFlags) register(fs *flag.FlagSet) (applyTables func()) {
	fs.StringVar(&f.from, "from", "", "source: embedded:DIR (a store no metadatad holds) or azure (required)")
	fs.StringVar(&f.to, "to", "", "target: embedded:DIR or azure (required)")
	fs.BoolVar(&f.restart, "restart", false, "copy every table again from its start, ignoring the progress the target recorded")
	f.config.tables = map[images.Kind]string{}
	applyTables = f.config.registerTables(fs)
	f.config.azure.register(fs, "with azure as -from or -to")
	return applyTables
}

// copyCommand names copies in the unfinished marker of an embedded target.
const copyCommand = "copy"

// copyRerun is the command line of this copy, for the unfinished marker:
// the flags given, embedded paths made absolute so the refusal that quotes
// it holds wherever it is run from. A connection string given as a flag is
// left out, so the marker never holds an account key: the rerun reads it
// from $AZURE_STORAGE_CONNECTION_STRING.
func copyRerun(fs *flag.FlagSet) []string {
	args := []string{"metadatad", copyCommand}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "azure-connection-string" {
			return
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			args = append(args, "-"+f.Name+"="+f.Value.String())
			return
		}
		value := f.Value.String()
		if dir, ok := strings.CutPrefix(value, "embedded:"); ok && (f.Name == "from" || f.Name == "to") {
			if abs, err := filepath.Abs(dir); err == nil {
				value = "embedded:" + abs
			}
		}
		args = append(args, "-"+f.Name, value)
	})
	return args
}

// copyTables lists every table of the deployment, each index table before
// its primary table (and the active-instance table after the instance
// table it follows), so the dual-table invariant holds throughout.
func copyTables(c config) []string {
	var tables []string
	for _, k := range images.Kinds {
		tables = append(tables, images.IndexTable(c.tables[k]), c.tables[k])
		if k.HasPointers() {
			// After the primary table: a pointer row never promises more
			// than the rows already there (see images.PointerTable).
			tables = append(tables, images.PointerTable(c.tables[k]))
		}
	}
	return append(tables, c.videoTable, c.deviceStateTable, c.acquisitionTable,
		acquisition.ActiveTable(c.acquisitionTable), retention.DefaultJobsTable,
		retention.DefaultPoliciesTable, retention.DefaultHoldsTable,
		retention.DefaultOutboxTable, blobDeleterTable)
}

// copyEnd is one side of a copy.
type copyEnd struct {
	backend store.Backend
	// embedded is the embedded store, nil for Azure.
	embedded *pebble.DB
	// name names it in the progress records; it holds no secret.
	name  string
	close func()
	// finish, called once the copy is verified, closes an embedded target
	// and removes its unfinished marker.
	finish func() error
}

// openCopyEnd opens the backend spec names. An embedded source must exist
// and be whole: a directory a restore or copy has not finished is refused.
// An embedded target (rerun set) may be one a copy left unfinished, and is
// marked unfinished with rerun until finish; one a restore left unfinished
// is refused.
func openCopyEnd(ctx context.Context, spec string, a azureConfig, rerun []string) (copyEnd, error) {
	if dir, ok := strings.CutPrefix(spec, "embedded:"); ok && dir != "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return copyEnd{}, err
		}
		opts := pebble.Options{Dir: dir, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
		if _, err := os.Stat(dir); rerun == nil && err != nil {
			return copyEnd{}, fmt.Errorf("no store to copy: %w", err)
		}
		if rerun != nil {
			opts.AllowUnfinished = copyCommand
		}
		db, err := pebble.Open(opts)
		if errors.Is(err, pebble.ErrUnfinished) {
			return copyEnd{}, err
		}
		if err != nil {
			return copyEnd{}, fmt.Errorf("%w (a store a metadatad serves cannot be copied: stop it, or copy a restored backup)", err)
		}
		// Marked once the store is this process's alone (never a served
		// one) and before its first row: what a copy cut short leaves is
		// refused until a rerun finishes it.
		if rerun != nil {
			if err := pebble.MarkUnfinished(dir, pebble.Unfinished{Command: copyCommand, Args: rerun}); err != nil {
				return copyEnd{}, errors.Join(err, db.Close())
			}
		}
		end := copyEnd{backend: db, embedded: db, name: "embedded:" + abs, close: func() { _ = db.Close() }, finish: func() error { return nil }}
		if rerun != nil {
			closed := false
			end.close = func() {
				if !closed {
					_ = db.Close()
				}
			}
			end.finish = func() error {
				closed = true
				if err := db.Close(); err != nil {
					return err
				}
				return pebble.MarkFinished(dir)
			}
		}
		return end, nil
	}
	if spec != "azure" {
		return copyEnd{}, fmt.Errorf("%q is neither embedded:DIR nor azure", spec)
	}
	tables, account, err := openAzureTables(ctx, a)
	if err != nil {
		return copyEnd{}, err
	}
	return copyEnd{backend: tables, name: "azure:" + account + "/" + a.tablePrefix, close: func() {}, finish: func() error { return nil }}, nil
}

// openAzureTables opens the Azure tables a names, for a command that reads
// or writes them offline (copy, blobs audit), and names their account.
func openAzureTables(ctx context.Context, a azureConfig) (*aztable.Backend, string, error) {
	opts := aztable.Options{ConnectionString: a.connectionString, TablePrefix: a.tablePrefix, Logger: slog.New(slog.DiscardHandler)}
	account := accountOf(a.connectionString)
	switch {
	case a.connectionString == "" && a.tableURL == "":
		return nil, "", errors.New("azure needs a connection string ($AZURE_STORAGE_CONNECTION_STRING, $METADATAD_AZURE_CONNECTION_STRING or -azure-connection-string-file) or -azure-table-url")
	case a.connectionString == "":
		cred, err := azidentity.NewDefaultAzureCredential(nil)
		if err != nil {
			return nil, "", fmt.Errorf("azure credential: %w", err)
		}
		opts.ServiceURL, opts.Credential, account = a.tableURL, cred, a.tableURL
	}
	tables, err := aztable.Open(ctx, opts)
	return tables, account, err
}

// accountOf names the account of a connection string by its table
// endpoint, else its account name; never by its key.
func accountOf(connectionString string) string {
	var name string
	for part := range strings.SplitSeq(connectionString, ";") {
		key, value, _ := strings.Cut(part, "=")
		switch key {
		case "TableEndpoint":
			return value
		case "AccountName":
			name = value
		}
	}
	return name
}

// copyProgress is a live count of rows and their rate, on stderr when it
// is a terminal; nil otherwise.
func copyProgress() *progressbar.ProgressBar {
	if !term.IsTerminal(int(os.Stderr.Fd())) {
		return nil
	}
	return progressbar.NewOptions64(-1, progressbar.OptionSetWriter(os.Stderr), progressbar.OptionSetDescription("copy"),
		progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("rows"),
		progressbar.OptionSpinnerType(14), progressbar.OptionClearOnFinish())
}

func printCopyReport(out io.Writer, from, to string, r *tablecopy.Report) {
	fmt.Fprintf(out, "copy %s -> %s: %d rows in %s (%.0f rows/s), %d reads and %d writes (%.3f storage operations per row)\n",
		from, to, r.Rows, r.Duration.Round(time.Millisecond), float64(r.Rows)/max(r.Duration.Seconds(), 1e-9),
		r.Reads, r.Writes, float64(r.Reads+r.Writes)/max(float64(r.Rows), 1))
	for _, t := range r.Tables {
		state := "copied"
		switch {
		case t.AlreadyDone:
			state = "already copied"
		case t.Resumed:
			state = "resumed"
		}
		verified := fmt.Sprintf("verified: %d rows on each side, %d sampled rows equal", t.TargetRows, t.Sampled)
		if len(t.Mismatches) > 0 {
			verified = "DIFFERS: " + strings.Join(t.Mismatches, "; ")
		}
		fmt.Fprintf(out, "  %-34s %-14s %9d rows  %s\n", t.Table, state, t.Rows, verified)
	}
}

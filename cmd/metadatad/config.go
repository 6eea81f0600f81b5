package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	units "github.com/docker/go-units"

	"github.com/metadatad/metadatad/server"
	"github.com/metadatad/metadatad/store/acquisition"
	"github.com/metadatad/metadatad/store/devices"
	"github.com/metadatad/metadatad/store/fleet"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/embedded"
	"github.com/metadatad/metadatad/store/video"
	"github.com/metadatad/metadatad/store/watchfeed"
)

// defaultPurgeRowsPerSecond is the daemon's cap on purge deletes, primary
// and index rows alike: about 5,000 images a second, 18 million an hour,
// so that a day of a large fleet goes in minutes while a first purge of a
// months-long backlog, which takes hours at this pace, leaves live requests
// most of their latency (docs/benchmarks.md, "Request latency while a
// purge runs"). An operator trades one for the other with the flag.
const defaultPurgeRowsPerSecond = 10_000

// defaultPurgeLiveRowsPerSecond is the daemon's cap on purge deletes while
// it serves requests (server.Traffic): a purge runs at full speed on an
// idle store and yields to live traffic, which keeps request p99 within
// 1.5x of idle on the embedded store (docs/benchmarks.md, issue 21 item
// 7). 20,000 rows a second retire 10,000 images a second: twenty times what
// a fleet of 10,000 cameras creates at one image of each type a minute.
const defaultPurgeLiveRowsPerSecond = 20_000

// config is the daemon's configuration. Every flag has an environment
// variable equivalent, METADATAD_ plus the flag name in upper snake case;
// a flag given on the command line wins over its variable.
type config struct {
	listen            string
	store             string
	dataDir           string
	azure             azureConfig
	azureStartTimeout time.Duration
	indexShards       int
	createTimeout     time.Duration
	landingMargin     time.Duration
	replicaID         string
	tables            map[images.Kind]string
	videoTable        string
	deviceStateTable  string
	acquisitionTable  string
	retentionDays     int
	usePolicies       bool
	retentionInterval time.Duration
	minRetentionDays  int
	purgeWorkers      int
	logLevel          slog.Level
	logFormat         string
	accessLog         accessLog
	shutdownTimeout   time.Duration
	purgeLease        time.Duration
	purgeRowsPerSec   float64
	// purgeLiveRowsPerSec caps Azure's purges while requests are served;
	// purgeLive paces the embedded store's by time meanwhile.
	purgeLiveRowsPerSec float64
	purgeLive           embedded.Options
	purgeJobRetention   time.Duration
	minFreeMiB          uint64
	cacheSize           byteSize
	memTableSize        byteSize
	// writeStallLimit is -write-stall-limit (pebble.Options.StallLimit).
	writeStallLimit time.Duration
	// retentionMaxBytes is the storage budget (-retention-max-bytes).
	retentionMaxBytes budgetSize
	// retentionOutbox keeps the outbox of deleted images (-retention-outbox).
	retentionOutbox bool
	// blobDelete is the built-in deleter of deleted images' blobs.
	blobDelete        blobDeleteConfig
	healthInterval    time.Duration
	watchPoll         time.Duration
	watchWindow       time.Duration
	watchBuffer       int
	watchResumeMaxAge time.Duration
	// fleet configures the fleet views (-fleet-*).
	fleetSilentAfter, fleetLookBack, fleetInterval time.Duration
	metricsListen                                  string
	healthListen                                   string
	security                                       securityConfig
	limits                                         limitsConfig
	// version is -version: print it and exit.
	version bool
	// warnings are what parsing found unwise but not wrong, for the log.
	warnings []string
}

// parseConfig parses the daemon's command line and variables; -h prints
// the help on out and returns flag.ErrHelp.
func parseConfig(args []string, out io.Writer) (config, error) {
	c := config{tables: map[images.Kind]string{}}
	fs := newFlagSet("metadatad")
	applyTables := c.register(fs)
	set, err := parseFlags(fs, args, out)
	if err != nil {
		return config{}, err
	}
	if c.version {
		return c, nil
	}
	if c.store == "embedded" && !set["purge-rows-per-second"] {
		// The embedded store deletes expired rows by range: a purge's cost
		// follows its cameras, not its rows, and creates wait on it for one
		// section at most, so the cap that spares Azure's partitions would
		// only slow it down.
		c.purgeRowsPerSec = 0
	}
	if err := c.purgeDesignFlags(set); err != nil {
		return config{}, err
	}
	if c.warnings, err = c.azure.resolve(fs); err != nil {
		return config{}, err
	}
	if err := c.checkStore(); err != nil {
		return config{}, err
	}
	applyTables()
	if c.retentionDays > 0 && c.usePolicies {
		return config{}, fmt.Errorf("-retention-days and -purge-use-policies exclude each other")
	}
	if (c.retentionDays > 0 || c.usePolicies) != (c.retentionInterval > 0) {
		return config{}, fmt.Errorf("-retention-interval goes with -retention-days or -purge-use-policies")
	}
	if c.retentionDays > 0 && c.retentionDays < c.minRetentionDays {
		return config{}, fmt.Errorf("-retention-days %d is below -min-retention-days %d", c.retentionDays, c.minRetentionDays)
	}
	if c.purgeLease <= 0 {
		return config{}, fmt.Errorf("-purge-lease must be positive, not %s", c.purgeLease)
	}
	if c.watchPoll <= 0 || c.watchWindow <= 0 || c.watchBuffer <= 0 || c.watchResumeMaxAge <= 0 {
		return config{}, fmt.Errorf("-watch-poll, -watch-window, -watch-buffer and -watch-resume-max-age must be positive")
	}
	if c.fleetSilentAfter < time.Minute || c.fleetLookBack <= c.fleetSilentAfter || c.fleetInterval <= 0 {
		return config{}, fmt.Errorf("-fleet-silent-after must be a minute or more, -fleet-look-back longer, and -fleet-interval positive")
	}
	if c.purgeRowsPerSec < 0 {
		return config{}, fmt.Errorf("-purge-rows-per-second must not be negative, not %g", c.purgeRowsPerSec)
	}
	if c.purgeLiveRowsPerSec < 0 {
		return config{}, fmt.Errorf("-purge-live-rows-per-second must not be negative, not %g", c.purgeLiveRowsPerSec)
	}
	if c.purgeLive.LiveShare <= 0 || c.purgeLive.LiveShare > 1 || c.purgeLive.SectionTime <= 0 {
		return config{}, fmt.Errorf("-purge-live-share must be in (0, 1] and -purge-section-time positive, not %g and %s", c.purgeLive.LiveShare, c.purgeLive.SectionTime)
	}
	switch {
	case c.purgeLive.LiveBurst < 0:
		return config{}, fmt.Errorf("-purge-live-burst must not be negative, not %s", c.purgeLive.LiveBurst)
	case c.purgeLive.LiveBurst == 0:
		c.purgeLive.LiveBurst = -1 // none (zero is embedded's default)
	}
	if len(c.blobDelete.containers) > 0 {
		switch {
		case !c.retentionOutbox:
			return config{}, errors.New("-blob-delete-containers follows the outbox of deleted images: give -retention-outbox too")
		case c.blobDelete.perSecond <= 0:
			return config{}, fmt.Errorf("-blob-delete-per-second must be positive, not %g", c.blobDelete.perSecond)
		}
		if _, err := blobServiceURL(c.blobDelete.containers); err != nil {
			return config{}, err
		}
	}
	if c.purgeJobRetention <= 0 {
		return config{}, fmt.Errorf("-purge-job-retention must be positive, not %s", c.purgeJobRetention)
	}
	if c.writeStallLimit <= 0 {
		return config{}, fmt.Errorf("-write-stall-limit must be positive, not %s", c.writeStallLimit)
	}
	if c.healthInterval <= 0 {
		return config{}, fmt.Errorf("-health-interval must be positive, not %s", c.healthInterval)
	}
	if c.logFormat != "text" && c.logFormat != "json" {
		return config{}, fmt.Errorf("-log-format must be text or json, not %q", c.logFormat)
	}
	if err := c.security.check(c.listen); err != nil {
		return config{}, err
	}
	return c, nil
}

// register defines the daemon's flags on fs; the returned function,
// called once they are parsed, fills in c.tables.
func (c *config) register(fs *flag.FlagSet) (applyTables func()) {
	if c.tables == nil {
		c.tables = map[images.Kind]string{}
	}
	fs.BoolVar(&c.version, "version", false, "print the module version, VCS revision and Go version, and exit")
	fs.StringVar(&c.listen, "listen", "localhost:50051", "gRPC listen address")
	fs.StringVar(&c.store, "store", "embedded", "where data lives: embedded (Pebble in -data-dir) or azure (Azure Table and Queue Storage)")
	fs.StringVar(&c.dataDir, "data-dir", "data", "directory of the embedded store")
	c.azure.register(fs, "with -store azure")
	fs.StringVar(&c.azure.queueURL, "azure-queue-url", "", "with -azure-table-url: the queue endpoint, e.g. https://ACCOUNT.queue.core.windows.net")
	fs.DurationVar(&c.azureStartTimeout, "azure-start-timeout", time.Minute, "with -store azure: how long the start waits for Azure Storage to answer, logging every 5s while it waits")
	fs.StringVar(&c.azure.queue, "purge-queue", "metadatad-purge", "with -store azure: the queue purge tasks go through; its poison queue is <name>-poison")
	fs.IntVar(&c.indexShards, "index-shards", 1, "index partitions per capture minute, yyyyMMddHHmm_<n>; 1 writes the .NET system's exact keys")
	fs.DurationVar(&c.createTimeout, "create-timeout", images.DefaultCreateTimeout, "with -store azure: a create gives up its primary row this long after it started, so that purges know when an index row's primary row can no longer appear")
	fs.DurationVar(&c.landingMargin, "create-landing-margin", images.DefaultLandingMargin, "with -store azure: how long a write sent before -create-timeout may still land; purges leave index rows younger than the sum to the next purge")
	fs.StringVar(&c.replicaID, "replica-id", "", "this process's name among replicas sharing one store (default: hostname and process id; embedded: \"embedded\")")
	applyTables = c.registerTables(fs)
	fs.IntVar(&c.retentionDays, "retention-days", 0, "with -retention-interval, purge images older than this many days on a schedule (off when 0)")
	fs.BoolVar(&c.usePolicies, "purge-use-policies", false, "with -retention-interval, instead of -retention-days: the built-in schedule purges each camera by its retention policy (see CreateRetentionPolicy) and spares cameras on legal hold")
	fs.DurationVar(&c.retentionInterval, "retention-interval", 0, "how often the built-in schedule starts a purge, e.g. 1h (off when 0)")
	fs.IntVar(&c.minRetentionDays, "min-retention-days", 1, "the retention floor: the smallest retention_days StartPurge and -retention-days accept, and how many days before now a cutoff_time must be at least")
	fs.BoolVar(&c.retentionOutbox, "retention-outbox", false, "keep a record of every image purges and thinning delete (its blob_uri above all), for WatchDeletedImages and -blob-delete-containers: on -store embedded in the same atomic step as the deletion (each purge then reads the rows it deletes); on -store azure written around each delete batch and sealed when the purge ends, when its deletions become readable")
	fs.Func("blob-delete-containers", "with -retention-outbox: delete the blob of every image purges and thinning delete, when its blob_uri lies in one of these comma-separated Azure Blob container URLs (one account), e.g. https://acct.blob.core.windows.net/images; credentials from $"+envBlobConnectionString+", else DefaultAzureCredential", func(s string) error {
		for _, u := range strings.Split(s, ",") {
			if u = strings.TrimSpace(u); u != "" {
				c.blobDelete.containers = append(c.blobDelete.containers, u)
			}
		}
		return nil
	})
	fs.Float64Var(&c.blobDelete.perSecond, "blob-delete-per-second", 50, "with -blob-delete-containers: the most blobs deleted per second")
	fs.BoolVar(&c.blobDelete.dryRun, "blob-delete-dry-run", false, "with -blob-delete-containers: log the blobs that would be deleted, delete none")
	fs.Var(&c.retentionMaxBytes, "retention-max-bytes", "with -store embedded: a storage budget, e.g. 500GiB or 80% (of the data directory's filesystem); past it the oldest images across the fleet are purged, an hour at a time, until the live data fits (never a camera on legal hold, nor images younger than -min-retention-days); off when unset")
	fs.IntVar(&c.purgeWorkers, "purge-workers", max(1, runtime.NumCPU()/2), "with -store azure: purge tasks this process runs at once (default half the CPUs, so a purge leaves room for reads and writes)")
	fs.DurationVar(&c.purgeLease, "purge-lease", 30*time.Second, "how long a purge stays with the replica running it without a renewal (renewed every third of it): another replica takes over a stalled purge this long after its last renewal")
	fs.Float64Var(&c.purgeLiveRowsPerSec, "purge-live-rows-per-second", defaultPurgeLiveRowsPerSecond, "with -store azure: cap on the rows (primary and index alike) this process's purges delete per second while it serves requests (a call of the image, video, device-state or acquisition services within the last second), so that a purge yields to live traffic and runs at full speed on an idle store; 0 means no such cap; the lowest cap in force binds")
	fs.Float64Var(&c.purgeLive.LiveShare, "purge-live-share", embedded.DefaultLiveShare, "with -store embedded: the most of the time a purge works while the server serves requests (a call of the image, video, device-state or acquisition services within the last second), once -purge-live-burst is spent: after each section it rests in proportion; 1 never rests")
	fs.DurationVar(&c.purgeLive.LiveBurst, "purge-live-burst", embedded.DefaultLiveBurst, "with -store embedded: how much work a purge does back to back while the server serves requests before -purge-live-share binds, refilled at that share: a purge that fits it runs at once; 0 means none")
	fs.DurationVar(&c.purgeLive.SectionTime, "purge-section-time", embedded.DefaultSectionTime, "with -store embedded: how long one section of a purge aims to work while the server serves requests; sections are sized from the time the previous ones took")
	fs.Float64Var(&c.purgeRowsPerSec, "purge-rows-per-second", defaultPurgeRowsPerSecond, "cap on the rows (primary and index alike) this process's purges delete per second, so that a purge of a long backlog leaves live requests their latency; 0 means no cap; StartPurge's rows_per_second caps one job lower (default 10000 with -store azure, none with -store embedded, which deletes by range)")
	fs.DurationVar(&c.purgeJobRetention, "purge-job-retention", retention.DefaultJobRetention, "how long the record of an ended purge is kept (checked hourly)")
	fs.TextVar(&c.logLevel, "log-level", slog.LevelInfo, "log level: debug, info, warn, error")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	fs.Var(&c.accessLog, "access-log", "which successful calls get a log line: off, all, or a fraction such as 0.01; calls that fail always get one, at the level of their code (refusals: 20 per code at once, then one a second, counting those left out)")
	fs.Uint64Var(&c.minFreeMiB, "min-free-mib", 256, "with -store embedded: below this many MiB free on the data directory's filesystem, writes fail with RESOURCE_EXHAUSTED and health reports "+server.WritesHealthService+" NOT_SERVING, until space is freed (deletes and purges go on); 0 turns the guard off")
	c.cacheSize, c.memTableSize = pebble.DefaultCacheSize, pebble.DefaultMemTableSize
	fs.Var(&c.cacheSize, "cache-size", "with -store embedded: the block cache, e.g. 256MiB; with -memtable-size (up to 4 held) it is most of the daemon's memory")
	fs.Var(&c.memTableSize, "memtable-size", "with -store embedded: one memtable, e.g. 64MiB; up to 4 are held while flushes catch up, and each write-ahead log file reserves 1.1 times it on disk")
	fs.DurationVar(&c.writeStallLimit, "write-stall-limit", pebble.DefaultStallLimit, "with -store embedded: how long writes may stay stalled while the engine's compactions fail (a full disk) before the process exits with status 70")
	fs.DurationVar(&c.fleetSilentAfter, "fleet-silent-after", fleet.DefaultSilentFor, "the age of its latest image past which the metric metadatad_silent_cameras counts a camera silent")
	fs.DurationVar(&c.fleetLookBack, "fleet-look-back", fleet.DefaultLookBack, "cameras whose latest image is older than this are retired, not silent, for metadatad_silent_cameras")
	fs.DurationVar(&c.fleetInterval, "fleet-interval", fleet.DefaultInterval, "with -store azure: the least time between two writes of a camera's row of the camera table by one replica, and so how far its latest capture may lag the newest image")
	fs.DurationVar(&c.watchPoll, "watch-poll", time.Second, "with -store azure: how often each replica reads the new images of the cameras its Watch calls watch (the create may land on any replica): their primary partitions, or the index for many cameras; with no Watch open it reads nothing")
	fs.DurationVar(&c.watchWindow, "watch-window", watchfeed.DefaultWindow, "Watch calls stream an image whose capture time lies within this of the moment it became readable; older captures (backlog uploads) are not streamed. With -store azure it must exceed -create-timeout plus -create-landing-margin")
	fs.DurationVar(&c.watchResumeMaxAge, "watch-resume-max-age", watchfeed.DefaultMaxResumeAge, "the oldest resume token a Watch call accepts (the API promises an hour); a resume reads the watched cameras' images from the token's point on, so a shorter age bounds what one resume costs")
	fs.IntVar(&c.watchBuffer, "watch-buffer", watchfeed.DefaultBuffer, "new images a Watch stream holds for a client that does not read; past it the stream ends with RESOURCE_EXHAUSTED and a resume token")
	fs.DurationVar(&c.healthInterval, "health-interval", 5*time.Second, "how often health checks that the store answers (and has space)")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long shutdown waits for calls in flight")
	fs.StringVar(&c.metricsListen, "metrics-listen", "", "address of the Prometheus /metrics endpoint, e.g. :9464 (off when empty)")
	fs.StringVar(&c.healthListen, "health-listen", "", "address serving only grpc.health.v1.Health, plaintext and unauthenticated, for Kubernetes' native gRPC probes, e.g. :8086 (off when empty)")
	c.security.register(fs)
	c.limits.register(fs)
	return applyTables
}

// accessLog is -access-log, the fraction of successful calls logged:
// off (0, the default), all (1), or a fraction between.
type accessLog float64

func (a *accessLog) String() string {
	switch *a {
	case 0:
		return "off"
	case 1:
		return "all"
	}
	return strconv.FormatFloat(float64(*a), 'g', -1, 64)
}

func (a *accessLog) Set(s string) error {
	switch s {
	case "off":
		*a = 0
		return nil
	case "all":
		*a = 1
		return nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f > 1 {
		return fmt.Errorf("want off, all or a fraction from 0 to 1, not %q", s)
	}
	*a = accessLog(f)
	return nil
}

// byteSize is a flag of a size in bytes, written with binary units: 256MiB,
// 64m, 1g (bare numbers are bytes).
// blobDeleteConfig is the built-in blob deleter's (store/blobs).
type blobDeleteConfig struct {
	containers []string
	perSecond  float64
	dryRun     bool
}

// envBlobConnectionString holds the blob deleter's connection string.
const envBlobConnectionString = "METADATAD_BLOB_CONNECTION_STRING"

// budgetSize is a storage budget: bytes, or a percentage of the data
// directory's filesystem, resolved when the store opens.
type budgetSize struct {
	bytes   byteSize
	percent float64
}

func (b *budgetSize) String() string {
	if b.percent > 0 {
		return strconv.FormatFloat(b.percent, 'g', -1, 64) + "%"
	}
	if b.bytes == 0 {
		return ""
	}
	return b.bytes.String()
}

func (b *budgetSize) Set(s string) error {
	if p, ok := strings.CutSuffix(s, "%"); ok {
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || v <= 0 || v > 100 {
			return fmt.Errorf("a percentage of the filesystem must be above 0 and at most 100, not %q", s)
		}
		*b = budgetSize{percent: v}
		return nil
	}
	*b = budgetSize{}
	return b.bytes.Set(s)
}

// set reports whether a budget was given.
func (b *budgetSize) set() bool { return b.bytes > 0 || b.percent > 0 }

// resolve is the budget in bytes for a filesystem of total bytes.
func (b *budgetSize) resolve(total uint64) uint64 {
	if b.percent > 0 {
		return uint64(float64(total) * b.percent / 100)
	}
	return uint64(b.bytes)
}

type byteSize int64

func (b *byteSize) String() string { return units.BytesSize(float64(*b)) }

func (b *byteSize) Set(s string) error {
	n, err := units.RAMInBytes(s)
	if err != nil {
		return err
	}
	if n <= 0 {
		return fmt.Errorf("size must be positive, not %q", s)
	}
	*b = byteSize(n)
	return nil
}

// azureConfig is how to reach Azure Storage.
type azureConfig struct {
	connectionString     string
	connectionStringFile string
	tableURL             string
	queueURL             string
	tablePrefix          string
	queue                string
}

// connectionStringFlag is the flag that puts the account key on the
// command line, which every user of the machine can read (ps).
const connectionStringFlag = "azure-connection-string"

// register adds the flags that reach Azure Table Storage, as the daemon
// and `metadatad copy` take them; when says when they apply, e.g. "with
// -store azure".
func (a *azureConfig) register(fs *flag.FlagSet, when string) {
	fs.StringVar(&a.connectionString, connectionStringFlag, "", when+": the storage account's full connection string; rather set $METADATAD_AZURE_CONNECTION_STRING or $AZURE_STORAGE_CONNECTION_STRING, or give -azure-connection-string-file: on the command line the account key is visible to every user of the machine (ps)")
	fs.StringVar(&a.connectionStringFile, "azure-connection-string-file", "", when+": a file holding the storage account's connection string, e.g. a mounted Secret (instead of $AZURE_STORAGE_CONNECTION_STRING)")
	fs.StringVar(&a.tableURL, "azure-table-url", "", when+" and no connection string: the table endpoint, e.g. https://ACCOUNT.table.core.windows.net, reached with DefaultAzureCredential")
	fs.StringVar(&a.tablePrefix, "azure-table-prefix", "", when+": prefix of every table name, to share an account between deployments")
}

// resolve fills in the connection string once fs is parsed (with its
// variables): from -azure-connection-string or
// $METADATAD_AZURE_CONNECTION_STRING, else
// from -azure-connection-string-file, else from
// $AZURE_STORAGE_CONNECTION_STRING. It warns of the flag given on the
// command line, where the account key is in every process listing.
func (a *azureConfig) resolve(fs *flag.FlagSet) (warnings []string, err error) {
	fs.Visit(func(f *flag.Flag) {
		if f.Name == connectionStringFlag {
			warnings = append(warnings, "-"+connectionStringFlag+" on the command line shows the storage account key to every user of this machine (ps); "+
				"set $METADATAD_AZURE_CONNECTION_STRING or $AZURE_STORAGE_CONNECTION_STRING, or give -azure-connection-string-file, instead")
		}
	})
	if a.connectionStringFile != "" {
		if a.connectionString != "" {
			return nil, errors.New("give -azure-connection-string-file or a connection string (-azure-connection-string, $METADATAD_AZURE_CONNECTION_STRING), not both")
		}
		b, err := os.ReadFile(a.connectionStringFile)
		if err != nil {
			return nil, fmt.Errorf("-azure-connection-string-file: %w", err)
		}
		if a.connectionString = strings.TrimSpace(string(b)); a.connectionString == "" {
			return nil, fmt.Errorf("-azure-connection-string-file %s is empty", a.connectionStringFile)
		}
	}
	if a.connectionString == "" {
		a.connectionString = os.Getenv("AZURE_STORAGE_CONNECTION_STRING")
	}
	return warnings, nil
}

// registerTables adds the flags naming the tables, as the daemon and
// `metadatad copy` take them; the returned function, called after parsing,
// fills in c.tables.
func (c *config) registerTables(fs *flag.FlagSet) (apply func()) {
	tables := map[images.Kind]*string{}
	for _, k := range images.Kinds {
		tables[k] = fs.String(k.String()+"-image-table", k.DefaultTable(), "primary table of "+k.String()+" images; its index is <name>Index")
	}
	fs.StringVar(&c.videoTable, "video-table", video.DefaultTable, "table of video metadata")
	fs.StringVar(&c.deviceStateTable, "device-state-table", devices.DefaultTable, "table of device orchestration state")
	fs.StringVar(&c.acquisitionTable, "acquisition-instance-table", acquisition.DefaultTable, "table of acquisition instances; active ones are also in <name>Active")
	return func() {
		for k, name := range tables {
			c.tables[k] = *name
		}
	}
}

func (c *config) checkStore() error {
	switch c.store {
	case "embedded":
		if c.replicaID == "" {
			// Only one process opens an embedded store, so every start is
			// the same replica and resumes its purges without waiting out
			// their lease.
			c.replicaID = "embedded"
		}
		// Pebble reserves 1.1 memtables on disk for each new write-ahead
		// log file. A floor below that lets the disk fill while the guard
		// still admits writes, and Pebble's ENOSPC stops the process
		// instead of the guard refusing the write.
		if walReserve := uint64(c.memTableSize) * 11 / 10; c.minFreeMiB > 0 && c.minFreeMiB<<20 < walReserve {
			return fmt.Errorf("-min-free-mib %d is below what one write-ahead log file reserves (1.1 x -memtable-size %s = %d MiB): raise it, or lower -memtable-size",
				c.minFreeMiB, &c.memTableSize, (walReserve+1<<20-1)>>20)
		}
	case "azure":
		if c.retentionMaxBytes.set() {
			return errors.New("-retention-max-bytes is for -store embedded: on Azure, storage is billed, not bounded; use retention policies")
		}
		a := c.azure
		switch {
		case a.connectionString == "" && a.tableURL == "":
			return errors.New("-store azure needs a connection string ($AZURE_STORAGE_CONNECTION_STRING, $METADATAD_AZURE_CONNECTION_STRING or -azure-connection-string-file), or -azure-table-url and -azure-queue-url")
		case a.connectionString != "" && a.tableURL != "":
			return errors.New("give a connection string or endpoint URLs, not both")
		case a.tableURL != "" && a.queueURL == "":
			return errors.New("-azure-table-url needs -azure-queue-url")
		case c.azureStartTimeout <= 0:
			return fmt.Errorf("-azure-start-timeout must be positive, not %s", c.azureStartTimeout)
		}
		if err := checkEndpoints(a.connectionString); err != nil {
			return err
		}
		if c.replicaID == "" {
			host, _ := os.Hostname()
			c.replicaID = fmt.Sprintf("%s-%d", host, os.Getpid())
		}
	default:
		return fmt.Errorf("-store must be embedded or azure, not %q", c.store)
	}
	if c.createTimeout <= 0 || c.landingMargin <= 0 {
		return errors.New("-create-timeout and -create-landing-margin must be positive")
	}
	if c.indexShards < 1 || c.indexShards > 1000 {
		return fmt.Errorf("-index-shards must be 1 to 1000, not %d", c.indexShards)
	}
	return nil
}

// checkEndpoints refuses a connection string that names one of the table
// and queue endpoints and not the other: the SDK would derive the missing
// one from AccountName, a public host name that an emulator's or a
// private endpoint's account does not answer on. Without either, both
// derive from AccountName and EndpointSuffix, as Azure's own strings do.
func checkEndpoints(connectionString string) error {
	if connectionString == "" {
		return nil
	}
	keys := map[string]bool{}
	for part := range strings.SplitSeq(connectionString, ";") {
		key, _, _ := strings.Cut(strings.TrimSpace(part), "=")
		keys[key] = true
	}
	switch {
	case keys["TableEndpoint"] && !keys["QueueEndpoint"]:
		return errors.New("the connection string has a TableEndpoint and no QueueEndpoint, which purges need: add QueueEndpoint=... (the SDK would otherwise derive a public host name from AccountName)")
	case keys["QueueEndpoint"] && !keys["TableEndpoint"]:
		return errors.New("the connection string has a QueueEndpoint and no TableEndpoint: add TableEndpoint=... (the SDK would otherwise derive a public host name from AccountName)")
	}
	return nil
}

// logger is the daemon's logger, writing to w.
func (c config) logger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.logLevel, ReplaceAttr: durationString}
	if c.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// durationString writes a duration as its string, 1.5s, rather than the
// nanoseconds JSON would print.
func durationString(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// purgeDesignFlags refuses the flags of the other backend's purge design.
// The embedded store purges in sections of one atomic batch each, paced by
// time while requests are served, without tasks, workers or a queue; Azure
// purges through a queue of tasks, paced by rows, since there a purge's
// cost follows its rows.
func (c *config) purgeDesignFlags(set map[string]bool) error {
	if c.store == "embedded" {
		for _, name := range []string{"purge-workers", "purge-queue", "purge-live-rows-per-second"} {
			if set[name] {
				return fmt.Errorf("-%s is for -store azure: the embedded store's purges have no tasks, workers or queue, and pace by time while serving (-purge-live-share)", name)
			}
		}
		c.purgeLiveRowsPerSec = 0
		return nil
	}
	for _, name := range []string{"purge-live-share", "purge-live-burst", "purge-section-time"} {
		if set[name] {
			return fmt.Errorf("-%s is for -store embedded: Azure's purges pace by rows while serving (-purge-live-rows-per-second)", name)
		}
	}
	return nil
}

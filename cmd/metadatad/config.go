package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/metadatad/metadatad/store/acquisition"
	"github.com/metadatad/metadatad/store/devices"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/video"
)

// config is the daemon's configuration. Every flag has an environment
// variable equivalent, METADATAD_ plus the flag name in upper snake case;
// a flag given on the command line wins over its variable.
type config struct {
	listen            string
	dataDir           string
	tables            map[images.Kind]string
	videoTable        string
	deviceStateTable  string
	acquisitionTable  string
	retentionDays     int
	retentionInterval time.Duration
	minRetentionDays  int
	purgeWorkers      int
	logLevel          slog.Level
	logFormat         string
	shutdownTimeout   time.Duration
}

func parseConfig(args []string) (config, error) {
	c := config{tables: map[images.Kind]string{}}
	fs := flag.NewFlagSet("metadatad", flag.ContinueOnError)
	fs.StringVar(&c.listen, "listen", "localhost:50051", "gRPC listen address")
	fs.StringVar(&c.dataDir, "data-dir", "data", "directory of the embedded store")
	tables := map[images.Kind]*string{}
	for _, k := range images.Kinds {
		tables[k] = fs.String(k.String()+"-image-table", k.DefaultTable(), "primary table of "+k.String()+" images; its index is <name>Index")
	}
	fs.StringVar(&c.videoTable, "video-table", video.DefaultTable, "table of video metadata")
	fs.StringVar(&c.deviceStateTable, "device-state-table", devices.DefaultTable, "table of device orchestration state")
	fs.StringVar(&c.acquisitionTable, "acquisition-instance-table", acquisition.DefaultTable, "table of acquisition instances; active ones are also in <name>Active")
	fs.IntVar(&c.retentionDays, "retention-days", 0, "with -retention-interval, purge images older than this many days on a schedule (off when 0)")
	fs.DurationVar(&c.retentionInterval, "retention-interval", 0, "how often the built-in schedule starts a purge, e.g. 1h (off when 0)")
	fs.IntVar(&c.minRetentionDays, "min-retention-days", 1, "the smallest retention_days StartPurge accepts")
	fs.IntVar(&c.purgeWorkers, "purge-workers", 4, "purge tasks this process runs at once")
	fs.TextVar(&c.logLevel, "log-level", slog.LevelInfo, "log level: debug, info, warn, error")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long shutdown waits for calls in flight")

	set := map[string]bool{}
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		env := "METADATAD_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok && !set[f.Name] && envErr == nil {
			if err := f.Value.Set(v); err != nil {
				envErr = fmt.Errorf("%s: %w", env, err)
			}
		}
	})
	if envErr != nil {
		return config{}, envErr
	}
	for k, name := range tables {
		c.tables[k] = *name
	}
	if (c.retentionDays > 0) != (c.retentionInterval > 0) {
		return config{}, fmt.Errorf("-retention-days and -retention-interval go together")
	}
	if c.retentionDays > 0 && c.retentionDays < c.minRetentionDays {
		return config{}, fmt.Errorf("-retention-days %d is below -min-retention-days %d", c.retentionDays, c.minRetentionDays)
	}
	if c.logFormat != "text" && c.logFormat != "json" {
		return config{}, fmt.Errorf("-log-format must be text or json, not %q", c.logFormat)
	}
	return c, nil
}

func (c config) logger() *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.logLevel}
	if c.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

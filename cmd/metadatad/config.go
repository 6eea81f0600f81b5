package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/metadatad/metadatad/store/images"
)

// config is the daemon's configuration. Every flag has an environment
// variable equivalent, METADATAD_ plus the flag name in upper snake case;
// a flag given on the command line wins over its variable.
type config struct {
	listen          string
	dataDir         string
	tables          map[images.Kind]string
	logLevel        slog.Level
	logFormat       string
	shutdownTimeout time.Duration
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

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
)

// subcommand is one of metadatad's words, `metadatad NAME -flags`.
type subcommand struct {
	name, summary string
	// run runs the command on the arguments after its name.
	run func(ctx context.Context, args []string, out io.Writer) error
	// flags defines the command's flags on fs, as run does: the
	// environment check knows every command's flags by it.
	flags func(fs *flag.FlagSet)
}

// commandList is metadatad's commands; without one, metadatad serves.
func commandList() []subcommand {
	return []subcommand{
		{"serve", "serve gRPC: what metadatad does without a command", serve, func(fs *flag.FlagSet) { new(config).register(fs) }},
		{"backup", "back up the embedded store, of a running server or a stopped one's data directory", runBackup, func(fs *flag.FlagSet) { new(backupFlags).register(fs) }},
		{"restore", "restore a backup into a new data directory", runRestore, func(fs *flag.FlagSet) { new(restoreFlags).register(fs) }},
		{"copy", "copy every table between the embedded store and Azure, resumable, verified", runCopy, func(fs *flag.FlagSet) { new(copyFlags).register(fs) }},
		{"compact", "rewrite the embedded store of a stopped server, giving purged space back", runCompact, func(fs *flag.FlagSet) { new(compactFlags).register(fs) }},
		{"blobs", "audit: the blobs of a container no image row names, and the rows whose blob is missing", runBlobs, func(fs *flag.FlagSet) { new(blobsFlags).register(fs) }},
		{"version", "print the module version, VCS revision and Go version", runVersion, nil},
		{"help", "print this help, or a command's: metadatad help COMMAND", runHelp, nil},
	}
}

func lookupCommand(name string) (subcommand, bool) {
	for _, c := range commandList() {
		if c.name == name {
			return c, true
		}
	}
	return subcommand{}, false
}

// run runs the command args name: none (flags first, or nothing) serves.
func run(args []string, out io.Writer) error {
	ctx := context.Background()
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return serve(ctx, args, out)
	}
	if c, ok := lookupCommand(args[0]); ok {
		return c.run(ctx, args[1:], out)
	}
	var names []string
	for _, c := range commandList() {
		names = append(names, c.name)
	}
	return &usageError{command: "metadatad", err: fmt.Errorf("unknown command %q%s", args[0], didYouMean("", args[0], names))}
}

// runVersion is `metadatad version`, as `metadatad -version`.
func runVersion(_ context.Context, args []string, out io.Writer) error {
	fs := newFlagSet("metadatad version")
	if _, err := parseFlags(fs, args, out); err != nil {
		return err
	}
	fmt.Fprintln(out, readBuildInfo())
	return nil
}

// runHelp is `metadatad help [COMMAND]`.
func runHelp(_ context.Context, args []string, out io.Writer) error {
	switch {
	case len(args) == 0:
		return run([]string{"-h"}, out)
	case len(args) > 1:
		return &usageError{command: "metadatad help", err: fmt.Errorf("unexpected argument %q: help takes one command", args[1])}
	}
	if _, ok := lookupCommand(args[0]); !ok {
		return run(args, out) // the unknown command's error
	}
	return run([]string{args[0], "-h"}, out)
}
